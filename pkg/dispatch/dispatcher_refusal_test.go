package dispatch

import (
	"math"
	"strings"
	"testing"

	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/options"
)

// settleOnBackend journals a successful report for every RUNNING job on the
// backend (the worker finished and reported).
func (e *env) settleOnBackend(backendID int64) {
	e.t.Helper()
	for _, r := range e.fsm.State().RunningByDeadline(math.MaxInt64, 0) {
		if r.BackendID == backendID {
			e.report(r.JobID, job.NativeOK)
		}
	}
}

// One refusing backend beside a healthy one: every job ends on the healthy
// one, none NOT_COMMITTED (DESIGN.md §13.2). Today's issue: 38 of 40 jobs
// ended NOT_COMMITTED.
func TestRefusingBackendBesideAHealthyOne(t *testing.T) {
	e := newEnv(t)
	bad := e.addBackend("b1:9060", 1) // lower id: picked first on a tie
	good := e.addBackend("b2:9060", 1)
	const n = 40
	ids := e.admit(n)
	e.be.setSubmit(func(addr string, _ *wire.TLanceIndexJobDispatch) (*wire.TStatus, error) {
		if addr == "b1:9060" {
			return &wire.TStatus{StatusCode: wire.TStatusCode_QUEUE_FULL}, nil
		}
		return &wire.TStatus{StatusCode: wire.TStatusCode_OK}, nil
	})
	for i := 0; i < 10*n; i++ {
		c := e.fsm.State().JobCounts()
		if c.Mutation[job.Pending] == 0 && c.Mutation[job.Running] == 0 {
			break
		}
		e.clock.Advance(DefaultHeartbeatInterval)
		e.heartbeat() // says OK and accepting every time: it refuses anyway
		e.round()
		e.settleOnBackend(good)
	}
	refusedByBad := 0
	for _, s := range e.be.submitted() {
		if s.addr == "b1:9060" {
			refusedByBad++
		}
	}
	if refusedByBad == 0 {
		t.Fatal("setup: the refusing backend was never tried")
	}
	for _, id := range ids {
		r := e.wantState(id, job.Committed)
		if r.BackendID != good {
			t.Fatalf("job %d ended on backend %d", id, r.BackendID)
		}
		if r.DispatchAttempts > 1 {
			t.Fatalf("job %d was refused %d times: a job avoids the backend that refused it", id, r.DispatchAttempts)
		}
	}
	if held := e.fsm.State().HeldSlots(bad); held != 0 {
		t.Fatalf("the refusing backend holds %d slots", held)
	}
}

// A job refused on every attempt ends NOT_COMMITTED after
// lance_index_job_max_dispatch_attempts dispatches, each with a fresh
// identity; the refusing backend is only tried again after a heartbeat.
// A status outside the enum is journaled as the backend sent it.
func TestRefusalWithAnUnknownStatusKeepsItsValue(t *testing.T) {
	e := newEnv(t)
	e.addBackend("b1:9060", 1)
	id := e.admit(1)[0]
	e.be.setSubmit(func(string, *wire.TLanceIndexJobDispatch) (*wire.TStatus, error) {
		return &wire.TStatus{StatusCode: wire.TStatusCode(999)}, nil
	})
	e.heartbeat()
	e.round()
	e.d.Wait()
	r := e.wantState(id, job.Pending)
	if !strings.Contains(r.TerminationMessage, "status 999") || strings.Contains(r.TerminationMessage, "UNSET") {
		t.Fatalf("refusal journaled as %q", r.TerminationMessage)
	}
}

