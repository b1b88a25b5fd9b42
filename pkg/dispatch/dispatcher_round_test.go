package dispatch

import (
	"errors"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/options"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// One round does, in this order: deadline sweep (its queries and their
// CompleteBatch run on their own: a backend never holds the round), epoch
// sweep (RecordProofBatch), the refresh driver, PENDING dispatch (M1).
func TestRoundOrder(t *testing.T) {
	e := newEnv(t)
	b1 := e.addBackend("b1:9060", 1)
	b2 := e.addBackend("b2:9060", 2) // restarted: jobs dispatched at epoch 1 are gone
	ids := e.admit(3)
	expired := e.markRunning(ids[0], b1, 1, e.nowMs()-1, 3)
	e.markRunning(ids[1], b2, 1, e.nowMs()+3_600_000, 3)
	e.heartbeat()
	queried, release := make(chan struct{}), make(chan struct{})
	e.be.setQuery(func(string, *wire.TQueryInvocationsRequest) (*wire.TQueryInvocationsResponse, error) {
		close(queried)
		<-release // a slow backend
		return nil, bytesLeftErr("b1:9060")
	})
	mark := e.prop.count()

	e.roundWithin()
	<-queried
	wantTypes(t, e.prop.TypesSince(mark), raftfsm.CmdRecordProofBatch, raftfsm.CmdMarkRunningBatch)
	if calls := e.refresh.called(); len(calls) != 1 || calls[0] != mark+1 {
		t.Fatalf("refresh called at entry counts %v, want once after the epoch sweep (%d)", calls, mark+1)
	}
	e.wantState(ids[0], job.Running) // its query is still out
	close(release)
	e.d.Wait()
	wantTypes(t, e.prop.TypesSince(mark), raftfsm.CmdRecordProofBatch, raftfsm.CmdMarkRunningBatch, raftfsm.CmdCompleteBatch)
	if q := e.be.queried(); len(q) != 1 || q[0].InvocationIds[0] != expired.InvocationID {
		t.Fatalf("deadline sweep should reconcile the expired job first; queries %v", q)
	}
	e.wantState(ids[0], job.Unknown)
	if r := e.wantState(ids[1], job.Running); r.HoldsPossibleLiveSlot() || r.TerminationProof != job.ProofProcessEpochGone {
		t.Fatalf("epoch sweep: slot %v proof %s", r.HoldsPossibleLiveSlot(), r.TerminationProof)
	}
	e.wantState(ids[2], job.Running)
	if n := len(e.be.submitted()); n != 1 {
		t.Fatalf("submits = %d, want 1", n)
	}
}

func TestIdleRoundProposesNothing(t *testing.T) {
	e := newEnv(t)
	b1 := e.addBackend("b1:9060", 1)
	ids := e.admit(1)
	e.markRunning(ids[0], b1, 1, e.nowMs()+60_000, testTerm) // same epoch, deadline ahead
	e.heartbeat()
	mark := e.prop.count()
	for range 3 {
		e.round()
	}
	if got := e.prop.TypesSince(mark); len(got) != 0 {
		t.Fatalf("idle rounds journaled %v", got)
	}
	if len(e.be.submitted()) != 0 || len(e.be.queried()) != 0 {
		t.Fatal("idle rounds talked to a backend")
	}
	if len(e.refresh.called()) != 3 {
		t.Fatal("the refresh driver runs every round")
	}
}

// The M1 entry is committed before the backend sees a byte.
func TestJournalBeforeSend(t *testing.T) {
	var afterJournal []int64
	e := newEnv(t, func(d *Deps) { d.Hooks.AfterJournal = func(ids []int64) { afterJournal = ids } })
	e.addBackend("b1:9060", 1)
	ids := e.admit(2)
	e.heartbeat()
	var violations []string
	e.be.setSubmit(func(_ string, d *wire.TLanceIndexJobDispatch) (*wire.TStatus, error) {
		r, ok := e.fsm.State().Job(d.JobID)
		if !ok || r.MutationState != job.Running || r.InvocationID != d.InvocationID || r.DispatchRevision != d.DispatchRevision ||
			r.ProcessEpoch != d.BeProcessEpoch || r.DeadlineMs != d.DeadlineMs || r.LeaderTerm != d.GetLeaderTerm() {
			violations = append(violations, "send before its M1 was applied")
		}
		if afterJournal == nil {
			violations = append(violations, "send before AfterJournal")
		}
		return &wire.TStatus{StatusCode: wire.TStatusCode_OK}, nil
	})
	mark := e.prop.count()
	e.round()
	if len(violations) > 0 {
		t.Fatal(violations)
	}
	if len(afterJournal) != 2 || afterJournal[0] != ids[0] || afterJournal[1] != ids[1] {
		t.Fatalf("AfterJournal got %v", afterJournal)
	}
	wantTypes(t, e.prop.TypesSince(mark), raftfsm.CmdMarkRunningBatch)
	m1 := decodeEntry(t, e.prop.since(mark)[0], journal.NewTMarkRunningBatch())
	if len(m1.Jobs) != 2 {
		t.Fatalf("one M1 entry for the round, with %d jobs", len(m1.Jobs))
	}
	for _, s := range e.be.submitted() {
		if s.d.GetLeaderTerm() != testTerm {
			t.Fatalf("dispatch carries term %d", s.d.GetLeaderTerm())
		}
	}
}

// A lost compare-and-set sends nothing; the next round mints a fresh identity.
func TestCASLossNoSendFreshIdentity(t *testing.T) {
	e := newEnv(t)
	e.addBackend("b1:9060", 1)
	ids := e.admit(1)
	e.heartbeat()
	var lostInvocation string
	e.prop.rewrite = func(cmd []byte) []byte {
		if raftfsm.CommandType(cmd[0]) != raftfsm.CmdMarkRunningBatch {
			return cmd
		}
		b := decodeEntry(t, cmd, journal.NewTMarkRunningBatch())
		lostInvocation = b.Jobs[0].InvocationID
		b.Jobs[0].ExpectedRev += 100 // someone moved the record first
		out, err := raftfsm.Encode(raftfsm.CmdMarkRunningBatch, b)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	e.round()
	e.wantState(ids[0], job.Pending)
	if n := len(e.be.submitted()); n != 0 {
		t.Fatalf("a lost CAS was sent %d times", n)
	}
	e.prop.rewrite = nil
	e.round()
	r := e.wantState(ids[0], job.Running)
	if r.InvocationID == lostInvocation {
		t.Fatal("the next round reused the identity of the lost CAS")
	}
	if s := e.be.submitted(); len(s) != 1 || s[0].d.InvocationID != r.InvocationID {
		t.Fatalf("submits %v", s)
	}
}

// A failed pre-send recheck never sends, and journals nothing more.
func TestFailedRecheckNeverSends(t *testing.T) {
	cases := []struct {
		name  string
		after func(e *env, ids []int64)
		send  func(e *env, id int64) error
		// completes is how many CompleteBatch entries follow the M1: only
		// the one the test itself journals as a report.
		completes int
	}{
		{name: "leadership lost", after: func(e *env, _ []int64) { e.prop.SetLeader(false) }},
		{name: "term changed", after: func(e *env, _ []int64) { e.prop.SetTerm(testTerm + 1) }},
		{name: "record changed (a report got there first)", completes: 2, after: func(e *env, ids []int64) {
			for _, id := range ids {
				e.propose(raftfsm.CmdCompleteBatch, &journal.TCompleteBatch{NowMs: e.nowMs(), Completions: []*journal.TCompletion{
					recordIdentity(e.job(id)).completion(job.NativeOK, "done", false)}})
			}
		}},
		{name: "BeforeSend aborts", send: func(*env, int64) error { return errors.New("lost leadership") }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var e *env
			e = newEnv(t, func(d *Deps) {
				if tc.after != nil {
					d.Hooks.AfterJournal = func(ids []int64) { tc.after(e, ids) }
				}
				if tc.send != nil {
					d.Hooks.BeforeSend = func(id int64) error { return tc.send(e, id) }
				}
			})
			e.addBackend("b1:9060", 1)
			e.admit(2)
			e.heartbeat()
			mark := e.prop.count()
			_ = e.d.RunRound(e.ctx)
			e.d.Wait()
			if n := len(e.be.submitted()); n != 0 {
				t.Fatalf("sent %d dispatches after a failed recheck", n)
			}
			completes := 0
			for _, ct := range e.prop.TypesSince(mark) {
				if ct == raftfsm.CmdCompleteBatch {
					completes++
				}
			}
			if completes != tc.completes {
				t.Fatalf("%d CompleteBatch entries, want %d: an unsent dispatch must not be classified", completes, tc.completes)
			}
		})
	}
}

// Options are re-read every round.
func TestOptionsRereadPerRound(t *testing.T) {
	e := newEnv(t)
	e.addBackend("b1:9060", 1)
	e.setOption(options.OptMaxInflightPerBackend, "100")
	e.setOption(options.OptMaxDispatchPerRound, "1")
	ids := e.admit(5)
	e.heartbeat()
	e.round()
	if n := len(e.be.submitted()); n != 1 {
		t.Fatalf("round 1 sent %d, want 1", n)
	}
	e.setOption(options.OptMaxDispatchPerRound, "3")
	e.round()
	if n := len(e.be.submitted()); n != 4 {
		t.Fatalf("after raising the cap, %d sent, want 4", n)
	}
	for i, id := range ids {
		want := job.Running
		if i == 4 {
			want = job.Pending
		}
		e.wantState(id, want)
	}
	e.setOption(options.OptExecuteDeadlineSecond, "5")
	e.round()
	if r := e.job(ids[4]); r.DeadlineMs != e.nowMs()+5000 {
		t.Fatalf("deadline %d, want now+5s %d", r.DeadlineMs, e.nowMs()+5000)
	}
}

func TestPausedStaysPending(t *testing.T) {
	e := newEnv(t)
	e.addBackend("b1:9060", 1)
	e.setOption(options.OptDispatcherPaused, "true")
	ids := e.admit(2)
	e.heartbeat()
	mark := e.prop.count()
	e.round()
	e.wantState(ids[0], job.Pending)
	if got := e.prop.TypesSince(mark); len(got) != 0 || len(e.be.submitted()) != 0 {
		t.Fatalf("paused dispatcher journaled %v", got)
	}
	e.setOption(options.OptDispatcherPaused, "false")
	e.round()
	e.wantState(ids[0], job.Running)
}

// A hold (an operator restore in progress) stops the PENDING dispatch
// whatever the journaled options say, until it is released.
func TestHoldStaysPending(t *testing.T) {
	e := newEnv(t)
	e.addBackend("b1:9060", 1)
	ids := e.admit(2)
	e.heartbeat()
	release := e.d.Hold()
	mark := e.prop.count()
	e.round()
	e.wantState(ids[0], job.Pending)
	if got := e.prop.TypesSince(mark); len(got) != 0 || len(e.be.submitted()) != 0 {
		t.Fatalf("a held dispatcher journaled %v", got)
	}
	release()
	release() // idempotent: one release per hold
	e.round()
	e.wantState(ids[0], job.Running)
}

// Jobs a snapshot restore held (raftfsm.PrepareRestore: their dispatch
// history is unknown) are never dispatched: the round walks past them to
// the jobs behind, and journals no M1 for them.
func TestRestoreHeldJobsAreNeverDispatched(t *testing.T) {
	e := newEnv(t)
	e.addBackend("b1:9060", 1)
	e.setOption(options.OptMaxDispatchPerRound, "1")
	held := e.admit(3)
	if n := e.restoreHeld(); n != 3 {
		t.Fatalf("%d jobs held, want 3", n)
	}
	fresh := e.admit(1)[0]
	e.heartbeat()
	e.round()
	e.wantState(fresh, job.Running)
	for _, id := range held {
		if r := e.wantState(id, job.Pending); !r.RestoreHold {
			t.Fatalf("job %d lost its hold", id)
		}
	}
	if n := len(e.be.submitted()); n != 1 {
		t.Fatalf("%d submits, want the fresh job's only", n)
	}
	e.round()
	for _, id := range held {
		e.wantState(id, job.Pending)
	}
}

func TestBackpressurePerRound(t *testing.T) {
	e := newEnv(t)
	e.addBackend("b1:9060", 1)
	e.addBackend("b2:9060", 1)
	e.setOption(options.OptMaxDispatchPerRound, "2")
	ids := e.admit(5)
	e.heartbeat()
	e.round()
	for i, id := range ids {
		want := job.Pending
		if i < 2 {
			want = job.Running // id order
		}
		e.wantState(id, want)
	}
}

func TestBackpressurePerBackend(t *testing.T) {
	e := newEnv(t)
	b1 := e.addBackend("b1:9060", 1)
	b2 := e.addBackend("b2:9060", 1)
	e.setOption(options.OptMaxInflightPerBackend, "2")
	ids := e.admit(6)
	// b1 already holds a slot of an earlier dispatch (an UNKNOWN job still
	// holds it: slots, not RUNNING state, count).
	old := e.markRunning(ids[0], b1, 1, e.nowMs()+60_000, 3)
	e.propose(raftfsm.CmdCompleteBatch, &journal.TCompleteBatch{NowMs: e.nowMs(), Completions: []*journal.TCompletion{
		recordIdentity(old).completion(job.NoTrustedResult, "x", false)}})
	e.heartbeat()
	e.round()
	// Least loaded first, then lowest id: b2 (0), b1 (1) vs b2 (1) → b1, then b2.
	wantBackend := map[int64]int64{ids[1]: b2, ids[2]: b1, ids[3]: b2}
	for id, b := range wantBackend {
		if r := e.wantState(id, job.Running); r.BackendID != b {
			t.Fatalf("job %d went to backend %d, want %d", id, r.BackendID, b)
		}
	}
	e.wantState(ids[4], job.Pending)
	e.wantState(ids[5], job.Pending)
	if e.fsm.State().HeldSlots(b1) != 2 || e.fsm.State().HeldSlots(b2) != 2 {
		t.Fatalf("held slots %d/%d", e.fsm.State().HeldSlots(b1), e.fsm.State().HeldSlots(b2))
	}
	// A full cluster stays PENDING and journals nothing.
	mark := e.prop.count()
	e.round()
	if got := e.prop.TypesSince(mark); len(got) != 0 {
		t.Fatalf("full backends: journaled %v", got)
	}
}

// No backend, a backend never heard this term, or a backend not alive: the
// job stays PENDING and nothing is written.
func TestNoUsableBackendStaysPending(t *testing.T) {
	cases := []struct {
		name  string
		setup func(e *env)
	}{
		{"no backend registered", func(e *env) {}},
		{"heartbeats fail", func(e *env) { e.addBackend("b1:9060", 0); e.heartbeat() }},
		{"epoch not yet heard this term", func(e *env) { e.addBackend("b1:9060", 1) }},
		{"heard in an older term only", func(e *env) {
			e.addBackend("b1:9060", 1)
			e.heartbeat()
			e.pool.beginTerm(testTerm + 1) // the pool now serves a newer term
		}},
		{"heard only by a newer term's run", func(e *env) {
			e.addBackend("b1:9060", 1)
			gen := e.pool.beginTerm(testTerm + 1)
			e.pool.heartbeatPass(e.ctx, gen, testTerm+1)
		}},
		{"not alive any more", func(e *env) {
			e.addBackend("b1:9060", 1)
			e.heartbeat()
			e.clock.Advance(3*DefaultHeartbeatInterval + time.Millisecond)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			tc.setup(e)
			ids := e.admit(1)
			mark := e.prop.count()
			e.round()
			e.wantState(ids[0], job.Pending)
			if got := e.prop.TypesSince(mark); len(got) != 0 || len(e.be.submitted()) != 0 {
				t.Fatalf("journaled %v, sent %d", got, len(e.be.submitted()))
			}
		})
	}
}

// Local datasets need the operator's assertion and exactly one backend.
func TestLocalFileGate(t *testing.T) {
	cases := []struct {
		name     string
		assert   bool
		backends int
		want     job.MutationState
	}{
		{"assertion off", false, 1, job.Pending},
		{"assertion on, two backends", true, 2, job.Pending},
		{"assertion on, one backend", true, 1, job.Running},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			if tc.assert {
				e.setOption(options.OptEnableLocalFileMutation, "true")
			}
			for i := range tc.backends {
				e.addBackend([]string{"b1:9060", "b2:9060"}[i], 1)
			}
			local := e.createCatalog("local", "/data/lake")
			localID := e.admitIn(local, "/data/lake", "items")
			remote := e.admit(1)[0]
			e.heartbeat()
			e.round()
			e.wantState(localID, tc.want)
			e.wantState(remote, job.Running) // a remote dataset is never gated
		})
	}
}

