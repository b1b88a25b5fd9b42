package raftfsm

import (
	"strings"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
)

// pendingFixture: a catalog, two backends and one PENDING job.
func pendingFixture(t *testing.T) (h *harness, id, be int64) {
	h = newHarness(t)
	cat := h.createCatalog("lake", testRoot)
	be = h.addBackend("be1:9060")
	h.addBackend("be2:9060")
	return h, h.admit(cat, "db", "t", "idx"), be
}

func TestMarkRunning(t *testing.T) {
	h, id, be := pendingFixture(t)
	old := h.job(id)
	h.now = 2000
	cmd := markCmd(old, be)
	wantItem(t, h.markRunning(cmd), journal.TApplyCode_OK)
	got := h.job(id)
	want := old.Clone()
	want.Rev, want.UpdateTimeMs, want.MutationState = 1, 2000, job.Running
	want.BackendID, want.ProcessEpoch, want.InvocationID, want.InvocationSecret = be, 42, cmd.InvocationID, testSecret
	want.DeadlineMs, want.LeaderTerm, want.PossibleLiveOwned, want.DispatchRevision = cmd.DeadlineMs, 3, true, 1
	want.DispatchTimeMs = 2000 // M1 stamps the batch's now_ms
	want.Timeline = job.EncodeTimeline([]job.Transition{{Kind: job.TransitionDispatched, TimeMs: 2000, Index: h.index,
		Detail: "backend " + itoa(be) + ", attempt 1"}})
	if *got != *want {
		t.Fatalf("\n got %+v\nwant %+v", got, want)
	}
	if *old == *got {
		t.Fatalf("the published record was mutated in place")
	}
	if h.st().HeldSlots(be) != 1 || len(h.st().SlotHolders(be)) != 1 {
		t.Fatalf("slot not booked")
	}
	if rs := h.st().RunningByDeadline(cmd.DeadlineMs+1, 0); len(rs) != 1 || rs[0].JobID != id {
		t.Fatalf("running by deadline = %v", rs)
	}
	if len(h.st().PendingInIDOrder(0)) != 0 {
		t.Fatalf("still pending")
	}
}

func TestMarkRunningGuards(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(c *journal.TMarkRunning)
		code   journal.TApplyCode
	}{
		{"unknown job", func(c *journal.TMarkRunning) { c.JobID = 99 }, journal.TApplyCode_NOT_FOUND},
		{"stale rev", func(c *journal.TMarkRunning) { c.ExpectedRev = 1 }, journal.TApplyCode_CAS_FAILED},
		{"unregistered backend", func(c *journal.TMarkRunning) { c.BackendID = 99 }, journal.TApplyCode_NOT_FOUND},
		{"empty invocation id", func(c *journal.TMarkRunning) { c.InvocationID = "" }, journal.TApplyCode_INVALID},
		{"long invocation id", func(c *journal.TMarkRunning) { c.InvocationID = strings.Repeat("i", job.MaxInvocationIDBytes+1) }, journal.TApplyCode_INVALID},
		{"empty secret", func(c *journal.TMarkRunning) { c.InvocationSecret = "" }, journal.TApplyCode_INVALID},
		{"long secret", func(c *journal.TMarkRunning) { c.InvocationSecret = strings.Repeat("s", job.MaxNameBytes+1) }, journal.TApplyCode_INVALID},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h, id, be := pendingFixture(t)
			cmd := markCmd(h.job(id), be)
			c.mutate(cmd)
			before := h.st()
			resp := h.markRunning(cmd)
			wantItem(t, resp, c.code)
			if strings.Contains(resp.Items[0].GetMessage(), testSecret) {
				t.Fatalf("message leaks the secret")
			}
			h.unchanged(before)
		})
	}
	t.Run("not pending", func(t *testing.T) {
		h, id, be := pendingFixture(t)
		wantCode(t, h.cancel(id), journal.TApplyCode_OK)
		before := h.st()
		wantItem(t, h.markRunning(markCmd(h.job(id), be)), journal.TApplyCode_CAS_FAILED)
		h.unchanged(before)
	})
	t.Run("no fence identity", func(t *testing.T) {
		h, id, be := pendingFixture(t)
		h.restoreWith(t, func(rs []*job.Record) []*job.Record { rs[0] = rs[0].Clone(); rs[0].Locator = ""; return rs })
		before := h.st()
		wantItem(t, h.markRunning(markCmd(h.job(id), be)), journal.TApplyCode_CAS_FAILED)
		h.unchanged(before)
	})
}

