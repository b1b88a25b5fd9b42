package dispatch

import (
	"testing"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/options"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

func (e *env) drain(id int64, drained bool) {
	e.t.Helper()
	if resp := e.propose(raftfsm.CmdDrainBackend, &journal.TDrainBackendCommand{NowMs: e.nowMs(), BackendID: id, Drained: drained}); resp.Code != journal.TApplyCode_OK {
		e.t.Fatalf("drain %d: %v %s", id, resp.Code, resp.GetMessage())
	}
}

// A drained backend is never picked for a new dispatch, while the job
// already running there finishes and reports as before and the leader
// goes on heartbeating it; undrained, it is picked again.
func TestDrainedBackendIsNeverPicked(t *testing.T) {
	e := newEnv(t)
	b1 := e.addBackend("b1:9060", 1)
	b2 := e.addBackend("b2:9060", 1)
	e.setOption(options.OptMaxInflightPerBackend, "8")
	ids := e.admit(4)
	running := e.markRunning(ids[0], b1, 1, e.nowMs()+60_000, 3) // b1 is the least loaded otherwise
	e.drain(b1, true)
	e.heartbeat()
	e.round()
	for _, id := range ids[1:] {
		if r := e.wantState(id, job.Running); r.BackendID != b2 {
			t.Fatalf("job %d went to backend %d; b1 (%d) is drained", id, r.BackendID, b1)
		}
	}
	for _, s := range e.be.submitted() {
		if s.addr == "b1:9060" {
			t.Fatalf("job %d was sent to the drained backend", s.d.JobID)
		}
	}
	// Its running job reports and completes; heartbeats go on.
	e.report(running.JobID, job.NativeOK)
	e.wantState(running.JobID, job.Committed)
	beats := func() int { e.be.mu.Lock(); defer e.be.mu.Unlock(); return len(e.be.heartbeats) }
	hb := beats()
	e.heartbeat()
	if st, ok := e.pool.Status(b1); beats() != hb+2 || !ok || !st.Alive {
		t.Fatalf("heartbeats after the drain: %d more, status %+v", beats()-hb, st)
	}

	// Every backend drained: the work waits, nothing is journaled.
	e.drain(b2, true)
	more := e.admit(1)
	mark := e.prop.count()
	e.round()
	e.wantState(more[0], job.Pending)
	if got := e.prop.TypesSince(mark); len(got) != 0 {
		t.Fatalf("every backend drained: journaled %v", got)
	}
	e.drain(b1, false)
	e.round()
	if r := e.wantState(more[0], job.Running); r.BackendID != b1 {
		t.Fatalf("after undrain the job went to %d, want %d", r.BackendID, b1)
	}
}
