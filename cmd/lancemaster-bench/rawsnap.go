package main

import (
	"bufio"
	"encoding/gob"
	"fmt"
	"io"
	"math/rand"
	"os"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/hashicorp/raft"
)

// snapResult is the raw baseline's FSM-size figures (the snap mode of
// ../shared/bench/rawraft with codec gob): n records of ~200 B in a map.
type snapResult struct {
	Records        int     `json:"records"`
	HeapPerRecord  float64 `json:"heap_bytes_per_record"`
	FullScanMs     float64 `json:"full_scan_ms"`
	PersistMs      float64 `json:"persist_ms"`
	FsyncMs        float64 `json:"persist_close_fsync_ms"` // part of PersistMs`
	RestoreMs      float64 `json:"restore_ms"`
	BytesPerRecord float64 `json:"snapshot_bytes_per_record"`
}

// rawJob is the baseline's ~200-byte job record.
type rawJob struct {
	ID        string
	Queue     string
	State     uint8
	Attempt   uint32
	Node      string
	CreatedAt int64
	UpdatedAt int64
	Spec      string
}

// liveHeap is the heap in use after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	debug.FreeOSMemory()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// runRawSnap builds n records, measures their live heap and a naive full
// scan for PENDING (what a query costs without an index), then persists them
// with encoding/gob through a raft FileSnapshotStore (which fsyncs on Close)
// and restores them into a fresh map, reading to EOF so raft's CRC check runs.
func runRawSnap(o *options, n int) (snapResult, error) {
	dir, err := os.MkdirTemp(o.tmp, "rawsnap-")
	if err != nil {
		return snapResult{}, err
	}
	defer os.RemoveAll(dir)
	res := snapResult{Records: n}

	h0 := liveHeap()
	m := buildRawJobs(n)
	res.HeapPerRecord = float64(liveHeap()-h0) / float64(n)

	t := time.Now()
	pending := 0
	for _, j := range m {
		if j.State == 0 {
			pending++
		}
	}
	res.FullScanMs = ms(time.Since(t))

	store, err := raft.NewFileSnapshotStore(dir, 1, io.Discard)
	if err != nil {
		return res, err
	}
	_, trans := raft.NewInmemTransport("")
	t = time.Now()
	sink, err := store.Create(raft.SnapshotVersionMax, 100, 1, raft.Configuration{}, 1, trans)
	if err != nil {
		return res, err
	}
	if err := writeGob(sink, m); err != nil {
		sink.Cancel()
		return res, err
	}
	tc := time.Now()
	if err := sink.Close(); err != nil { // fsyncs the state and meta files
		return res, err
	}
	res.FsyncMs = ms(time.Since(tc))
	res.PersistMs = ms(time.Since(t))
	if metas, err := store.List(); err == nil && len(metas) > 0 {
		res.BytesPerRecord = float64(metas[0].Size) / float64(n)
	}
	m = nil
	liveHeap()

	t = time.Now()
	_, rc, err := store.Open(sink.ID())
	if err != nil {
		return res, err
	}
	got, err := readGob(rc)
	if cerr := rc.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return res, err
	}
	res.RestoreMs = ms(time.Since(t))
	if len(got) != n {
		return res, fmt.Errorf("rawsnap: restored %d records, want %d", len(got), n)
	}
	_ = pending
	return res, nil
}

func buildRawJobs(n int) map[string]*rawJob {
	const alpha = "abcdefghijklmnopqrstuvwxyz0123456789"
	rng := rand.New(rand.NewSource(1))
	m := make(map[string]*rawJob, n)
	for i := 0; i < n; i++ {
		spec := make([]byte, 96)
		for j := range spec {
			spec[j] = alpha[rng.Intn(len(alpha))]
		}
		id := fmt.Sprintf("job-%012d", i)
		m[id] = &rawJob{
			ID: id, Queue: "default", State: uint8(i % 5), Attempt: uint32(i % 3),
			Node: fmt.Sprintf("worker-%04d", i%1000), CreatedAt: 1_700_000_000_000_000_000 + int64(i),
			UpdatedAt: 1_700_000_000_000_000_000 + int64(2*i), Spec: string(spec),
		}
	}
	return m
}

func writeGob(w io.Writer, m map[string]*rawJob) error {
	bw := bufio.NewWriterSize(w, 256<<10)
	enc := gob.NewEncoder(bw)
	if err := enc.Encode(uint64(len(m))); err != nil {
		return err
	}
	for _, j := range m {
		if err := enc.Encode(j); err != nil {
			return err
		}
	}
	return bw.Flush()
}

func readGob(r io.Reader) (map[string]*rawJob, error) {
	br := bufio.NewReaderSize(r, 256<<10)
	dec := gob.NewDecoder(br)
	var n uint64
	if err := dec.Decode(&n); err != nil {
		return nil, err
	}
	m := make(map[string]*rawJob, n)
	for i := uint64(0); i < n; i++ {
		j := new(rawJob)
		if err := dec.Decode(j); err != nil {
			return nil, fmt.Errorf("rawsnap: decode record %d: %w", i, err)
		}
		m[j.ID] = j
	}
	_, err := io.Copy(io.Discard, br) // to EOF: raft checks the CRC there
	return m, err
}
