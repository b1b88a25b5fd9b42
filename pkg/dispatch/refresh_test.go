package dispatch

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/pkg/testkit"

	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/options"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

func rfStep(t *testing.T, d *RefreshDriver) {
	t.Helper()
	if err := d.Step(context.Background()); err != nil {
		t.Fatalf("Step: %v", err)
	}
}

func rfWantRefresh(t *testing.T, f *rfFixture, want job.RefreshState, ids ...int64) {
	t.Helper()
	for _, id := range ids {
		if got := f.job(id).RefreshState; got != want {
			t.Fatalf("job %d refresh = %s, want %s", id, got, want)
		}
	}
}

func TestRefreshStepOrderAndArguments(t *testing.T) {
	f := rfNew(t)
	lake := f.catalog("lake", raftfsm.RefreshNone, "")
	hooks := f.catalog("hooks", raftfsm.RefreshWebhook, "https://meta.example/refresh?token=t0ken")
	j1 := f.admit(lake, "db", "t1", "MyIdx", job.Create, false)
	j2 := f.admit(hooks, "sales", "orders", "ByDay", job.Replace, false)
	j3 := f.admit(lake, "db", "t3", "Old", job.Drop, true)
	notRequired := f.admit(lake, "db", "t4", "idx", job.Create, false)
	pending := f.admit(lake, "db", "t5", "idx", job.Create, false)
	f.finish(job.NativeOK, false, j1)
	f.finish(job.NativeCommitConflict, false, j2)
	f.finish(job.NativeNotFound, false, j3)
	f.finish(job.PreInvocationStaleAdmission, false, notRequired)
	rfWantRefresh(t, f, job.RefreshRequired, j1, j2, j3)

	rec := &rfRefresher{}
	d := f.driver(rec, func(d *RefreshDeps) { d.Concurrency = 1 }) // one at a time: calls in id order
	ids, revs := []int64{j1, j2, j3}, f.revs(j1, j2, j3)
	mark := f.p.count()
	rfStep(t, d)

	want := []RefreshRequest{
		{JobID: j1, Catalog: "lake", DB: "db", Table: "t1", IndexName: "MyIdx", MutationType: "CREATE", Outcome: "COMMITTED"},
		{JobID: j2, Catalog: "hooks", DB: "sales", Table: "orders", IndexName: "ByDay", MutationType: "REPLACE",
			Outcome: "NOT_COMMITTED", URL: "https://meta.example/refresh?token=t0ken"},
		{JobID: j3, Catalog: "lake", DB: "db", Table: "t3", IndexName: "Old", MutationType: "DROP", Outcome: "NOT_COMMITTED"},
	}
	if got := rec.called(); !reflect.DeepEqual(got, want) {
		t.Fatalf("refresh calls:\n got %+v\nwant %+v", got, want)
	}
	entries := f.p.Since(mark)
	if len(entries) != 2 {
		t.Fatalf("%d entries, want 2 (R1, then the outcomes)", len(entries))
	}
	rfWantTransitions(t, entries[0], job.RefreshRunning, ids, revs)
	rfWantTransitions(t, entries[1], job.RefreshDone, ids, rfPlus(revs, 1))
	for _, id := range ids {
		r := f.job(id)
		if r.RefreshState != job.RefreshDone || r.Unresolved() {
			t.Fatalf("job %d: refresh %s, unresolved %t; want DONE and resolved", id, r.RefreshState, r.Unresolved())
		}
	}
	rfWantRefresh(t, f, job.RefreshNotRequired, notRequired)
	if f.job(pending).MutationState != job.Pending {
		t.Fatalf("a PENDING job was touched")
	}

	mark = f.p.count()
	rfStep(t, d)
	if n := len(f.p.Since(mark)); n != 0 || len(rec.called()) != 3 {
		t.Fatalf("second step: %d entries, %d calls; want nothing new", n, len(rec.called()))
	}
}

