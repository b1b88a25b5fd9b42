package raftfsm

import (
	"bytes"
	"io"
	"strconv"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/options"
)

// The transitions of DESIGN.md §13, through Apply.

func returnCmd(r *job.Record, msg string) *journal.TCompletion {
	c := completion(r, job.PreInvocationResourceRejected, false)
	c.Result_.Message = thrift.StringPtr(msg)
	c.NeverEnqueued, c.ReturnToPending = thrift.BoolPtr(true), thrift.BoolPtr(true)
	return c
}

// M2″: a refusal returns the job to PENDING with its slot released and its
// attempt count +1, in one entry; the next M1 mints a fresh identity, and a
// report of the refused dispatch changes nothing.
func TestReturnToPending(t *testing.T) {
	h, id, be := pendingFixture(t)
	first := h.run(id, be)
	if h.st().HeldSlots(be) != 1 {
		t.Fatalf("M1 did not take the slot")
	}
	// (A dispatch refused after its worker announced something cannot
	// happen; the FSM still keeps announcements with their dispatch.)
	wantItem(t, h.report(&journal.TReportItem{Progress: &journal.TProgress{JobID: id, DispatchRevision: first.DispatchRevision,
		InvocationID: first.InvocationID, ProcessEpoch: first.ProcessEpoch, IndexUUID: thrift.StringPtr("u-0"),
		Phase: thrift.StringPtr("building")}}), journal.TApplyCode_OK)
	wantItem(t, h.complete(returnCmd(h.job(id), "refused: SHUTTING_DOWN")), journal.TApplyCode_OK)
	got := h.job(id)
	switch {
	case got.MutationState != job.Pending:
		t.Fatalf("state %s, want PENDING", got.MutationState)
	case got.DispatchAttempts != 1 || got.TerminationMessage != "refused: SHUTTING_DOWN":
		t.Fatalf("attempts %d, message %q", got.DispatchAttempts, got.TerminationMessage)
	case got.PossibleLiveOwned || got.TerminationProof != job.ProofNotEnqueued || h.st().HeldSlots(be) != 0:
		t.Fatalf("slot not released with NOT_ENQUEUED: %+v", got)
	case got.Result != (job.Result{}) || !got.Unresolved():
		t.Fatalf("a PENDING job has a result or lost its fence: %+v", got)
	}
	if n := len(recomputeBooks(h.st()).Fence); n != 1 || !equalBooks(h.st()) {
		t.Fatalf("fence books after M2″: %d entries, consistent %v", n, equalBooks(h.st()))
	}
	// The refused dispatch's result, proof and progress are all stale now.
	before := h.st()
	wantItem(t, h.complete(completion(first, job.NativeOK, false)), journal.TApplyCode_CAS_FAILED)
	wantItem(t, h.report(&journal.TReportItem{Progress: &journal.TProgress{JobID: id, DispatchRevision: first.DispatchRevision,
		InvocationID: first.InvocationID, ProcessEpoch: first.ProcessEpoch, IndexUUID: thrift.StringPtr("u-1")}}), journal.TApplyCode_CAS_FAILED)
	h.unchanged(before)
	// A second M1: a fresh invocation, slot taken again.
	second := h.run(id, be)
	if second.InvocationID == first.InvocationID || second.DispatchRevision == first.DispatchRevision {
		t.Fatalf("the second dispatch reuses the first identity")
	}
	if !second.PossibleLiveOwned || second.TerminationProof != job.ProofNone || second.DispatchAttempts != 1 ||
		second.IndexUUID != "" || second.BuildPhase != "" {
		t.Fatalf("second dispatch: %+v", second)
	}
	// Without return_to_pending it is M2' as before: NOT_COMMITTED.
	c := returnCmd(second, "refused again")
	c.ReturnToPending = nil
	wantItem(t, h.complete(c), journal.TApplyCode_OK)
	if got := h.job(id); got.MutationState != job.NotCommitted || got.TerminationProof != job.ProofNotEnqueued {
		t.Fatalf("M2' after M2″: %+v", got)
	}
}

