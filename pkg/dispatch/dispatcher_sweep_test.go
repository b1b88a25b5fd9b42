package dispatch

import (
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// The deadline sweep gives up expired jobs only: UNKNOWN, slot kept.
func TestDeadlineSweepExpiredOnly(t *testing.T) {
	e := newEnv(t)
	b1 := e.addBackend("b1:9060", 1)
	ids := e.admit(3)
	e.markRunning(ids[0], b1, 1, e.nowMs()-1, 3)      // expired
	e.markRunning(ids[1], b1, 1, e.nowMs(), 3)        // due exactly now: not past yet
	e.markRunning(ids[2], b1, 1, e.nowMs()+60_000, 3) // ahead
	mark := e.prop.count()
	e.round() // no heartbeat: nothing else to do
	wantTypes(t, e.prop.TypesSince(mark), raftfsm.CmdCompleteBatch)
	r := e.wantState(ids[0], job.Unknown)
	if r.Result.Code != job.NoTrustedResult || !r.HoldsPossibleLiveSlot() || !r.Unresolved() {
		t.Fatalf("expired job: code %s slot %v unresolved %v", r.Result.Code, r.HoldsPossibleLiveSlot(), r.Unresolved())
	}
	e.wantState(ids[1], job.Running)
	e.wantState(ids[2], job.Running)
	if e.fsm.State().HeldSlots(b1) != 3 {
		t.Fatal("a deadline released a slot")
	}
	e.clock.Advance(time.Millisecond)
	e.round()
	e.wantState(ids[1], job.Unknown)
	e.wantState(ids[2], job.Running)
}

// Before it gives up, the deadline sweep reconciles: a finished invocation
// converges from its stored result, the rest become UNKNOWN, in one entry.
func TestDeadlineSweepReconcilesFirst(t *testing.T) {
	e := newEnv(t)
	b1 := e.addBackend("b1:9060", 1)
	ids := e.admit(2)
	done := e.markRunning(ids[0], b1, 1, e.nowMs()-1, 3)
	queued := e.markRunning(ids[1], b1, 1, e.nowMs()-1, 3)
	e.be.setQuery(queryAnswer(map[string]*wire.TInvocationStatus{
		done.InvocationID:   finished(done, wire.TLanceIndexJobResultCode_NATIVE_OK, nil),
		queued.InvocationID: {InvocationID: queued.InvocationID, State: wire.TLanceInvocationState_QUEUED},
	}))
	mark := e.prop.count()
	e.round()
	wantTypes(t, e.prop.TypesSince(mark), raftfsm.CmdCompleteBatch)
	if batch := decodeEntry(t, e.prop.since(mark)[0], journal.NewTCompleteBatch()); len(batch.Completions) != 2 {
		t.Fatalf("%d completions, want one per job (a reconciled job is not also given up)", len(batch.Completions))
	}
	if r := e.wantState(ids[0], job.Committed); r.Result.Code != job.NativeOK {
		t.Fatalf("reconciled result %s", r.Result.Code)
	}
	e.wantState(ids[1], job.Unknown)
	q := e.be.queried()
	if len(q) != 1 || q[0].LeaderTerm != testTerm || q[0].BeProcessEpoch != 1 || len(q[0].InvocationIds) != 2 {
		t.Fatalf("queries %+v", q)
	}
}

// The epoch sweep: a changed epoch releases (whatever the mutation state);
// a backend not heard this term, the same epoch and lost heartbeats never do.
func TestEpochSweep(t *testing.T) {
	t.Run("changed epoch releases RUNNING and UNKNOWN", func(t *testing.T) {
		e := newEnv(t)
		b1 := e.addBackend("b1:9060", 1)
		ids := e.admit(2)
		e.markRunning(ids[0], b1, 1, e.nowMs()+60_000, 3)
		unknown := e.markRunning(ids[1], b1, 1, e.nowMs()+60_000, 3)
		e.propose(raftfsm.CmdCompleteBatch, &journal.TCompleteBatch{NowMs: e.nowMs(), Completions: []*journal.TCompletion{
			recordIdentity(unknown).completion(job.NoTrustedResult, "x", false)}})
		e.heartbeat()
		mark := e.prop.count()
		e.round()
		if got := e.prop.TypesSince(mark); len(got) != 0 {
			t.Fatalf("same epoch journaled %v", got)
		}
		e.be.setEpoch("b1:9060", 2) // the backend restarted
		e.heartbeat()
		e.round()
		types := e.prop.TypesSince(mark)
		if len(types) == 0 || types[0] != raftfsm.CmdRecordProofBatch {
			t.Fatalf("journaled %v, want a RecordProofBatch first", types)
		}
		proofs := decodeEntry(t, e.prop.since(mark)[0], journal.NewTRecordProofBatch())
		if len(proofs.Proofs) != 2 {
			t.Fatalf("%d proofs in the entry, want 2 in one", len(proofs.Proofs))
		}
		for id, st := range map[int64]job.MutationState{ids[0]: job.Running, ids[1]: job.Unknown} {
			r := e.wantState(id, st)
			if r.HoldsPossibleLiveSlot() || r.TerminationProof != job.ProofProcessEpochGone {
				t.Fatalf("job %d: slot %v proof %s", id, r.HoldsPossibleLiveSlot(), r.TerminationProof)
			}
		}
		if held := e.fsm.State().HeldSlots(b1); held != 0 {
			t.Fatalf("held slots %d, want 0", held)
		}
	})
	never := func(name string, setup func(e *env, b1 int64)) {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			b1 := e.addBackend("b1:9060", 1)
			ids := e.admit(1)
			e.markRunning(ids[0], b1, 1, e.nowMs()+3_600_000, 3)
			setup(e, b1)
			mark := e.prop.count()
			e.round()
			for _, ct := range e.prop.TypesSince(mark) {
				if ct == raftfsm.CmdRecordProofBatch {
					t.Fatal("a proof was recorded without a changed epoch heard this term")
				}
			}
			if r := e.job(ids[0]); !r.HoldsPossibleLiveSlot() {
				t.Fatal("the slot was released")
			}
		})
	}
	never("backend not heard this term", func(*env, int64) {})
	never("same epoch", func(e *env, _ int64) { e.heartbeat() })
	never("lost heartbeats", func(e *env, _ int64) {
		e.heartbeat()
		e.be.setEpoch("b1:9060", 0)
		for range 5 {
			e.clock.Advance(DefaultHeartbeatInterval)
			e.heartbeat()
		}
		if alive, _, _ := e.pool.View(1); alive {
			t.Fatal("backend should not be alive")
		}
	})
	never("another epoch heard in an older term only", func(e *env, _ int64) {
		e.be.setEpoch("b1:9060", 2)
		old := e.pool.beginTerm(testTerm - 1)
		e.pool.heartbeatPass(e.ctx, old, testTerm-1)
		e.poolGen = e.pool.beginTerm(testTerm) // this term's run has not heard it yet
	})
}