func TestRefreshFailureRecordsR3(t *testing.T) {
	f := rfNew(t)
	cat := f.catalog("lake", raftfsm.RefreshNone, "")
	j1, j2 := f.committed(cat, "a"), f.committed(cat, "b")
	rec := &rfRefresher{fail: map[int64]error{j1: errors.New("metadata service says no")}}
	revs := f.revs(j1, j2)
	f.clk.Advance(time.Minute)
	mark := f.p.count()
	rfStep(t, f.driver(rec, nil))

	entries := f.p.Since(mark)
	if len(entries) != 2 {
		t.Fatalf("%d entries, want 2", len(entries))
	}
	rfWantTransitions(t, entries[0], job.RefreshRunning, []int64{j1, j2}, revs)
	c := rfRefreshBatch(t, entries[1])
	if got := rfTransitionIDs(c); !reflect.DeepEqual(got, []int64{j1, j2}) ||
		job.RefreshState(c.Transitions[0].ToState) != job.RefreshFailed ||
		job.RefreshState(c.Transitions[1].ToState) != job.RefreshDone {
		t.Fatalf("outcome entry = %+v, want j1 FAILED, j2 DONE", c.Transitions)
	}
	r1 := f.job(j1)
	if r1.RefreshState != job.RefreshFailed || r1.RefreshFailureTimeMs != f.nowMs() || !r1.Unresolved() {
		t.Fatalf("j1: refresh %s, failure time %d (now %d), unresolved %t", r1.RefreshState,
			r1.RefreshFailureTimeMs, f.nowMs(), r1.Unresolved())
	}
	rfWantRefresh(t, f, job.RefreshDone, j2)
	logged := f.logs.FilterMessageSnippet("refresh failed").FilterField(zap.Int64("job_id", j1))
	if logged.Len() != 1 {
		t.Fatalf("the failure was logged %d times, want once", logged.Len())
	}
}

// rfFailedAt leaves job id refresh FAILED at the clock's current time.
func rfFailedAt(t *testing.T, f *rfFixture, id int64) {
	t.Helper()
	rec := &rfRefresher{fail: map[int64]error{id: errors.New("down")}}
	rfStep(t, f.driver(rec, nil))
	rfWantRefresh(t, f, job.RefreshFailed, id)
}

func TestRefreshFailedThrottle(t *testing.T) {
	t.Run("fresh skipped, first REQUIRED not delayed, stale retried", func(t *testing.T) {
		f := rfNew(t)
		cat := f.catalog("lake", raftfsm.RefreshNone, "")
		failed := f.committed(cat, "a")
		rfFailedAt(t, f, failed)
		failedRev := f.job(failed).Rev

		// Right after the failure a first REQUIRED of another job goes at once.
		f.clk.Advance(30 * time.Second)
		fresh := f.committed(cat, "b")
		rec := &rfRefresher{}
		d := f.driver(rec, nil)
		mark := f.p.count()
		rfStep(t, d)
		if got := rec.calledIDs(); !reflect.DeepEqual(got, []int64{fresh}) {
			t.Fatalf("refreshed %v, want only the new REQUIRED job %d", got, fresh)
		}
		rfWantTransitions(t, f.p.Since(mark)[0], job.RefreshRunning, []int64{fresh}, []int64{f.job(fresh).Rev - 2})

		// Just before the default 300 s wait is over: nothing to do.
		f.clk.Advance(270*time.Second - time.Millisecond)
		mark = f.p.count()
		rfStep(t, d)
		if n := len(f.p.Since(mark)); n != 0 || len(rec.called()) != 1 {
			t.Fatalf("a fresh FAILED job was retried: %d entries, calls %v", n, rec.calledIDs())
		}

		// The wait is over: R1 from FAILED, then DONE.
		f.clk.Advance(time.Millisecond)
		mark = f.p.count()
		rfStep(t, d)
		if got := rec.calledIDs(); !reflect.DeepEqual(got, []int64{fresh, failed}) {
			t.Fatalf("refreshed %v, want the stale FAILED job retried", got)
		}
		rfWantTransitions(t, f.p.Since(mark)[0], job.RefreshRunning, []int64{failed}, []int64{failedRev})
		rfWantRefresh(t, f, job.RefreshDone, failed, fresh)
	})

	t.Run("the wait is re-read every step", func(t *testing.T) {
		f := rfNew(t)
		cat := f.catalog("lake", raftfsm.RefreshNone, "")
		failed := f.committed(cat, "a")
		rfFailedAt(t, f, failed)
		rec := &rfRefresher{}
		d := f.driver(rec, nil)
		f.clk.Advance(20 * time.Second)
		rfStep(t, d)
		if len(rec.called()) != 0 {
			t.Fatalf("retried before the wait")
		}
		f.setOption(options.OptRefreshRetrySecond, "20")
		rfStep(t, d)
		if got := rec.calledIDs(); !reflect.DeepEqual(got, []int64{failed}) {
			t.Fatalf("refreshed %v after lowering the wait, want %d", got, failed)
		}
	})

	t.Run("a backlog of retries never delays a first REQUIRED", func(t *testing.T) {
		f := rfNew(t)
		cat := f.catalog("lake", raftfsm.RefreshNone, "")
		a, b := f.committed(cat, "a"), f.committed(cat, "b")
		rec := &rfRefresher{fail: map[int64]error{a: errors.New("x"), b: errors.New("x")}}
		rfStep(t, f.driver(rec, nil))
		rfWantRefresh(t, f, job.RefreshFailed, a, b)
		f.clk.Advance(time.Hour) // both stale
		c := f.committed(cat, "c")
		rec = &rfRefresher{}
		rfStep(t, f.driver(rec, func(d *RefreshDeps) { d.MaxPerStep = 2; d.Concurrency = 1 }))
		if got := rec.calledIDs(); !reflect.DeepEqual(got, []int64{a, c}) {
			t.Fatalf("refreshed %v, want the REQUIRED job %d and then the oldest retry %d", got, c, a)
		}
		rfWantRefresh(t, f, job.RefreshFailed, b)
	})
}