func TestMarkRunningBatchIsPerItem(t *testing.T) {
	h, id, be := pendingFixture(t)
	id2 := h.admit(1, "db", "t2", "idx")
	first := markCmd(h.job(id), be)
	again := markCmd(h.job(id), be) // same expected rev: must lose to the first
	resp := h.markRunning(first, again, markCmd(h.job(id2), be), markCmd(h.job(id2), 99))
	want := []journal.TApplyCode{journal.TApplyCode_OK, journal.TApplyCode_CAS_FAILED, journal.TApplyCode_OK, journal.TApplyCode_CAS_FAILED}
	if len(resp.Items) != len(want) {
		t.Fatalf("items = %d", len(resp.Items))
	}
	for i, w := range want {
		if resp.Items[i].Code != w {
			t.Fatalf("item %d = %v, want %v", i, resp.Items[i].Code, w)
		}
	}
	if h.st().HeldSlots(be) != 2 {
		t.Fatalf("held = %d, want 2", h.st().HeldSlots(be))
	}
}

func TestCompleteWithResultClassifies(t *testing.T) {
	cases := []struct {
		code     job.ResultCode
		mt       job.MutationType
		ifExists bool
		ema      bool
		state    job.MutationState
		refresh  job.RefreshState
		reason   job.CompletionReason
	}{
		{job.NativeOK, job.Create, false, false, job.Committed, job.RefreshRequired, job.ReasonNone},
		{job.NativeCommitConflict, job.Replace, false, false, job.NotCommitted, job.RefreshRequired, job.ReasonNone},
		{job.PreInvocationStaleAdmission, job.Create, false, false, job.NotCommitted, job.RefreshNotRequired, job.ReasonNone},
		{job.PreInvocationResourceRejected, job.Create, false, true, job.NotCommitted, job.RefreshRequired, job.ReasonNone},
		{job.NativeNotFound, job.Drop, true, false, job.NotCommitted, job.RefreshRequired, job.ReasonIfConditionNoop},
		{job.NativeNotFound, job.Drop, false, false, job.NotCommitted, job.RefreshRequired, job.ReasonNone},
		{job.NativeNotFound, job.Create, false, false, job.Unknown, job.RefreshNotRequired, job.ReasonNone},
		{job.NativeIO, job.Create, false, false, job.Unknown, job.RefreshNotRequired, job.ReasonNone},
		{job.NoTrustedResult, job.Create, false, false, job.Unknown, job.RefreshNotRequired, job.ReasonNone},
	}
	for _, c := range cases {
		t.Run(c.code.String()+"/"+c.mt.String(), func(t *testing.T) {
			h := newHarness(t)
			cat := h.createCatalog("lake", testRoot)
			be := h.addBackend("be1:9060")
			r := newJob(cat, testRoot, "db", "t", "idx", c.mt)
			r.IfExists = c.ifExists
			wantCode(t, h.admitRecord(r), journal.TApplyCode_OK)
			running := h.run(1, be)
			h.now = 3000
			wantItem(t, h.complete(completion(running, c.code, c.ema)), journal.TApplyCode_OK)
			got := h.job(1)
			if got.MutationState != c.state || got.RefreshState != c.refresh || got.Result.Reason != c.reason {
				t.Fatalf("got %s/%s/%s, want %s/%s/%s", got.MutationState, got.RefreshState, got.Result.Reason, c.state, c.refresh, c.reason)
			}
			if got.Result.Code != c.code || got.Rev != running.Rev+1 || got.UpdateTimeMs != 3000 {
				t.Fatalf("result/rev/time not stamped: %+v", got)
			}
			// M2 never releases the slot.
			if !got.HoldsPossibleLiveSlot() || h.st().HeldSlots(be) != 1 {
				t.Fatalf("M2 released the slot")
			}
			if got.Unresolved() != (c.refresh != job.RefreshNotRequired || c.state == job.Unknown) {
				t.Fatalf("unresolved = %t", got.Unresolved())
			}
		})
	}
}

