package backend

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/backend/frame"
	"github.com/lancemaster/lancemaster/pkg/clocktest"
)

// The report is in the outbox before the first delivery attempt: the
// master checks the agent's outbox when the first report arrives.
func TestReportStoredBeforeFirstDelivery(t *testing.T) {
	m := newFakeMaster(t)
	h := newHarness(t, func(c *Config) { c.Masters = []string{m.Addr()} })
	var inOutbox []bool
	m.onReport = func() { inOutbox = append(inOutbox, slices.Contains(outboxIDs(t, h.a), "inv")) }
	h.ready(1)
	h.submit(h.dispatch("inv", 1))
	eventually(t, func() bool { return m.callCount() == 1 }, "no report arrived")
	eventually(t, func() bool { return len(outboxIDs(t, h.a)) == 0 }, "the delivered report was not acknowledged")
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(inOutbox) != 1 || !inOutbox[0] {
		t.Fatal("the report reached a master before it was in the outbox")
	}
	if r := m.results[0]; r.GetResultCode() != wire.TLanceIndexJobResultCode_NATIVE_OK || r.GetInvocationSecret() != testSecret ||
		r.BeProcessEpoch != h.a.Epoch() || r.GetTerminationProof() != wire.TLanceIndexTerminationProof_CHILD_REAPED {
		t.Fatalf("report %+v", r)
	}
}

// Masters unreachable: the finished report waits in the outbox, and the
// invocation is FINISHED meanwhile.
func TestUndeliveredReportWaitsInTheOutbox(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Masters = []string{closedAddr(t)} })
	h.ready(1)
	h.submit(h.dispatch("inv", 1))
	h.waitState(1, "inv", wire.TLanceInvocationState_FINISHED)
	time.Sleep(50 * time.Millisecond) // several failed rounds
	if ids := outboxIDs(t, h.a); len(ids) != 1 || ids[0] != "inv" {
		t.Fatalf("outbox %v, want [inv]", ids)
	}
}

func TestDeliveryFollowsNotLeaderAndRetries(t *testing.T) {
	follower := newFakeMaster(t, wire.TStatusCode_NOT_LEADER)
	leader := newFakeMaster(t, wire.TStatusCode_SERVICE_UNAVAILABLE, wire.TStatusCode_INTERNAL_ERROR, wire.TStatusCode_OK)
	h := newHarness(t, func(c *Config) { c.Masters = []string{closedAddr(t), follower.Addr(), leader.Addr()} })
	h.ready(1)
	h.submit(h.dispatch("inv", 1))
	eventually(t, func() bool { return len(outboxIDs(t, h.a)) == 0 && leader.callCount() == 3 }, "the report was not delivered")
	if follower.callCount() != 3 {
		t.Fatalf("the follower was asked %d times, want once per round (3)", follower.callCount())
	}
	// The master that took it is asked first next time.
	if got := h.a.dlv.order(); got[0] != leader.Addr() {
		t.Fatalf("targets %v: the accepting master should come first", got)
	}
	h.submit(h.dispatch("inv2", 1))
	eventually(t, func() bool { return leader.callCount() == 4 }, "the second report was not delivered")
	if follower.callCount() != 3 {
		t.Fatal("the second report went to the follower first")
	}
}

// INVALID_ARGUMENT: the report itself is malformed; given up at once.
func TestDeliveryGivesUpOnInvalidArgument(t *testing.T) {
	m := newFakeMaster(t, wire.TStatusCode_INVALID_ARGUMENT)
	h := newHarness(t, func(c *Config) { c.Masters = []string{m.Addr()} })
	h.ready(1)
	h.submit(h.dispatch("inv", 1))
	eventually(t, func() bool { return m.callCount() == 1 && len(outboxIDs(t, h.a)) == 0 }, "not given up")
	time.Sleep(30 * time.Millisecond)
	if m.callCount() != 1 {
		t.Fatalf("%d calls after a give-up status, want 1", m.callCount())
	}
}