func TestRefreshForceReleasedExcluded(t *testing.T) {
	f := rfNew(t)
	cat := f.catalog("lake", raftfsm.RefreshNone, "")
	released := f.admit(cat, "db", "a", "idx", job.Create, false)
	f.finish(job.NativeIO, false, released) // UNKNOWN
	// An UNKNOWN outcome whose refresh is REQUIRED (no command produces it).
	f.restoreEditing(func(r *journal.TJobRecord) {
		if r.JobID == released {
			r.RefreshState = rfPtr(journal.TRefreshState_REQUIRED)
		}
	})
	if due := f.st().RefreshDue(0); len(due) != 1 || due[0].JobID != released {
		t.Fatalf("fixture: the UNKNOWN job must be due before its release; due = %d jobs", len(due))
	}
	f.apply(raftfsm.CmdForceRelease, &journal.TForceReleaseCommand{NowMs: f.nowMs(), JobID: released,
		Actor: "ops", Note: "checked by hand", Warning: "the old worker may still change the index"})
	other := f.committed(cat, "b")

	rec := &rfRefresher{}
	mark := f.p.count()
	rfStep(t, f.driver(rec, nil))
	if got := rec.calledIDs(); !reflect.DeepEqual(got, []int64{other}) {
		t.Fatalf("refreshed %v, want only %d", got, other)
	}
	for _, e := range f.p.Since(mark) {
		if ids := rfTransitionIDs(rfRefreshBatch(t, e)); !reflect.DeepEqual(ids, []int64{other}) {
			t.Fatalf("an entry names %v", ids)
		}
	}
	rfWantRefresh(t, f, job.RefreshRequired, released)
}

func TestRefreshUnknownKindFails(t *testing.T) {
	f := rfNew(t)
	cat := f.catalog("hooks", raftfsm.RefreshWebhook, "https://meta.example/r?token=t0ken")
	id := f.committed(cat, "a")
	rec := &rfRefresher{}
	rfStep(t, f.driver(rec, func(d *RefreshDeps) { d.Refreshers = Refreshers{raftfsm.RefreshNone: rec} }))
	if len(rec.called()) != 0 {
		t.Fatalf("a refresher was called for a kind without one")
	}
	rfWantRefresh(t, f, job.RefreshFailed, id)
	warn := f.logs.FilterMessageSnippet("refresh failed").FilterField(zap.Int64("job_id", id))
	if warn.Len() != 1 || warn.All()[0].Level.String() != "warn" ||
		!strings.Contains(warn.All()[0].ContextMap()["error"].(string), "unknown refresh kind") {
		t.Fatalf("want one warning naming the unknown kind, got %+v", warn.All())
	}
	rfNoTokenLogged(t, f)
}

func TestRefreshMissingCatalogFails(t *testing.T) {
	f := rfNew(t)
	cat := f.catalog("lake", raftfsm.RefreshNone, "")
	id := f.committed(cat, "a")
	f.restoreEditing(func(r *journal.TJobRecord) { r.CatalogID = rfPtr(int64(99)) })
	rec := &rfRefresher{}
	rfStep(t, f.driver(rec, nil))
	if len(rec.called()) != 0 {
		t.Fatalf("refresher called without a catalog")
	}
	rfWantRefresh(t, f, job.RefreshFailed, id)
}