func finished(r *job.Record, code wire.TLanceIndexJobResultCode, proof *wire.TLanceIndexTerminationProof) *wire.TInvocationStatus {
	msg := "built"
	return &wire.TInvocationStatus{InvocationID: r.InvocationID, State: wire.TLanceInvocationState_FINISHED,
		TerminationProof: proof,
		Result_: &wire.TLanceIndexJobReport{JobID: r.JobID, DispatchRevision: r.DispatchRevision,
			InvocationID: r.InvocationID, BeProcessEpoch: r.ProcessEpoch, ResultCode: &code, SanitizedMessage: &msg,
			InvocationSecret: strPtr(r.InvocationSecret)}}
}

// A backend answering with a LOWER epoch than a job was dispatched at
// proves nothing (§13.1): never a released slot; warned and counted once
// per change.
func TestLowerEpochNeverReleases(t *testing.T) {
	obs := &countingObserver{outcomes: map[Outcome]int{}}
	e := newEnv(t, func(d *Deps) { d.Observer = obs })
	b1 := e.addBackend("b1:9060", 5)
	id := e.admit(1)[0]
	e.markRunning(id, b1, 5, e.nowMs()+3_600_000, 3)
	e.be.setEpoch("b1:9060", 3) // another, older process answers at the address
	e.heartbeat()
	mark := e.prop.count()
	e.round()
	e.round()
	for _, ct := range e.prop.TypesSince(mark) {
		if ct == raftfsm.CmdRecordProofBatch {
			t.Fatal("a lower epoch released a slot")
		}
	}
	if r := e.wantState(id, job.Running); !r.HoldsPossibleLiveSlot() || r.TerminationProof != job.ProofNone {
		t.Fatalf("slot %v proof %s", r.HoldsPossibleLiveSlot(), r.TerminationProof)
	}
	warns := e.logs.FilterMessageSnippet("LOWER process epoch").All()
	if len(warns) != 1 || warns[0].ContextMap()["epoch"] != int64(3) || warns[0].ContextMap()["job_epoch"] != int64(5) {
		t.Fatalf("warnings %v, want one naming both epochs", warns)
	}
	if obs.lowerEpochs != 1 {
		t.Fatalf("counted %d times, want once", obs.lowerEpochs)
	}
	// Another lower epoch is news again; a higher one is a proof.
	e.be.setEpoch("b1:9060", 4)
	e.heartbeat()
	e.round()
	if n := e.logs.FilterMessageSnippet("LOWER process epoch").Len(); n != 2 {
		t.Fatalf("%d warnings after a change, want 2", n)
	}
	e.be.setEpoch("b1:9060", 6)
	e.heartbeat()
	e.round()
	if r := e.job(id); r.HoldsPossibleLiveSlot() || r.TerminationProof != job.ProofProcessEpochGone {
		t.Fatalf("a higher epoch: slot %v proof %s", r.HoldsPossibleLiveSlot(), r.TerminationProof)
	}
}