// An M1 entry whose fate is unknown: the jobs this replica shows journaled
// are sent once (they pass the recheck); nothing else is.
func TestMarkRunningFateUnknown(t *testing.T) {
	for _, applied := range []bool{true, false} {
		name := map[bool]string{true: "applied", false: "not applied"}[applied]
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			e.addBackend("b1:9060", 1)
			id := e.admit(1)[0]
			e.heartbeat()
			e.prop.fault = func(cmd []byte) (bool, error) {
				if raftfsm.CommandType(cmd[0]) != raftfsm.CmdMarkRunningBatch {
					return true, nil
				}
				return applied, errors.New("timed out waiting for the entry")
			}
			if err := e.d.RunRound(e.ctx); err == nil {
				t.Fatal("the round must report the failed proposal")
			}
			e.d.Wait()
			want, sends := job.Pending, 0
			if applied {
				want, sends = job.Running, 1
			}
			e.wantState(id, want)
			if n := len(e.be.submitted()); n != sends {
				t.Fatalf("%d sends, want %d", n, sends)
			}
			// Next round: a journaled job is never sent again; one that was
			// not journaled is dispatched afresh.
			e.prop.fault = nil
			e.round()
			e.wantState(id, job.Running)
			if s := e.be.submitted(); len(s) != 1 || s[0].d.InvocationID != e.job(id).InvocationID {
				t.Fatalf("sends %d, want exactly one, of the journaled identity", len(s))
			}
		})
	}
}

// A round that fills max_dispatch_per_round wakes the next round at once, so
// a backlog drains without waiting for the interval; a round below its cap
// does not wake itself.
func TestFullRoundWakesTheNext(t *testing.T) {
	e := newEnv(t)
	e.addBackend("b1:9060", 1)
	e.setOption(options.OptMaxDispatchPerRound, "2")
	e.setOption(options.OptMaxInflightPerBackend, "10")
	ids := e.admit(3)
	e.heartbeat()
	drain := func() bool {
		select {
		case <-e.waker.C():
			return true
		default:
			return false
		}
	}
	drain() // admissions and heartbeats may have woken it already
	e.round()
	if !drain() {
		t.Fatal("a round that filled its cap did not wake the next one")
	}
	e.round() // dispatches the third job: below the cap
	if drain() {
		t.Fatal("a round below its cap woke itself")
	}
	for _, id := range ids {
		e.wantState(id, job.Running)
	}
}