func TestRefreshIdleStepWritesNothing(t *testing.T) {
	f := rfNew(t)
	cat := f.catalog("lake", raftfsm.RefreshNone, "")
	f.admit(cat, "db", "pending", "idx", job.Create, false)
	running := f.admit(cat, "db", "running", "idx", job.Create, false)
	f.finish(job.NativeOK, false, running)
	f.refresh(job.RefreshRunning, running) // another driver's refresh in flight
	notRequired := f.admit(cat, "db", "nr", "idx", job.Create, false)
	f.finish(job.PreInvocationCredentialExpired, false, notRequired)
	rfFailedAt(t, f, f.committed(cat, "failed"))

	rec := &rfRefresher{}
	d := f.driver(rec, nil)
	mark := f.p.count()
	for range 3 {
		rfStep(t, d)
	}
	if n := len(f.p.Since(mark)); n != 0 || len(rec.called()) != 0 {
		t.Fatalf("idle steps wrote %d entries and made %d calls", n, len(rec.called()))
	}
	rfWantRefresh(t, f, job.RefreshRunning, running)
}

func TestRefreshStepBudgetBoundsHangingRefresher(t *testing.T) {
	for _, tc := range []struct {
		name string
		rec  func(t *testing.T) *rfRefresher
	}{
		{"waits for ctx", func(*testing.T) *rfRefresher { return &rfRefresher{block: true} }},
		{"ignores ctx", func(t *testing.T) *rfRefresher {
			hang := make(chan struct{})
			t.Cleanup(func() { close(hang) })
			return &rfRefresher{hang: hang}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := rfNew(t)
			cat := f.catalog("lake", raftfsm.RefreshNone, "")
			hung, queued := f.committed(cat, "a"), f.committed(cat, "b")
			revs := f.revs(hung, queued)
			rec := tc.rec(t)
			const budget = 50 * time.Millisecond
			d := f.driver(rec, func(d *RefreshDeps) { d.StepBudget = budget; d.Concurrency = 1 })
			mark := f.p.count()
			start := time.Now()
			rfStep(t, d)
			if took := time.Since(start); took > budget+refreshGrace+2*time.Second {
				t.Fatalf("Step took %s with a budget of %s", took, budget)
			}
			if got := rec.calledIDs(); !reflect.DeepEqual(got, []int64{hung}) {
				t.Fatalf("calls %v, want only %d", got, hung)
			}
			entries := f.p.Since(mark)
			if len(entries) != 2 {
				t.Fatalf("%d entries, want 2", len(entries))
			}
			c := rfRefreshBatch(t, entries[1])
			if job.RefreshState(c.Transitions[0].ToState) != job.RefreshFailed ||
				job.RefreshState(c.Transitions[1].ToState) != job.RefreshRequired ||
				c.Transitions[1].ExpectedRev != revs[1]+1 {
				t.Fatalf("outcomes = %+v; want the hung job FAILED, the never-started one back to REQUIRED", c.Transitions)
			}
			rfWantRefresh(t, f, job.RefreshFailed, hung)
			rfWantRefresh(t, f, job.RefreshRequired, queued)
		})
	}
}

func TestRefreshProposeErrorsAreRetried(t *testing.T) {
	errFate := errors.New("fate unknown")
	// failedStep runs a first step over a committed job in which refresh
	// batch proposal n fails with errFate, applied or not; the step returns
	// that error and leaves the job RUNNING.
	failedStep := func(t *testing.T, n int, applied bool) (*rfFixture, int64, *rfRefresher, *RefreshDriver) {
		t.Helper()
		f := rfNew(t)
		cat := f.catalog("lake", raftfsm.RefreshNone, "")
		id := f.committed(cat, "a")
		refreshes := 0
		f.p.hook = func(_ *rfProposer, typ raftfsm.CommandType) (bool, error) {
			if typ == raftfsm.CmdRefreshBatch {
				if refreshes++; refreshes == n {
					return applied, errFate
				}
			}
			return true, nil
		}
		rec := &rfRefresher{}
		d := f.driver(rec, nil)
		if err := d.Step(context.Background()); !errors.Is(err, errFate) {
			t.Fatalf("Step = %v, want the proposal error", err)
		}
		rfWantRefresh(t, f, job.RefreshRunning, id)
		return f, id, rec, d
	}
	t.Run("outcome not applied", func(t *testing.T) {
		f, id, rec, d := failedStep(t, 2, false)
		mark := f.p.count()
		rfStep(t, d)
		entries := f.p.Since(mark)
		if len(entries) != 1 || len(rec.called()) != 1 {
			t.Fatalf("%d entries, %d calls; want the outcome re-proposed without a second refresh", len(entries), len(rec.called()))
		}
		rfWantTransitions(t, entries[0], job.RefreshDone, []int64{id}, []int64{f.job(id).Rev - 1})
		rfWantRefresh(t, f, job.RefreshDone, id)
	})
	t.Run("R1 applied but reported as failed", func(t *testing.T) {
		f, id, rec, d := failedStep(t, 1, true)
		rfStep(t, d) // back to REQUIRED, then R1, refresh, R2
		rfWantRefresh(t, f, job.RefreshDone, id)
		if len(rec.called()) != 1 {
			t.Fatalf("%d refresh calls, want 1", len(rec.called()))
		}
	})
}