// P with finished_without_result moves a RUNNING job to RESOLVING in the
// same entry, with the cause and the announced uuid; the outcome from the
// dataset is then an M2 with reason RESOLVED_FROM_DATASET.
func TestFinishedWithoutResultResolves(t *testing.T) {
	for _, tc := range []struct {
		name      string
		code      job.ResultCode
		reason    job.CompletionReason
		wantState job.MutationState
		wantRefr  job.RefreshState
	}{
		{"committed", job.NativeOK, job.ReasonResolvedFromDataset, job.Committed, job.RefreshRequired},
		{"not committed", job.NoTrustedResult, job.ReasonResolvedFromDataset, job.NotCommitted, job.RefreshNotRequired},
		{"no proof", job.NoTrustedResult, job.ReasonNone, job.Unknown, job.RefreshNotRequired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, id, be := pendingFixture(t)
			r := h.run(id, be)
			p := proofCmd(r, job.ProofChildReaped)
			p.FinishedWithoutResult_ = thrift.BoolPtr(true)
			p.Message = thrift.StringPtr("killed by the memory limit")
			p.IndexUUID = thrift.StringPtr("uuid-announced")
			p.ResolveAfterMs = thrift.Int64Ptr(9000)
			wantItem(t, h.proof(p), journal.TApplyCode_OK)
			got := h.job(id)
			if got.MutationState != job.Resolving || got.HoldsPossibleLiveSlot() || !got.Unresolved() ||
				got.TerminationMessage != "killed by the memory limit" || got.IndexUUID != "uuid-announced" || got.ResolveAfterMs != 9000 {
				t.Fatalf("after P: %+v", got)
			}
			if due := h.st().ResolvingDue(8999, 0); len(due) != 0 {
				t.Fatalf("due before resolve_after: %v", due)
			}
			if due := h.st().ResolvingDue(9000, 0); len(due) != 1 || due[0].JobID != id {
				t.Fatalf("not due at resolve_after: %v", due)
			}
			// The same proof again: nothing left to do.
			before := h.st()
			wantItem(t, h.proof(p), journal.TApplyCode_NOOP)
			h.unchanged(before)
			// M2'/M2″ from RESOLVING contradict the proof: refused.
			wantItem(t, h.complete(returnCmd(got, "x")), journal.TApplyCode_CAS_FAILED)
			h.unchanged(before)

			c := completion(got, tc.code, false)
			c.Result_.Reason = ptr(journal.TCompletionReason(tc.reason))
			c.IndexUUID = thrift.StringPtr("uuid-announced")
			wantItem(t, h.complete(c), journal.TApplyCode_OK)
			got = h.job(id)
			if got.MutationState != tc.wantState || got.RefreshState != tc.wantRefr || got.Result.Reason != tc.reason {
				t.Fatalf("outcome: %s refresh %s reason %s", got.MutationState, got.RefreshState, got.Result.Reason)
			}
			if !equalBooks(h.st()) {
				t.Fatalf("books drifted")
			}
		})
	}
}

// The slot part of a finished-without-result proof may already be done (the
// epoch sweep released it); the state part still applies.
func TestFinishedWithoutResultAfterEpochProof(t *testing.T) {
	h, id, be := pendingFixture(t)
	r := h.run(id, be)
	wantItem(t, h.proof(proofCmd(r, job.ProofProcessEpochGone)), journal.TApplyCode_OK)
	if got := h.job(id); got.MutationState != job.Running || got.HoldsPossibleLiveSlot() {
		t.Fatalf("epoch proof: %+v", got)
	}
	p := proofCmd(r, job.ProofProcessEpochGone)
	p.FinishedWithoutResult_ = thrift.BoolPtr(true)
	wantItem(t, h.proof(p), journal.TApplyCode_OK)
	if got := h.job(id); got.MutationState != job.Resolving || got.TerminationProof != job.ProofProcessEpochGone {
		t.Fatalf("after the outbox proof: %+v", got)
	}
	// NOT_ENQUEUED can never say that a worker finished.
	bad := proofCmd(r, job.ProofNotEnqueued)
	bad.FinishedWithoutResult_ = thrift.BoolPtr(true)
	wantItem(t, h.proof(bad), journal.TApplyCode_INVALID)
}