// DESIGN.md §13.5: a deposed leader that has not noticed answers
// STALE_REPORT from its stale view. The backend keeps the durable result and
// asks the next master, which takes it.
func TestPermanentRefusalIsConfirmedByAnotherMaster(t *testing.T) {
	for _, code := range []wire.TStatusCode{wire.TStatusCode_STALE_REPORT, wire.TStatusCode_UNAUTHENTICATED} {
		t.Run(code.String(), func(t *testing.T) {
			deposed := newFakeMaster(t, code, wire.TStatusCode_NOT_LEADER)
			leader := newFakeMaster(t)
			h := newHarness(t, func(c *Config) { c.Masters = []string{deposed.Addr(), leader.Addr()} })
			var kept []bool
			leader.onReport = func() { kept = append(kept, slices.Contains(outboxIDs(t, h.a), "inv")) }
			h.ready(1)
			h.submit(h.dispatch("inv", 1))
			eventually(t, func() bool { return leader.callCount() == 1 && len(outboxIDs(t, h.a)) == 0 }, "the report was not delivered")
			leader.mu.Lock()
			defer leader.mu.Unlock()
			if deposed.callCount() != 1 || len(kept) != 1 || !kept[0] {
				t.Fatalf("deposed asked %d times; the entry was kept until the leader took it: %v", deposed.callCount(), kept)
			}
			if r := leader.results[0]; r.GetResultCode() != wire.TLanceIndexJobResultCode_NATIVE_OK || r.InvocationID != "inv" {
				t.Fatalf("delivered %+v", r)
			}
		})
	}
}

// Refusals from two masters: dropped once there are enough of them.
func TestRefusalsFromTwoMastersDrop(t *testing.T) {
	a := newFakeMaster(t, wire.TStatusCode_STALE_REPORT)
	b := newFakeMaster(t, wire.TStatusCode_UNAUTHENTICATED)
	h := newHarness(t, func(c *Config) { c.Masters = []string{a.Addr(), b.Addr()} })
	h.ready(1)
	h.submit(h.dispatch("inv", 1))
	h.waitState(1, "inv", wire.TLanceInvocationState_FINISHED) // stored before the first delivery
	eventually(t, func() bool { return len(outboxIDs(t, h.a)) == 0 }, "not dropped")
	if n := a.callCount() + b.callCount(); n != minRefusals {
		t.Fatalf("dropped after %d refusals, want %d", n, minRefusals)
	}
	time.Sleep(30 * time.Millisecond)
	if n := a.callCount() + b.callCount(); n != minRefusals {
		t.Fatalf("%d calls after the drop", n)
	}
	if h.logs.FilterMessageSnippet("refused the report for good").Len() != 1 {
		t.Fatal("the drop was not logged")
	}
}

// One master refusing under one leader term is never enough, however often:
// the entry stays until a later heartbeat term (or the refusal window)
// confirms it.
func TestOneMastersRefusalNeedsALaterTerm(t *testing.T) {
	m := newFakeMaster(t, wire.TStatusCode_STALE_REPORT)
	h := newHarness(t, func(c *Config) { c.Masters = []string{m.Addr()} })
	h.ready(1)
	h.submit(h.dispatch("inv", 1))
	eventually(t, func() bool { return m.callCount() >= 2*minRefusals }, "not retried")
	if ids := outboxIDs(t, h.a); len(ids) != 1 {
		t.Fatalf("dropped on one master's refusals at one term: outbox %v", ids)
	}
	h.heartbeat(2) // a new leader term: its refusal confirms
	eventually(t, func() bool { return len(outboxIDs(t, h.a)) == 0 }, "not dropped after a refusal under a later term")
}

func TestOneMastersRefusalsSpanningTheWindowDrop(t *testing.T) {
	clk := clocktest.New(time.Now())
	m := newFakeMaster(t, wire.TStatusCode_STALE_REPORT)
	h := newHarness(t, func(c *Config) { c.Masters, c.Clock = []string{m.Addr()}, clk.Now })
	h.ready(1)
	h.submit(h.dispatch("inv", 1))
	eventually(t, func() bool { return m.callCount() >= 2*minRefusals }, "not retried")
	if ids := outboxIDs(t, h.a); len(ids) != 1 {
		t.Fatalf("outbox %v", ids)
	}
	clk.Advance(DefaultRefusalWindow)
	eventually(t, func() bool { return len(outboxIDs(t, h.a)) == 0 }, "not dropped once the refusals spanned the window")
}

// Heartbeats name the masters; they replace the configured report targets.
func TestHeartbeatSetsReportTargets(t *testing.T) {
	m := newFakeMaster(t)
	h := newHarness(t, func(c *Config) { c.Masters = []string{closedAddr(t)} })
	h.ready(1)
	h.submit(h.dispatch("inv", 1))
	h.waitState(1, "inv", wire.TLanceInvocationState_FINISHED)
	h.heartbeat(1, m.Addr())
	eventually(t, func() bool { return m.callCount() == 1 && len(outboxIDs(t, h.a)) == 0 }, "not delivered to the heartbeat's master")
}

