package raftfsm

import (
	"strings"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
)

const (
	announcedUUID = "0b5d6f9e-3c1a-4e2b-9f7d-1a2b3c4d5e6f"
	reportedUUID  = "11111111-2222-3333-4444-555555555555"
)

func testResources() *journal.TResources {
	return ResourcesToThrift(&job.Resources{StartTimeMs: 100, FinishTimeMs: 1600, WallMs: 1400, PeakMemoryBytes: 300 << 20,
		PeakMemorySource: job.PeakFromCgroup})
}

func progressItem(r *job.Record, uuid, phase string, elapsed int64) *journal.TReportItem {
	p := &journal.TProgress{JobID: r.JobID, DispatchRevision: r.DispatchRevision, InvocationID: r.InvocationID,
		ProcessEpoch: r.ProcessEpoch, ElapsedMs: thrift.Int64Ptr(elapsed)}
	if uuid != "" {
		p.IndexUUID = thrift.StringPtr(uuid)
	}
	if phase != "" {
		p.Phase = thrift.StringPtr(phase)
	}
	return &journal.TReportItem{Progress: p}
}

// M1 stamps the dispatch time and clears what the previous dispatch's
// build said; progress records the worker's elapsed time and when it was
// applied; the result stores the resources and the log tail.
func TestBuildInfoThroughADispatch(t *testing.T) {
	h, id, be := pendingFixture(t)
	h.now = 1000
	r := h.run(id, be)
	if r.DispatchTimeMs != 1000 {
		t.Fatalf("dispatch time %d", r.DispatchTimeMs)
	}
	h.now = 2000
	wantItem(t, h.report(progressItem(r, "", "ivf_training", 750)), journal.TApplyCode_OK)
	if got := h.job(id); got.BuildPhase != "ivf_training" || got.BuildElapsedMs != 750 || got.ProgressTimeMs != 2000 {
		t.Fatalf("after progress %+v", got)
	}
	h.now = 3000
	c := completion(r, job.NativeOK, true)
	c.Resources, c.LogTail = testResources(), thrift.StringPtr("last line\n")
	wantItem(t, h.complete(c), journal.TApplyCode_OK)
	got := h.job(id)
	want := job.Resources{StartTimeMs: 100, FinishTimeMs: 1600, WallMs: 1400, PeakMemoryBytes: 300 << 20, PeakMemorySource: "cgroup"}
	if got.Resources != want || got.LogTail != "last line\n" || got.LeftoverIndexUUID != "" || got.BuildElapsedMs != 750 {
		t.Fatalf("after the result %+v", got)
	}
	// Snapshot and restore keep every field.
	h.restoreWith(t, func(rs []*job.Record) []*job.Record { return rs })
	if again := h.job(id); *again != *got {
		t.Fatalf("restored\n got %+v\nwant %+v", again, got)
	}
}

// A termination report's proof carries the resources and the log tail.
func TestProofCarriesBuildInfo(t *testing.T) {
	h, id, be := pendingFixture(t)
	r := h.run(id, be)
	p := proofCmd(r, job.ProofChildReaped)
	p.FinishedWithoutResult_, p.Resources, p.LogTail = thrift.BoolPtr(true), testResources(), thrift.StringPtr("killed\n")
	wantItem(t, h.proof(p), journal.TApplyCode_OK)
	if got := h.job(id); got.MutationState != job.Resolving || got.Resources.WallMs != 1400 || got.LogTail != "killed\n" {
		t.Fatalf("%+v", got)
	}
}

// A log tail above the bound is refused and changes nothing.
func TestOversizedLogTailRefused(t *testing.T) {
	h, id, be := pendingFixture(t)
	r := h.run(id, be)
	before := h.st()
	c := completion(r, job.NativeOK, true)
	c.LogTail = thrift.StringPtr(strings.Repeat("x", job.MaxLogTailBytes+1))
	wantItem(t, h.complete(c), journal.TApplyCode_INVALID)
	p := proofCmd(r, job.ProofChildReaped)
	p.LogTail = c.LogTail
	wantItem(t, h.proof(p), journal.TApplyCode_INVALID)
	h.unchanged(before)
}

// The leftover index directory (docs/decisions.md): a NOT_COMMITTED job
// keeps the uuid the result names, else the uuid its worker announced; a
// COMMITTED one has none, an UNKNOWN one neither; the next M1 clears it.
func TestLeftoverIndexUUID(t *testing.T) {
	for _, c := range []struct {
		name      string
		code      job.ResultCode
		announced string
		reported  string
		want      string
	}{
		{"reported", job.NativeCommitConflict, announcedUUID, reportedUUID, reportedUUID},
		{"announced", job.NativeCommitConflict, announcedUUID, "", announcedUUID},
		{"none", job.NativeCommitConflict, "", "", ""},
		{"unknown", job.NativeInternal, announcedUUID, reportedUUID, ""},
		{"committed", job.NativeOK, announcedUUID, reportedUUID, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, id, be := pendingFixture(t)
			r := h.run(id, be)
			if c.announced != "" {
				wantItem(t, h.report(progressItem(r, c.announced, "building", 1)), journal.TApplyCode_OK)
			}
			m := completion(r, c.code, false)
			if c.reported != "" {
				m.LeftoverIndexUUID = thrift.StringPtr(c.reported)
			}
			wantItem(t, h.complete(m), journal.TApplyCode_OK)
			if got := h.job(id); got.LeftoverIndexUUID != c.want {
				t.Fatalf("%s: leftover %q, want %q (%+v)", got.MutationState, got.LeftoverIndexUUID, c.want, got)
			}
		})
	}
}

// M1 of a later dispatch (after an M2″ return) starts with no build info.
func TestMarkRunningClearsBuildInfo(t *testing.T) {
	h, id, be := pendingFixture(t)
	h.now = 1000
	r := h.run(id, be)
	wantItem(t, h.report(progressItem(r, "", "building", 5)), journal.TApplyCode_OK)
	ret := completion(r, job.PreInvocationResourceRejected, false)
	ret.NeverEnqueued, ret.ReturnToPending = thrift.BoolPtr(true), thrift.BoolPtr(true)
	wantItem(t, h.complete(ret), journal.TApplyCode_OK)
	h.now = 5000
	got := h.run(id, be)
	if got.DispatchTimeMs != 5000 || got.BuildElapsedMs != 0 || got.ProgressTimeMs != 0 || got.LogTail != "" ||
		got.Resources != (job.Resources{}) || got.LeftoverIndexUUID != "" {
		t.Fatalf("%+v", got)
	}
}