func TestRefreshLostCASSkipsRefresher(t *testing.T) {
	f := rfNew(t)
	cat := f.catalog("lake", raftfsm.RefreshNone, "")
	taken, mine := f.committed(cat, "a"), f.committed(cat, "b")
	// Just before the driver's R1 lands, something else moves job taken.
	f.p.hook = func(p *rfProposer, typ raftfsm.CommandType) (bool, error) {
		if typ == raftfsm.CmdRefreshBatch {
			p.hook = nil
			r, _ := p.FSM.State().Job(taken)
			cmd, err := raftfsm.Encode(raftfsm.CmdRefreshBatch, &journal.TRefreshBatch{NowMs: 1,
				Transitions: []*journal.TRefreshTransition{newRefreshTransition(taken, r.Rev, job.RefreshRunning)}})
			if err != nil {
				return false, err
			}
			p.applyLocked(cmd)
		}
		return true, nil
	}
	rec := &rfRefresher{}
	rfStep(t, f.driver(rec, nil))
	if got := rec.calledIDs(); !reflect.DeepEqual(got, []int64{mine}) {
		t.Fatalf("refreshed %v, want only %d (the other lost its CAS)", got, mine)
	}
	rfWantRefresh(t, f, job.RefreshRunning, taken)
	rfWantRefresh(t, f, job.RefreshDone, mine)
}

func TestRefreshNoneRefresherResolves(t *testing.T) {
	f := rfNew(t)
	cat := f.catalog("lake", raftfsm.RefreshNone, "")
	id := f.committed(cat, "a")
	d := NewRefreshDriver(RefreshDeps{Proposer: f.p, Reader: f.fsm, Clock: f.clk.Now, Refreshers: DefaultRefreshers(nil, nil)})
	mark := f.p.count()
	rfStep(t, d)
	if n := len(f.p.Since(mark)); n != 2 {
		t.Fatalf("%d entries, want R1 and R2", n)
	}
	if r := f.job(id); r.RefreshState != job.RefreshDone || r.Unresolved() {
		t.Fatalf("refresh %s, unresolved %t", r.RefreshState, r.Unresolved())
	}
}

func TestRefreshersLookup(t *testing.T) {
	rs := DefaultRefreshers(nil, nil)
	for _, kind := range []string{"", raftfsm.RefreshNone, raftfsm.RefreshWebhook, raftfsm.RefreshMySQL} {
		if _, err := rs.Lookup(kind); err != nil {
			t.Fatalf("Lookup(%q) = %v", kind, err)
		}
	}
	if _, err := rs.Lookup("carrier-pigeon"); !errors.Is(err, ErrUnknownRefreshKind) {
		t.Fatalf("Lookup of an unknown kind = %v", err)
	}
}

func rfNoTokenLogged(t *testing.T, f *rfFixture) {
	t.Helper()
	testkit.NoSecretInLogs(t, f.logs, "t0ken")
}

type rfPanicRefresher struct{}

func (rfPanicRefresher) Refresh(context.Context, RefreshRequest) error { panic("boom") }

func TestRefreshPanickingRefresherFails(t *testing.T) {
	f := rfNew(t)
	cat := f.catalog("lake", raftfsm.RefreshNone, "")
	id := f.committed(cat, "a")
	rfStep(t, f.driver(rfPanicRefresher{}, nil))
	rfWantRefresh(t, f, job.RefreshFailed, id)
}