// No trusted result but a proof: the proof goes by a termination report.
func TestProofOnlyGoesAsTermination(t *testing.T) {
	m := newFakeMaster(t)
	h := newHarness(t, func(c *Config) { c.Masters = []string{m.Addr()} })
	h.runner.setScript(func(context.Context, *frame.Request) Outcome {
		return Outcome{Proof: ProofChildReaped, Failure: "deadline", Signal: "SIGKILL", ExitCode: -1, PID: 42}
	})
	h.ready(1)
	h.submit(h.dispatch("inv", 1))
	eventually(t, func() bool { return m.callCount() == 1 }, "no report")
	results, terms := m.received()
	if len(results) != 0 || len(terms) != 1 {
		t.Fatalf("results %d terminations %d", len(results), len(terms))
	}
	tr := terms[0]
	if tr.Proof != wire.TLanceIndexTerminationProof_CHILD_REAPED || tr.GetInvocationSecret() != testSecret ||
		tr.JobID != 11 || tr.DispatchRevision != 2 || tr.InvocationID != "inv" || tr.BeProcessEpoch != h.a.Epoch() ||
		!tr.GetNoResult_() || tr.GetSanitizedMessage() != "killed at the deadline" || tr.IndexUUID != nil {
		t.Fatalf("termination %+v", tr)
	}
	st := h.state(1, "inv")
	if st.Result_ == nil || st.Result_.ResultCode != nil || st.Result_.GetSanitizedMessage() == "" {
		t.Fatalf("query: %+v", st.Result_)
	}
}

// Neither a result nor a proof: nothing to report; query still says FINISHED.
func TestNothingToReport(t *testing.T) {
	m := newFakeMaster(t)
	h := newHarness(t, func(c *Config) { c.Masters = []string{m.Addr()} })
	h.runner.setScript(func(context.Context, *frame.Request) Outcome { return Outcome{Failure: "lost the child"} })
	h.ready(1)
	h.submit(h.dispatch("inv", 1))
	st := h.waitState(1, "inv", wire.TLanceInvocationState_FINISHED)
	if st.TerminationProof != nil || st.Result_.ResultCode != nil {
		t.Fatalf("status %+v", st)
	}
	time.Sleep(30 * time.Millisecond)
	if m.callCount() != 0 || len(outboxIDs(t, h.a)) != 0 {
		t.Fatalf("calls %d, outbox %v", m.callCount(), outboxIDs(t, h.a))
	}
}

func TestResultCodes(t *testing.T) {
	proof := func(p Proof) Outcome { return Outcome{Proof: p} }
	for _, tc := range []struct {
		name      string
		out       Outcome
		wantCode  *wire.TLanceIndexJobResultCode
		wantProof *wire.TLanceIndexTerminationProof
	}{
		{"commit conflict", Outcome{Proof: ProofChildReaped, Result: &frame.Result{Mode: frame.ModeBuild, ResultCode: "NATIVE_COMMIT_CONFLICT"}},
			wire.TLanceIndexJobResultCodePtr(wire.TLanceIndexJobResultCode_NATIVE_COMMIT_CONFLICT), wire.TLanceIndexTerminationProofPtr(wire.TLanceIndexTerminationProof_CHILD_REAPED)},
		{"stale admission, no proof", Outcome{Result: &frame.Result{ResultCode: "PRE_INVOCATION_STALE_ADMISSION"}},
			wire.TLanceIndexJobResultCodePtr(wire.TLanceIndexJobResultCode_PRE_INVOCATION_STALE_ADMISSION), nil},
		{"unknown name", Outcome{Proof: ProofChildReaped, Result: &frame.Result{ResultCode: "NATIVE_MAYBE"}},
			nil, wire.TLanceIndexTerminationProofPtr(wire.TLanceIndexTerminationProof_CHILD_REAPED)},
		{"inspect frame to a build", Outcome{Result: &frame.Result{Mode: frame.ModeInspect, OK: true}}, nil, nil},
		{"never launched", proof(ProofNeverLaunched), wire.TLanceIndexJobResultCodePtr(wire.TLanceIndexJobResultCode_PRE_INVOCATION_RESOURCE_REJECTED),
			wire.TLanceIndexTerminationProofPtr(wire.TLanceIndexTerminationProof_NEVER_LAUNCHED)},
		{"no result, no proof", proof(ProofNone), nil, nil},
	} {
		d := (&harness{a: &Agent{epoch: 5}}).dispatch("inv", 1)
		r := reportFromOutcome(d, 5, tc.out, newScrubber(nil))
		if (r.ResultCode == nil) != (tc.wantCode == nil) || (r.ResultCode != nil && *r.ResultCode != *tc.wantCode) {
			t.Errorf("%s: code %v, want %v", tc.name, r.ResultCode, tc.wantCode)
		}
		if (r.TerminationProof == nil) != (tc.wantProof == nil) || (r.TerminationProof != nil && *r.TerminationProof != *tc.wantProof) {
			t.Errorf("%s: proof %v, want %v", tc.name, r.TerminationProof, tc.wantProof)
		}
	}
}