// A result still wins while RESOLVING (a late report is better evidence
// than the dataset), and a verified uuid is recorded with NATIVE_OK.
func TestResultWhileResolving(t *testing.T) {
	h, id, be := pendingFixture(t)
	r := h.run(id, be)
	p := proofCmd(r, job.ProofChildReaped)
	p.FinishedWithoutResult_ = thrift.BoolPtr(true)
	wantItem(t, h.proof(p), journal.TApplyCode_OK)
	c := completion(h.job(id), job.NativeOK, false)
	c.IndexUUID = thrift.StringPtr("verified-uuid")
	wantItem(t, h.complete(c), journal.TApplyCode_OK)
	if got := h.job(id); got.MutationState != job.Committed || got.IndexUUID != "verified-uuid" || got.Result.Reason != job.ReasonNone {
		t.Fatalf("%+v", got)
	}
}

func TestProgress(t *testing.T) {
	h, id, be := pendingFixture(t)
	r := h.run(id, be)
	prog := func(uuid, phase string) *journal.TReportItem {
		p := &journal.TProgress{JobID: id, DispatchRevision: r.DispatchRevision, InvocationID: r.InvocationID, ProcessEpoch: r.ProcessEpoch}
		if uuid != "" {
			p.IndexUUID = thrift.StringPtr(uuid)
		}
		if phase != "" {
			p.Phase = thrift.StringPtr(phase)
		}
		return &journal.TReportItem{Progress: p}
	}
	wantItem(t, h.report(prog("u-1", "training")), journal.TApplyCode_OK)
	if got := h.job(id); got.IndexUUID != "u-1" || got.BuildPhase != "training" || got.MutationState != job.Running {
		t.Fatalf("%+v", got)
	}
	before := h.st()
	wantItem(t, h.report(prog("u-1", "training")), journal.TApplyCode_NOOP)
	wantItem(t, h.report(prog("u-2", "")), journal.TApplyCode_INVALID)
	wantItem(t, h.report(prog("", string(bytes.Repeat([]byte("p"), job.MaxPhaseBytes+1)))), journal.TApplyCode_INVALID)
	mixed := prog("u-1", "")
	mixed.Proof = proofCmd(r, job.ProofChildReaped)
	wantItem(t, h.report(mixed), journal.TApplyCode_INVALID)
	h.unchanged(before)
	wantItem(t, h.report(prog("", "writing")), journal.TApplyCode_OK)
	if got := h.job(id); got.IndexUUID != "u-1" || got.BuildPhase != "writing" {
		t.Fatalf("%+v", got)
	}
	// An elapsed time is kept with the clock of its entry; a negative one is
	// not a time, and the phase beside it still applies.
	timed := prog("", "indexing")
	timed.Progress.ElapsedMs = thrift.Int64Ptr(1500)
	wantItem(t, h.report(timed), journal.TApplyCode_OK)
	if got := h.job(id); got.BuildElapsedMs != 1500 || got.ProgressTimeMs != h.now {
		t.Fatalf("elapsed %d at %d", got.BuildElapsedMs, got.ProgressTimeMs)
	}
	negative := prog("", "finishing")
	negative.Progress.ElapsedMs = thrift.Int64Ptr(-1)
	wantItem(t, h.report(negative), journal.TApplyCode_OK)
	if got := h.job(id); got.BuildPhase != "finishing" || got.BuildElapsedMs != 1500 {
		t.Fatalf("after a negative elapsed: phase %q, elapsed %d", got.BuildPhase, got.BuildElapsedMs)
	}
}

