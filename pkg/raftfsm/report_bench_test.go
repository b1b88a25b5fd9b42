package raftfsm

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/hashicorp/raft"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/options"
)

// The lifecycle's entries after a build, as the reports benchmark makes
// them (cmd/lancemaster-bench, -only reports): a ReportBatch of 10 NATIVE_OK
// reports (each its proof and its result), then the refresh driver's R1 and
// R2 batches for the same jobs, applied to a state that holds 20,000
// RUNNING jobs. Each of a cluster's replicas pays these per entry.
// Reported per job (ns/job).
const (
	lifeBenchRunning  = 20_000
	lifeBenchPerEntry = 10
)

// lifeBench is a harness holding lifeBenchRunning RUNNING jobs.
func lifeBench(b *testing.B) (*harness, []*job.Record) {
	h := newHarness(b)
	cat := h.createCatalog("lake", testRoot)
	be := h.addBackend("be1:9060")
	for _, k := range []string{options.OptMaxUnresolvedGlobal, options.OptMaxUnresolvedPerCatalog, options.OptMaxUnresolvedPerTable} {
		h.setOption(k, strconv.Itoa(1<<30))
	}
	raw := func(ct CommandType, cmd thrift.TStruct) { h.applyRaw(encodeOrFail(b, ct, cmd)) }
	for i := 0; i < lifeBenchRunning; i += 64 {
		c := &journal.TAdmitBatch{NowMs: h.now}
		for j := i; j < min(i+64, lifeBenchRunning); j++ {
			c.Jobs = append(c.Jobs, RecordToThrift(newJob(cat, testRoot, "d", fmt.Sprintf("t%d", j), "id_idx", job.Create)))
		}
		raw(CmdAdmitBatch, c)
	}
	pending := h.st().PendingInIDOrder(lifeBenchRunning)
	for i := 0; i < len(pending); i += 64 {
		m := &journal.TMarkRunningBatch{NowMs: h.now}
		for _, r := range pending[i:min(i+64, len(pending))] {
			m.Jobs = append(m.Jobs, markCmd(r, be))
		}
		raw(CmdMarkRunningBatch, m)
	}
	running := make([]*job.Record, len(pending))
	for i, r := range pending {
		running[i] = h.job(r.JobID)
		if running[i].MutationState != job.Running {
			b.Fatalf("job %d is %v after M1", r.JobID, running[i].MutationState)
		}
	}
	return h, running
}

// applyEach applies entries[i % len] to the same view, b.N times.
func applyEach(b *testing.B, h *harness, entries [][]byte) {
	s := h.st()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		// The state is persistent: each iteration copies what it changes
		// and the view stays as it is.
		h.f.state.Store(s)
		resp := h.f.Apply(&raft.Log{Index: h.index + 1, Data: entries[i%len(entries)]}).(*journal.TApplyResponse)
		if resp.GetCode() != journal.TApplyCode_OK || resp.Items[0].Code != journal.TApplyCode_OK {
			b.Fatalf("entry: %v", resp)
		}
		i++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*lifeBenchPerEntry), "ns/job")
}

func encodeOrFail(b *testing.B, ct CommandType, cmd thrift.TStruct) []byte {
	data, err := Encode(ct, cmd)
	if err != nil {
		b.Fatal(err)
	}
	return data
}

// BenchmarkApplyReportBatch: P and M2 of 10 jobs in one entry.
func BenchmarkApplyReportBatch(b *testing.B) {
	h, running := lifeBench(b)
	var entries [][]byte
	for i := 0; i+lifeBenchPerEntry <= len(running) && len(entries) < 64; i += lifeBenchPerEntry * 31 {
		c := &journal.TReportBatch{NowMs: h.now}
		for _, r := range running[i : i+lifeBenchPerEntry] {
			c.Reports = append(c.Reports, &journal.TReportItem{Proof: proofCmd(r, job.ProofChildReaped),
				Completion: completion(r, job.NativeOK, true)})
		}
		entries = append(entries, encodeOrFail(b, CmdReportBatch, c))
	}
	applyEach(b, h, entries)
}

// BenchmarkApplyRefreshBatch: R1 then R2 of 10 COMMITTED jobs, one entry
// each (measured together).
func BenchmarkApplyRefreshBatch(b *testing.B) {
	h, running := lifeBench(b)
	batch := running[:lifeBenchPerEntry]
	c := &journal.TReportBatch{NowMs: h.now}
	for _, r := range batch {
		c.Reports = append(c.Reports, &journal.TReportItem{Proof: proofCmd(r, job.ProofChildReaped),
			Completion: completion(r, job.NativeOK, true)})
	}
	h.applyRaw(encodeOrFail(b, CmdReportBatch, c))
	r1 := &journal.TRefreshBatch{NowMs: h.now}
	r2 := &journal.TRefreshBatch{NowMs: h.now}
	for _, r := range batch {
		got := h.job(r.JobID)
		if got.MutationState != job.Committed || got.RefreshState != job.RefreshRequired {
			b.Fatalf("job %d after its report: %v, refresh %v", r.JobID, got.MutationState, got.RefreshState)
		}
		r1.Transitions = append(r1.Transitions, &journal.TRefreshTransition{JobID: got.JobID, ExpectedRev: got.Rev,
			ToState: journal.TRefreshState(job.RefreshRunning)})
		r2.Transitions = append(r2.Transitions, &journal.TRefreshTransition{JobID: got.JobID, ExpectedRev: got.Rev + 1,
			ToState: journal.TRefreshState(job.RefreshDone)})
	}
	e1, e2 := encodeOrFail(b, CmdRefreshBatch, r1), encodeOrFail(b, CmdRefreshBatch, r2)
	s := h.st()
	b.ReportAllocs()
	for b.Loop() {
		h.f.state.Store(s)
		for _, e := range [][]byte{e1, e2} {
			resp := h.f.Apply(&raft.Log{Index: h.index + 1, Data: e}).(*journal.TApplyResponse)
			if resp.GetCode() != journal.TApplyCode_OK || resp.Items[0].Code != journal.TApplyCode_OK {
				b.Fatalf("refresh entry: %v", resp)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*lifeBenchPerEntry), "ns/job")
}
