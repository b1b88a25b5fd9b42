package raftfsm

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/options"
)

// BenchmarkApplyAdmitBatch is one CmdAdmitBatch entry as the admission
// benchmark's group commit makes them (cmd/lancemaster-bench, c = 256): 37
// CREATE jobs, each on a table of its own, applied to a state that already
// holds 50,000 unresolved jobs on as many tables. Each of a cluster's
// replicas pays this per entry. Reported per job (ns/job).
func BenchmarkApplyAdmitBatch(b *testing.B) {
	const held, perEntry = 50_000, 37
	h := newHarness(b)
	cat := h.createCatalog("lake", testRoot)
	for _, k := range []string{options.OptMaxUnresolvedGlobal, options.OptMaxUnresolvedPerCatalog, options.OptMaxUnresolvedPerTable} {
		h.setOption(k, strconv.Itoa(1<<30))
	}
	batch := func(from int) []byte {
		c := &journal.TAdmitBatch{NowMs: h.now}
		for i := from; i < from+perEntry; i++ {
			c.Jobs = append(c.Jobs, RecordToThrift(newJob(cat, testRoot, "d", fmt.Sprintf("t%d_%d", i%256, i), "id_idx", job.Create)))
		}
		data, err := Encode(CmdAdmitBatch, c)
		if err != nil {
			b.Fatal(err)
		}
		return data
	}
	next := 0
	for ; next < held; next += perEntry {
		h.applyRaw(batch(next))
	}
	s := h.st()
	entries := make([][]byte, 64)
	for i := range entries {
		entries[i] = batch(next + i*perEntry)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		// Each entry on the same view: the state is persistent, so every
		// iteration copies what it changes and the view stays as it is.
		h.f.state.Store(s)
		resp := h.f.Apply(&raft.Log{Index: uint64(held + i), Data: entries[i%len(entries)]}).(*journal.TApplyResponse)
		if resp.GetCode() != journal.TApplyCode_OK || resp.Items[0].Code != journal.TApplyCode_OK {
			b.Fatalf("admit batch: %v", resp)
		}
		i++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*perEntry), "ns/job")
}