// The uuid a worker announced belongs to its dispatch: a finished-without-
// result proof naming another uuid, or none (a backend that lost the
// announcement), does not replace it, since the outcome is then read from
// the dataset by that uuid (§13.4).
func TestFinishedWithoutResultKeepsTheAnnouncedUUID(t *testing.T) {
	for _, named := range []string{"", "uuid-other"} {
		t.Run("proof names "+strconv.Quote(named), func(t *testing.T) {
			h, id, be := pendingFixture(t)
			r := h.run(id, be)
			wantItem(t, h.report(&journal.TReportItem{Progress: &journal.TProgress{JobID: id, DispatchRevision: r.DispatchRevision,
				InvocationID: r.InvocationID, ProcessEpoch: r.ProcessEpoch, IndexUUID: thrift.StringPtr("uuid-announced")}}), journal.TApplyCode_OK)
			p := proofCmd(r, job.ProofChildReaped)
			p.FinishedWithoutResult_ = thrift.BoolPtr(true)
			if named != "" {
				p.IndexUUID = thrift.StringPtr(named)
			}
			wantItem(t, h.proof(p), journal.TApplyCode_OK)
			if got := h.job(id); got.MutationState != job.Resolving || got.IndexUUID != "uuid-announced" {
				t.Fatalf("after the proof: %s, uuid %q", got.MutationState, got.IndexUUID)
			}
		})
	}
}

// Only a NATIVE_OK verifies a uuid: a failed result that names one leaves
// the job's uuid as it was.
func TestOnlyNativeOKRecordsTheIndexUUID(t *testing.T) {
	h, id, be := pendingFixture(t)
	c := completion(h.run(id, be), job.NativeCommitConflict, false)
	c.IndexUUID = thrift.StringPtr("uuid-of-a-conflict")
	wantItem(t, h.complete(c), journal.TApplyCode_OK)
	if got := h.job(id); got.MutationState != job.NotCommitted || got.IndexUUID != "" {
		t.Fatalf("after NATIVE_COMMIT_CONFLICT: %s, uuid %q", got.MutationState, got.IndexUUID)
	}
}

// §13.8: with admit_rules 2 the FSM decides the gate and the bounds on the
// options as the log stands; entries without it (older leaders) keep their
// old meaning, so replaying an old log cannot diverge.
func TestAdmitRechecksOptions(t *testing.T) {
	h := newHarness(t)
	cat := h.createCatalog("lake", testRoot)
	h.setOption(options.OptEnableMutation, "false")
	rec := newJob(cat, testRoot, "db", "t", "idx", job.Create)
	before := h.st()
	resp := h.apply(CmdAdmitBatch, &journal.TAdmitBatch{NowMs: h.now, Jobs: []*journal.TJobRecord{RecordToThrift(rec)},
		AdmitRules: thrift.Int32Ptr(AdmitRulesRecheck)})
	wantItem(t, resp, journal.TApplyCode_MUTATION_DISABLED)
	wantCode(t, h.apply(CmdAdmit, &journal.TAdmitCommand{NowMs: h.now, Job: RecordToThrift(rec), AdmitRules: thrift.Int32Ptr(AdmitRulesRecheck)}),
		journal.TApplyCode_MUTATION_DISABLED)
	h.unchanged(before)
	// An old entry (no admit_rules) is applied as it always was.
	wantCode(t, h.admitRecord(rec), journal.TApplyCode_OK)

	h.setOption(options.OptEnableMutation, "true")
	h.setOption(options.OptMaxNumPartitions, "64")
	vec := newJob(cat, testRoot, "db", "t", "vec", job.Create)
	vec.IndexType, vec.Column, vec.PropertiesJSON = job.IndexIVFPQ, "v", `{"metric":"l2","num_partitions":256}`
	before = h.st()
	resp = h.apply(CmdAdmitBatch, &journal.TAdmitBatch{NowMs: h.now, Jobs: []*journal.TJobRecord{RecordToThrift(vec)},
		AdmitRules: thrift.Int32Ptr(AdmitRulesRecheck)})
	wantItem(t, resp, journal.TApplyCode_INVALID)
	h.unchanged(before)
	h.setOption(options.OptMaxNumPartitions, "256")
	resp = h.apply(CmdAdmitBatch, &journal.TAdmitBatch{NowMs: h.now, Jobs: []*journal.TJobRecord{RecordToThrift(vec)},
		AdmitRules: thrift.Int32Ptr(AdmitRulesRecheck)})
	wantItem(t, resp, journal.TApplyCode_OK)
}

