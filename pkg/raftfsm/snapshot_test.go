package raftfsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/hashicorp/raft"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
)

// walked returns a harness after a random walk, with a few options set so
// the header's option list has several keys.
func walked(t *testing.T, seed uint64, steps int) *harness {
	w := newWalker(t, seed)
	for i := 0; i < steps; i++ {
		w.step()
	}
	w.h.setOption("lance_index_job_dispatcher_paused", "true")
	w.h.setOption("enable_lance_index_local_file_mutation", "true")
	return w.h
}

func restored(t *testing.T, data []byte) *FSM {
	t.Helper()
	f := New(nil)
	if err := f.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatalf("restore: %v", err)
	}
	return f
}

// sameView compares everything a State answers.
func sameView(t *testing.T, a, b *State) {
	t.Helper()
	ja, _ := a.ListJobs(JobFilter{}, 0, 0)
	jb, _ := b.ListJobs(JobFilter{}, 0, 0)
	if !reflect.DeepEqual(ja, jb) {
		t.Fatalf("records differ")
	}
	queries := map[string]func(s *State) any{
		"pending":  func(s *State) any { return jobIDs(s.PendingInIDOrder(0)) },
		"running":  func(s *State) any { return jobIDs(s.RunningByDeadline(math.MaxInt64, 0)) },
		"slots1":   func(s *State) any { return jobIDs(s.SlotHolders(1)) },
		"held2":    func(s *State) any { return s.HeldSlots(2) },
		"due":      func(s *State) any { return jobIDs(s.RefreshDue(0)) },
		"rrunning": func(s *State) any { return jobIDs(s.RefreshRunning()) },
		"gc":       func(s *State) any { return s.GCEligible(math.MaxInt64, 0) },
		"catalog1": func(s *State) any { l, _ := s.ListJobs(JobFilter{CatalogID: 1}, 0, 0); return jobIDs(l) },
		"books":    func(s *State) any { return s.Books() },
		"catalogs": func(s *State) any { return s.Catalogs() },
		"backends": func(s *State) any { return s.Backends() },
		"options":  func(s *State) any { return s.OptionValues() },
		"resolved": func(s *State) any { return s.Options() },
		"lastjob":  func(s *State) any { return s.LastJobID() },
		"corrupt":  func(s *State) any { return s.CorruptUnresolved() },
		"inuse":    func(s *State) any { return s.UnresolvedInCatalog(1) },
	}
	for name, q := range queries {
		if x, y := q(a), q(b); !reflect.DeepEqual(x, y) {
			t.Fatalf("%s differs:\n%v\n%v", name, x, y)
		}
	}
}

func TestSnapshotRestoreRoundTrip(t *testing.T) {
	h := walked(t, 5, 600)
	data := snapshotBytes(t, h.st())
	f := restored(t, data)
	sameView(t, h.st(), f.State())
	checkAgainstBruteForce(t, f.State())
	if !bytes.Equal(data, snapshotBytes(t, f.State())) {
		t.Fatalf("a restored FSM writes a different snapshot")
	}
	// Both continue identically: the same entries give the same responses
	// (ids keep counting from the snapshot) and the same state.
	w := newWalker(t, 77)
	w.h.f, w.h.index = f, h.index
	start := len(w.h.log)
	for i := 0; i < 200; i++ {
		w.step()
	}
	for _, entry := range w.h.log[start:] {
		h.applyRaw(entry)
	}
	if f.State().LastJobID() == h.st().LastJobID() && bytes.Equal(data, snapshotBytes(t, f.State())) {
		t.Fatalf("the continuation changed nothing")
	}
	if !bytes.Equal(snapshotBytes(t, h.st()), snapshotBytes(t, f.State())) {
		t.Fatalf("original and restored FSM diverged after the same entries")
	}
}

func TestTwoFSMsSameLogSameSnapshot(t *testing.T) {
	h := walked(t, 11, 800)
	one, twin := newHarness(t), newHarness(t)
	for i, entry := range h.log {
		a, _ := EncodeResponse(one.applyRaw(entry).(*journal.TApplyResponse))
		b, _ := EncodeResponse(twin.applyRaw(entry).(*journal.TApplyResponse))
		if !bytes.Equal(a, b) {
			t.Fatalf("entry %d: responses differ", i)
		}
	}
	if !bytes.Equal(snapshotBytes(t, one.st()), snapshotBytes(t, h.st())) {
		t.Fatalf("a replay differs from the original")
	}
	a, b := snapshotBytes(t, h.st()), snapshotBytes(t, twin.st())
	if !bytes.Equal(a, b) {
		t.Fatalf("snapshots of the same log differ (%d vs %d bytes)", len(a), len(b))
	}
	if twin.st().AppliedIndex() != h.st().AppliedIndex() {
		t.Fatalf("applied index differs")
	}
}

// memSink is a raft.SnapshotSink over a buffer.
type memSink struct {
	bytes.Buffer
	closed, cancelled bool
	failWrites        bool
}

func (s *memSink) Write(p []byte) (int, error) {
	if s.failWrites {
		return 0, errors.New("disk full")
	}
	return s.Buffer.Write(p)
}
func (s *memSink) Close() error  { s.closed = true; return nil }
func (s *memSink) Cancel() error { s.cancelled = true; return nil }
func (s *memSink) ID() string    { return "mem" }

var _ raft.SnapshotSink = (*memSink)(nil)

