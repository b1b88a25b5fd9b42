package dispatch

import (
	"testing"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/options"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// A hung backend holds neither another backend's dispatch nor the next
// round (DESIGN.md §13.9).
func TestHungBackendHoldsNothing(t *testing.T) {
	e := newEnv(t)
	b1 := e.addBackend("b1:9060", 1)
	b2 := e.addBackend("b2:9060", 1)
	e.setOption(options.OptMaxInflightPerBackend, "1")
	ids := e.admit(2)
	e.heartbeat()
	hung, release := e.hang("b1:9060", nil)

	e.roundWithin()
	if got := <-hung; got != ids[0] {
		t.Fatalf("job %d hung, want %d", got, ids[0])
	}
	waitFor(t, "the other backend's dispatch", func() bool {
		for _, s := range e.be.submitted() {
			if s.addr == "b2:9060" && s.d.JobID == ids[1] {
				return true
			}
		}
		return false
	})
	if r := e.wantState(ids[1], job.Running); r.BackendID != b2 {
		t.Fatalf("job went to backend %d", r.BackendID)
	}

	// The next round runs while b1 still hangs: b2's job is done, a new one
	// goes there.
	e.report(ids[1], job.NativeOK)
	next := e.admit(1)[0]
	e.roundWithin()
	waitFor(t, "the next round's dispatch", func() bool { return len(e.be.submitted()) == 3 })
	if r := e.wantState(next, job.Running); r.BackendID != b2 {
		t.Fatalf("the next job went to backend %d", r.BackendID)
	}
	if r := e.wantState(ids[0], job.Running); r.BackendID != b1 {
		t.Fatal("the hung job moved")
	}
	release()
	e.d.Wait()
	e.wantState(ids[0], job.Running) // OK at last: the report decides
}

// A refusal is journaled as soon as it is known, before a slow send of the
// same round returns.
func TestRefusalJournaledBeforeSlowSend(t *testing.T) {
	e := newEnv(t)
	e.addBackend("b1:9060", 1)
	e.addBackend("b2:9060", 1)
	e.setOption(options.OptMaxInflightPerBackend, "1")
	ids := e.admit(2)
	e.heartbeat()
	slow, release := e.hang("b1:9060", func(string, *wire.TLanceIndexJobDispatch) (*wire.TStatus, error) {
		return &wire.TStatus{StatusCode: wire.TStatusCode_QUEUE_FULL}, nil
	})
	mark := e.prop.count()
	e.roundWithin()
	<-slow
	waitFor(t, "the refusal's entry", func() bool {
		for _, entry := range e.prop.since(mark) {
			if raftfsm.CommandType(entry[0]) != raftfsm.CmdCompleteBatch {
				continue
			}
			for _, c := range decodeEntry(t, entry, journal.NewTCompleteBatch()).Completions {
				if c.JobID == ids[1] && c.GetNeverEnqueued() {
					return true
				}
			}
		}
		return false
	})
	if r := e.job(ids[1]); r.MutationState == job.Running || r.HoldsPossibleLiveSlot() {
		t.Fatalf("the refused job is %s, slot %v", r.MutationState, r.HoldsPossibleLiveSlot())
	}
	e.wantState(ids[0], job.Running) // still on the wire
	release()
}

// The calls in flight to one backend are bounded (Deps.SendConcurrency):
// beyond that, jobs stay PENDING, nothing is journaled for them.
func TestSendsInFlightBounded(t *testing.T) {
	e := newEnv(t, func(d *Deps) { d.SendConcurrency = 2 })
	b1 := e.addBackend("b1:9060", 1)
	e.setOption(options.OptMaxInflightPerBackend, "100")
	ids := e.admit(5)
	e.heartbeat()
	hung, release := e.hang("b1:9060", nil)
	e.roundWithin()
	<-hung
	<-hung
	e.roundWithin()
	if n := len(e.be.submitted()); n != 2 {
		t.Fatalf("%d sends in flight to one backend, want the bound 2", n)
	}
	for i, id := range ids {
		want := job.Pending
		if i < 2 {
			want = job.Running
		}
		e.wantState(id, want)
	}
	if got := e.fsm.State().HeldSlots(b1); got != 2 {
		t.Fatalf("held slots %d", got)
	}
	release()
	e.d.Wait()
	e.round()
	if n := len(e.be.submitted()); n != 4 {
		t.Fatalf("%d sends after the room came back, want 4", n)
	}
}