func TestClusterID(t *testing.T) {
	h := newHarness(t)
	if h.st().ClusterID() != "" {
		t.Fatalf("a fresh journal has a cluster id")
	}
	for _, bad := range []string{"", "has space", string(bytes.Repeat([]byte("c"), MaxClusterIDBytes+1)), "tab\there"} {
		wantCode(t, h.apply(CmdSetClusterID, &journal.TClusterIDCommand{NowMs: h.now, ClusterID: bad}), journal.TApplyCode_INVALID)
	}
	wantCode(t, h.apply(CmdSetClusterID, &journal.TClusterIDCommand{NowMs: h.now, ClusterID: "c-one"}), journal.TApplyCode_OK)
	wantCode(t, h.apply(CmdSetClusterID, &journal.TClusterIDCommand{NowMs: h.now, ClusterID: "c-one"}), journal.TApplyCode_OK)
	wantCode(t, h.apply(CmdSetClusterID, &journal.TClusterIDCommand{NowMs: h.now, ClusterID: "c-two"}), journal.TApplyCode_NOOP)
	if h.st().ClusterID() != "c-one" {
		t.Fatalf("the first id was replaced without replace")
	}
	// A snapshot keeps it; a restore brings back the file's.
	snap := snapshotBytes(t, h.st())
	wantCode(t, h.apply(CmdSetClusterID, &journal.TClusterIDCommand{NowMs: h.now, ClusterID: "c-two", Replace: thrift.BoolPtr(true)}), journal.TApplyCode_OK)
	if h.st().ClusterID() != "c-two" {
		t.Fatalf("replace did not replace")
	}
	g := newHarness(t)
	if err := g.f.Restore(io.NopCloser(bytes.NewReader(snap))); err != nil {
		t.Fatal(err)
	}
	if g.st().ClusterID() != "c-one" {
		t.Fatalf("restored cluster id %q", g.st().ClusterID())
	}
	if !bytes.Equal(snapshotBytes(t, g.st()), snap) {
		t.Fatalf("a restored snapshot does not write the same bytes")
	}
}

// Item 10: Apply depends on nothing a release changes. One log, applied by
// this build and by a build that knows an extra option (a newer release),
// gives byte-identical snapshots, the unknown key stored verbatim.
func TestReplicasAgreeAcrossOptionTables(t *testing.T) {
	log := func(h *harness) {
		h.setOption(options.OptMaxDispatchPerRound, "7")
		h.setOption("lance_index_job_added_in_a_later_release", "42")
		cat := h.createCatalog("lake", testRoot)
		h.admit(cat, "db", "t", "Idx")
	}
	a := newHarness(t)
	log(a)
	restore := options.RegisterForTest(options.Spec{Key: "lance_index_job_added_in_a_later_release",
		Kind: options.KindPositiveInt, Default: "1", Description: "test"})
	b := newHarness(t)
	log(b)
	restore()
	if !bytes.Equal(snapshotBytes(t, a.st()), snapshotBytes(t, b.st())) {
		t.Fatalf("replicas with different option tables wrote different snapshots")
	}
	if v := a.st().OptionValues()["lance_index_job_added_in_a_later_release"]; v != "42" {
		t.Fatalf("unknown key stored as %q", v)
	}
}