func TestCompleteGuards(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(c *journal.TCompletion)
		code   journal.TApplyCode
	}{
		{"unknown job", func(c *journal.TCompletion) { c.JobID = 99 }, journal.TApplyCode_NOT_FOUND},
		{"dispatch revision", func(c *journal.TCompletion) { c.DispatchRevision++ }, journal.TApplyCode_CAS_FAILED},
		{"invocation id", func(c *journal.TCompletion) { c.InvocationID += "x" }, journal.TApplyCode_CAS_FAILED},
		{"process epoch", func(c *journal.TCompletion) { c.ProcessEpoch++ }, journal.TApplyCode_CAS_FAILED},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h, id, be := pendingFixture(t)
			cmd := completion(h.run(id, be), job.NativeOK, false)
			c.mutate(cmd)
			before := h.st()
			wantItem(t, h.complete(cmd), c.code)
			h.unchanged(before)
		})
	}
	t.Run("twice", func(t *testing.T) {
		h, id, be := pendingFixture(t)
		cmd := completion(h.run(id, be), job.NativeOK, false)
		wantItem(t, h.complete(cmd), journal.TApplyCode_OK)
		before := h.st()
		wantItem(t, h.complete(cmd), journal.TApplyCode_CAS_FAILED)
		h.unchanged(before)
	})
}

func TestCompleteTruncatesMessage(t *testing.T) {
	h, id, be := pendingFixture(t)
	cmd := completion(h.run(id, be), job.NativeOK, false)
	cmd.Result_.Message = thrift.StringPtr(strings.Repeat("é", job.MaxMessageBytes))
	wantItem(t, h.complete(cmd), journal.TApplyCode_OK)
	if m := h.job(id).Result.Message; len(m) > job.MaxMessageBytes || m != job.TruncateMessage(*cmd.Result_.Message) {
		t.Fatalf("message is %d bytes", len(m))
	}
}

// M2': a dispatch proven never enqueued is NOT_COMMITTED whatever code it
// carries (a NATIVE_OK there contradicts the proof, and its dataset version
// is not recorded), and releases the slot.
func TestCompleteNeverEnqueued(t *testing.T) {
	for _, code := range []job.ResultCode{job.PreInvocationResourceRejected, job.NoTrustedResult, job.NativeOK} {
		t.Run(code.String(), func(t *testing.T) {
			h, id, be := pendingFixture(t)
			cmd := completion(h.run(id, be), code, false)
			cmd.NeverEnqueued = thrift.BoolPtr(true)
			cmd.DatasetVersion = thrift.Int64Ptr(7)
			wantItem(t, h.complete(cmd), journal.TApplyCode_OK)
			got := h.job(id)
			if got.MutationState != job.NotCommitted || got.PossibleLiveOwned || got.TerminationProof != job.ProofNotEnqueued {
				t.Fatalf("M2' gave %+v", got)
			}
			if got.ResultDatasetVersion != 0 {
				t.Fatalf("M2' recorded dataset version %d", got.ResultDatasetVersion)
			}
			if h.st().HeldSlots(be) != 0 || got.Unresolved() {
				t.Fatalf("M2' kept the slot or the fence")
			}
		})
	}
}