func TestPersistStreamsTheCapturedView(t *testing.T) {
	h := walked(t, 3, 300)
	var captured bytes.Buffer
	if err := h.st().WriteSnapshot(&captured); err != nil {
		t.Fatal(err)
	}
	want := captured.Bytes()
	snap, err := h.f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	// Persist runs concurrently with Apply; it must see the captured view.
	done := make(chan struct{})
	sink := &memSink{}
	go func() {
		defer close(done)
		if err := snap.Persist(sink); err != nil {
			t.Errorf("persist: %v", err)
		}
	}()
	h.setOption("lance_index_job_max_unresolved_global", "1000")
	h.setOption("lance_index_job_max_unresolved_per_catalog", "1000")
	late := h.createCatalog("late", testRoot)
	for i := 0; i < 50; i++ {
		h.admit(late, "db", "late"+itoa(int64(i)), "idx")
	}
	<-done
	if bytes.Equal(snapshotBytes(t, h.st()), snapshotBytes(t, restored(t, want).State())) {
		t.Fatalf("the concurrent entries changed nothing")
	}
	if !sink.closed || sink.cancelled || !bytes.Equal(sink.Bytes(), want) {
		t.Fatalf("persisted %d bytes (closed %t), want the captured %d", sink.Len(), sink.closed, len(want))
	}
	failing := &memSink{failWrites: true}
	if err := snap.Persist(failing); err == nil || !failing.cancelled || failing.closed {
		t.Fatalf("a failed persist must cancel the sink: err %v", err)
	}
}

// frames splits a snapshot into its magic and frames.
func frames(t *testing.T, data []byte) [][]byte {
	t.Helper()
	data = data[len(snapshotMagic):]
	var out [][]byte
	for len(data) > 0 {
		n := binary.BigEndian.Uint32(data)
		out = append(out, data[4:4+n])
		data = data[4+n:]
	}
	return out
}

func join(fs [][]byte) []byte {
	out := []byte(snapshotMagic)
	for _, f := range fs {
		out = binary.BigEndian.AppendUint32(out, uint32(len(f)))
		out = append(out, f...)
	}
	return out
}

func encodeFrame(t testing.TB, s thrift.TStruct) []byte {
	t.Helper()
	buf := thrift.NewTMemoryBuffer()
	if err := writeCompact(buf, s); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestRestoreRefusesBadStreams(t *testing.T) {
	h, _, _ := pendingFixture(t)
	h.admit(1, "db", "t2", "idx")
	good := snapshotBytes(t, h.st())
	fs := frames(t, good)
	header := journal.NewTSnapshotHeader()
	if err := decodeCompact(fs[0], header); err != nil {
		t.Fatal(err)
	}
	v2 := *header
	v2.FormatVersion = 2
	wrongCount := *header
	wrongCount.JobCount = thrift.Int64Ptr(5)
	swapped := append([][]byte{}, fs...)
	n := len(swapped)
	swapped[n-2], swapped[n-3] = swapped[n-3], swapped[n-2] // two jobs out of id order
	cases := map[string][]byte{
		"bad magic":        append([]byte("XXSNAP"), good[6:]...),
		"empty":            nil,
		"truncated":        good[:len(good)-5],
		"no last item":     join(fs[:len(fs)-1]),
		"format version 2": join(append([][]byte{encodeFrame(t, &v2)}, fs[1:]...)),
		"count mismatch":   join(append([][]byte{encodeFrame(t, &wrongCount)}, fs[1:]...)),
		"ids out of order": join(swapped),
		"huge frame":       append([]byte(snapshotMagic), 0xff, 0xff, 0xff, 0xff),
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			f := New(nil)
			f.Restore(io.NopCloser(bytes.NewReader(good)))
			before := f.State()
			err := f.Restore(io.NopCloser(bytes.NewReader(data)))
			if !errors.Is(err, ErrSnapshotFormat) {
				t.Fatalf("err = %v", err)
			}
			if name == "format version 2" && !strings.Contains(err.Error(), "version 2") {
				t.Fatalf("error %q does not name the version", err)
			}
			if f.State() != before {
				t.Fatalf("a failed restore replaced the state")
			}
		})
	}
}

func TestSnapshotMissingStatesReadFailClosed(t *testing.T) {
	h, id, _ := pendingFixture(t)
	s := h.st()
	r := RecordToThrift(h.job(id))
	r.MutationState, r.RefreshState = nil, nil
	fs := frames(t, snapshotBytes(t, s))
	// Frames: header, catalog, 2 backends, job, last.
	fs[4] = encodeFrame(t, &journal.TSnapshotItem{Job: r})
	f := restored(t, join(fs))
	got, _ := f.State().Job(id)
	if got.MutationState != job.Unknown || got.RefreshState != job.RefreshRequired {
		t.Fatalf("read as %s/%s", got.MutationState, got.RefreshState)
	}
	// UNKNOWN holds the fence until force-released; REQUIRED makes it refresh-due.
	if !got.Unresolved() || len(f.State().UnresolvedForFence(got.Fence())) != 1 || len(f.State().RefreshDue(0)) != 1 {
		t.Fatalf("fail-closed reading did not hold the fence")
	}
}

func TestRestoreKeepsIDsAboveRestoredRecords(t *testing.T) {
	h, id, _ := pendingFixture(t)
	s := h.st()
	m := *s.m
	m.lastJobID = 0 // a header that lags its records
	var buf bytes.Buffer
	writeSnapshotFrom(t, &buf, &m, s.Catalogs(), s.Backends(), []*job.Record{h.job(id)})
	if err := h.f.Restore(io.NopCloser(&buf)); err != nil {
		t.Fatal(err)
	}
	if next := h.admit(1, "db", "t9", "idx"); next != id+1 {
		t.Fatalf("next id = %d, want %d", next, id+1)
	}
}