func TestRefusalsExhaustAttempts(t *testing.T) {
	obs := &countingObserver{outcomes: map[Outcome]int{}}
	e := newEnv(t, func(d *Deps) { d.Observer = obs })
	b1 := e.addBackend("b1:9060", 1)
	id := e.admit(1)[0]
	e.be.setSubmit(func(string, *wire.TLanceIndexJobDispatch) (*wire.TStatus, error) {
		return &wire.TStatus{StatusCode: wire.TStatusCode_NOT_READY}, nil
	})
	e.heartbeat()
	e.round()
	e.round() // no heartbeat since the refusal: not picked again
	if n := len(e.be.submitted()); n != 1 {
		t.Fatalf("%d sends before the next heartbeat, want 1", n)
	}
	r := e.wantState(id, job.Pending)
	if r.DispatchAttempts != 1 || r.HoldsPossibleLiveSlot() || e.fsm.State().HeldSlots(b1) != 0 {
		t.Fatalf("attempts %d slot %v", r.DispatchAttempts, r.HoldsPossibleLiveSlot())
	}
	for range 10 {
		e.heartbeat()
		e.round()
	}
	max := int(options.Resolve(nil).MaxDispatchAttempts)
	sends := e.be.submitted()
	if len(sends) != max {
		t.Fatalf("%d sends, want %d", len(sends), max)
	}
	seen := map[string]bool{}
	for _, s := range sends {
		if seen[s.d.InvocationID] {
			t.Fatal("an invocation id was sent twice")
		}
		seen[s.d.InvocationID] = true
	}
	r = e.wantState(id, job.NotCommitted)
	if r.TerminationProof != job.ProofNotEnqueued || r.HoldsPossibleLiveSlot() || r.Result.Code != job.PreInvocationResourceRejected {
		t.Fatalf("proof %s slot %v code %s", r.TerminationProof, r.HoldsPossibleLiveSlot(), r.Result.Code)
	}
	if _, got := obs.get(); got[OutcomeReturnedToPending] != max-1 || got[OutcomeNotEnqueued] != 1 {
		t.Fatalf("outcomes %v", got)
	}
}

// A backend restart (connection refused for a while) during a burst: the
// jobs sent while it was down return to PENDING and run once it is back;
// the ones its old process ran are resolved from the dataset.
func TestBackendRestartDuringBurst(t *testing.T) {
	e := newEnv(t)
	b1 := e.addBackend("b1:9060", 1)
	e.setOption(options.OptMaxInflightPerBackend, "10")
	e.setOption(options.OptMaxDispatchPerRound, "3")
	ids := e.admit(6)
	e.heartbeat()
	e.round() // the first three run at epoch 1
	for _, id := range ids[:3] {
		e.wantState(id, job.Running)
	}

	// The backend goes down: connections are refused.
	e.be.setEpoch("b1:9060", 0)
	e.be.setSubmit(func(addr string, _ *wire.TLanceIndexJobDispatch) (*wire.TStatus, error) { return nil, notSentErr(addr) })
	e.heartbeat() // fails: still alive for 3 intervals
	e.round()     // the next three are sent and never arrive
	for _, id := range ids[3:] {
		if r := e.wantState(id, job.Pending); r.DispatchAttempts != 1 {
			t.Fatalf("job %d attempts %d", id, r.DispatchAttempts)
		}
	}
	sent := len(e.be.submitted())
	for range 5 {
		e.clock.Advance(DefaultHeartbeatInterval)
		e.heartbeat()
		e.round()
	}
	if n := len(e.be.submitted()); n != sent {
		t.Fatalf("%d more sends to a backend that refused and is down", n-sent)
	}

	// It is back, a new process that delivered its outbox.
	e.be.setEpoch("b1:9060", 2)
	e.be.setHeartbeat("b1:9060", func(r *wire.THeartbeatResponse) { r.OutboxDelivered = boolPtr(true) })
	e.be.setSubmit(nil)
	e.clock.Advance(DefaultHeartbeatInterval)
	e.heartbeat()
	e.round()
	for _, id := range ids[3:] {
		if r := e.wantState(id, job.Running); r.ProcessEpoch != 2 || r.BackendID != b1 {
			t.Fatalf("job %d runs at epoch %d", id, r.ProcessEpoch)
		}
	}
	for _, id := range ids[:3] {
		if r := e.wantState(id, job.Resolving); r.HoldsPossibleLiveSlot() || r.TerminationProof != job.ProofProcessEpochGone {
			t.Fatalf("job %d: slot %v proof %s", id, r.HoldsPossibleLiveSlot(), r.TerminationProof)
		}
	}
	c := e.fsm.State().JobCounts()
	if c.Mutation[job.NotCommitted] != 0 {
		t.Fatalf("%d jobs ended NOT_COMMITTED", c.Mutation[job.NotCommitted])
	}
}