func TestRecordTerminationProof(t *testing.T) {
	for _, p := range []job.TerminationProof{job.ProofChildReaped, job.ProofNeverLaunched, job.ProofProcessEpochGone} {
		t.Run(p.String(), func(t *testing.T) {
			h, id, be := pendingFixture(t)
			running := h.run(id, be)
			wantItem(t, h.complete(completion(running, job.NativeIO, false)), journal.TApplyCode_OK)
			unknown := h.job(id)
			wantItem(t, h.proof(proofCmd(unknown, p)), journal.TApplyCode_OK)
			got := h.job(id)
			if got.TerminationProof != p || got.PossibleLiveOwned || got.Rev != unknown.Rev+1 {
				t.Fatalf("proof not recorded: %+v", got)
			}
			// The outcome, fence and quota stay: UNKNOWN needs a force-release.
			if got.MutationState != job.Unknown || !got.Unresolved() || h.st().HeldSlots(be) != 0 {
				t.Fatalf("proof changed the outcome or kept the slot")
			}
			before := h.st()
			wantItem(t, h.proof(proofCmd(unknown, job.ProofChildReaped)), journal.TApplyCode_NOOP)
			h.unchanged(before)
		})
	}
}

func TestRecordTerminationProofWhileRunning(t *testing.T) {
	h, id, be := pendingFixture(t)
	running := h.run(id, be)
	wantItem(t, h.proof(proofCmd(running, job.ProofChildReaped)), journal.TApplyCode_OK)
	if got := h.job(id); got.MutationState != job.Running || h.st().HeldSlots(be) != 0 {
		t.Fatalf("proof while RUNNING: %+v", got)
	}
	// The result still lands: identity is the dispatch's, not the rev.
	wantItem(t, h.complete(completion(running, job.NativeOK, false)), journal.TApplyCode_OK)
	if h.job(id).MutationState != job.Committed {
		t.Fatalf("result after proof lost")
	}
}

func TestRecordTerminationProofGuards(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(p *journal.TProof)
		code   journal.TApplyCode
	}{
		{"unknown job", func(p *journal.TProof) { p.JobID = 99 }, journal.TApplyCode_NOT_FOUND},
		{"backend", func(p *journal.TProof) { p.BackendID++ }, journal.TApplyCode_CAS_FAILED},
		{"epoch", func(p *journal.TProof) { p.ProcessEpoch++ }, journal.TApplyCode_CAS_FAILED},
		{"invocation", func(p *journal.TProof) { p.InvocationID = "other" }, journal.TApplyCode_CAS_FAILED},
		{"dispatch revision", func(p *journal.TProof) { p.DispatchRevision = 9 }, journal.TApplyCode_CAS_FAILED},
		{"proof NONE", func(p *journal.TProof) { p.Proof = journal.TTerminationProof_NONE }, journal.TApplyCode_INVALID},
		{"proof unknown", func(p *journal.TProof) { p.Proof = 77 }, journal.TApplyCode_INVALID},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h, id, be := pendingFixture(t)
			cmd := proofCmd(h.run(id, be), job.ProofChildReaped)
			c.mutate(cmd)
			before := h.st()
			wantItem(t, h.proof(cmd), c.code)
			h.unchanged(before)
		})
	}
	t.Run("pending job has no dispatch", func(t *testing.T) {
		h, id, _ := pendingFixture(t)
		before := h.st()
		wantItem(t, h.proof(proofCmd(h.job(id), job.ProofChildReaped)), journal.TApplyCode_CAS_FAILED)
		h.unchanged(before)
	})
}

// A report item applies its proof (P) and then its result (M2) in one
// entry, each on its own guard: the answers are P's in proof_code and M2's
// in code, and the record ends as P followed by M2 would leave it.
func TestReportBatchProofThenResult(t *testing.T) {
	h, id, be := pendingFixture(t)
	running := h.run(id, be)
	resp := h.report(&journal.TReportItem{Proof: proofCmd(running, job.ProofChildReaped),
		Completion: completion(running, job.NativeOK, false)})
	wantItem(t, resp, journal.TApplyCode_OK)
	if pc := resp.Items[0].ProofCode; pc == nil || *pc != journal.TApplyCode_OK {
		t.Fatalf("proof code %v, want OK", pc)
	}
	got := h.job(id)
	if got.MutationState != job.Committed || got.TerminationProof != job.ProofChildReaped || got.PossibleLiveOwned ||
		h.st().HeldSlots(be) != 0 || got.Rev != running.Rev+2 {
		t.Fatalf("after the report: %+v", got)
	}
	// A redelivered copy changes nothing: P is a NOOP, M2 a CAS failure.
	before := h.st()
	resp = h.report(&journal.TReportItem{Proof: proofCmd(running, job.ProofChildReaped),
		Completion: completion(running, job.NativeOK, false)})
	wantItem(t, resp, journal.TApplyCode_CAS_FAILED)
	if pc := resp.Items[0].ProofCode; pc == nil || *pc != journal.TApplyCode_NOOP {
		t.Fatalf("redelivered proof code %v, want NOOP", pc)
	}
	h.unchanged(before)
}

// Each half is guarded on its own: a proof alone, a result alone, a refused
// proof that does not stop its result, and malformed items that change
// nothing.
func TestReportBatchHalvesAreIndependent(t *testing.T) {
	t.Run("proof only", func(t *testing.T) {
		h, id, be := pendingFixture(t)
		running := h.run(id, be)
		resp := h.report(&journal.TReportItem{Proof: proofCmd(running, job.ProofNeverLaunched)})
		wantItem(t, resp, journal.TApplyCode_OK)
		if pc := resp.Items[0].ProofCode; pc == nil || *pc != journal.TApplyCode_OK {
			t.Fatalf("proof code %v", pc)
		}
		if got := h.job(id); got.MutationState != job.Running || h.st().HeldSlots(be) != 0 {
			t.Fatalf("proof only: %+v", got)
		}
	})
	t.Run("result only", func(t *testing.T) {
		h, id, be := pendingFixture(t)
		running := h.run(id, be)
		resp := h.report(&journal.TReportItem{Completion: completion(running, job.NativeOK, false)})
		wantItem(t, resp, journal.TApplyCode_OK)
		if resp.Items[0].ProofCode != nil {
			t.Fatalf("a result-only item answered a proof code")
		}
		if got := h.job(id); got.MutationState != job.Committed || h.st().HeldSlots(be) != 1 {
			t.Fatalf("result only: %+v", got)
		}
	})
	t.Run("refused proof, applied result", func(t *testing.T) {
		h, id, be := pendingFixture(t)
		running := h.run(id, be)
		p := proofCmd(running, job.ProofChildReaped)
		p.BackendID++
		resp := h.report(&journal.TReportItem{Proof: p, Completion: completion(running, job.NativeOK, false)})
		wantItem(t, resp, journal.TApplyCode_OK)
		if pc := resp.Items[0].ProofCode; pc == nil || *pc != journal.TApplyCode_CAS_FAILED {
			t.Fatalf("proof code %v, want CAS_FAILED", pc)
		}
		if got := h.job(id); got.MutationState != job.Committed || !got.PossibleLiveOwned {
			t.Fatalf("refused proof: %+v", got)
		}
	})
	t.Run("malformed items", func(t *testing.T) {
		h, id, be := pendingFixture(t)
		running := h.run(id, be)
		other := completion(running, job.NativeOK, false)
		other.JobID++
		before := h.st()
		for _, it := range []*journal.TReportItem{{}, {Proof: proofCmd(running, job.ProofChildReaped), Completion: other}} {
			wantItem(t, h.report(it), journal.TApplyCode_INVALID)
		}
		h.unchanged(before)
	})
}
