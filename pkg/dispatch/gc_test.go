package dispatch

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/options"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
	"github.com/lancemaster/lancemaster/pkg/raftfsm/raftfsmtest"
)

func rfGCCommand(t testing.TB, e raftfsmtest.Entry) *journal.TGCCommand {
	t.Helper()
	if e.Type() != raftfsm.CmdGC {
		t.Fatalf("entry type %d, want GC (%d)", e.Type(), raftfsm.CmdGC)
	}
	c := journal.NewTGCCommand()
	rfDecode(t, e.Data[1:], c)
	return c
}

func (f *rfFixture) gc() *GC {
	return NewGC(GCDeps{Proposer: f.p, Reader: f.fsm, Clock: f.clk.Now, Logger: f.logger})
}

func (f *rfFixture) cancel(id int64) {
	f.t.Helper()
	f.apply(raftfsm.CmdCancel, &journal.TCancelCommand{NowMs: f.nowMs(), JobID: id, Actor: "ops"})
}

func TestGCRemovesOnlyEligibleOldestFirst(t *testing.T) {
	f := rfNew(t)
	f.setOption(options.OptKeepMaxSecond, "100")
	cat := f.catalog("lake", raftfsm.RefreshNone, "")
	t0 := f.clk.Now()
	at := func(d time.Duration) { f.clk.Advance(t0.Add(d).Sub(f.clk.Now())) }

	cancelled := f.admit(cat, "db", "a", "idx", job.Create, false)
	released := f.admit(cat, "db", "b", "idx", job.Create, false)
	refreshed := f.admit(cat, "db", "c", "idx", job.Create, false)
	slotHeld := f.admit(cat, "db", "d", "idx", job.Create, false)
	refreshDue := f.admit(cat, "db", "e", "idx", job.Create, false)
	pending := f.admit(cat, "db", "f", "idx", job.Create, false)
	young := f.admit(cat, "db", "g", "idx", job.Create, false)
	f.finish(job.NativeIO, false, released)                    // UNKNOWN
	f.finish(job.NativeOK, false, refreshed, refreshDue)       // COMMITTED, refresh REQUIRED
	f.finish(job.PreInvocationStaleAdmission, false, slotHeld) // resolved, slot still held
	f.refresh(job.RefreshRunning, refreshed)
	f.refresh(job.RefreshDone, refreshed)

	// Last updates, out of id order: released 10 s, refreshed 20 s, cancelled 30 s.
	at(10 * time.Second)
	f.apply(raftfsm.CmdForceRelease, &journal.TForceReleaseCommand{NowMs: f.nowMs(), JobID: released,
		Actor: "ops", Note: "checked", Warning: "the old worker may still change the index"})
	at(20 * time.Second)
	f.proof(refreshed, job.ProofChildReaped)
	at(30 * time.Second)
	f.cancel(cancelled)
	at(200 * time.Second)
	f.cancel(young)

	at(250 * time.Second) // cutoff 150 s
	mark := f.p.count()
	removed, err := f.gc().RunOnce(context.Background())
	if err != nil || removed != 3 {
		t.Fatalf("RunOnce = %d, %v; want 3 removed", removed, err)
	}
	entries := f.p.Since(mark)
	if len(entries) != 1 {
		t.Fatalf("%d entries, want 1", len(entries))
	}
	c := rfGCCommand(t, entries[0])
	if want := []int64{released, refreshed, cancelled}; !reflect.DeepEqual(c.JobIds, want) {
		t.Fatalf("GC entry names %v, want %v (oldest update first)", c.JobIds, want)
	}
	if c.CutoffMs != t0.Add(150*time.Second).UnixMilli() || c.NowMs != f.nowMs() {
		t.Fatalf("cutoff %d now %d", c.CutoffMs, c.NowMs)
	}
	for _, id := range []int64{released, refreshed, cancelled} {
		if _, ok := f.st().Job(id); ok {
			t.Fatalf("job %d survived", id)
		}
	}
	for _, id := range []int64{slotHeld, refreshDue, pending, young} {
		f.job(id) // unresolved, slot-holding or young: kept
	}

	mark = f.p.count()
	if removed, err := f.gc().RunOnce(context.Background()); err != nil || removed != 0 || f.p.count() != mark {
		t.Fatalf("second pass: %d removed, %v, %d entries; want nothing", removed, err, f.p.count()-mark)
	}
}

func TestGCBatchesOf1024(t *testing.T) {
	f := rfNew(t)
	f.setOption(options.OptKeepMaxSecond, "1")
	cat := f.catalog("lake", raftfsm.RefreshNone, "")
	const n = raftfsm.MaxGCBatch + 6
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = f.admit(cat, "db", "t", "idx", job.Create, false)
		f.clk.Advance(time.Millisecond)
		f.cancel(ids[i]) // frees the fence for the next one
	}
	f.clk.Advance(time.Hour)
	mark := f.p.count()
	removed, err := f.gc().RunOnce(context.Background())
	if err != nil || removed != n {
		t.Fatalf("RunOnce = %d, %v; want %d", removed, err, n)
	}
	entries := f.p.Since(mark)
	if len(entries) != 2 {
		t.Fatalf("%d entries, want 2", len(entries))
	}
	first, second := rfGCCommand(t, entries[0]), rfGCCommand(t, entries[1])
	if !reflect.DeepEqual(first.JobIds, ids[:raftfsm.MaxGCBatch]) || !reflect.DeepEqual(second.JobIds, ids[raftfsm.MaxGCBatch:]) {
		t.Fatalf("batches of %d and %d ids, want the oldest %d first", len(first.JobIds), len(second.JobIds), raftfsm.MaxGCBatch)
	}
}

func TestGCNothingEligibleWritesNothing(t *testing.T) {
	f := rfNew(t)
	cat := f.catalog("lake", raftfsm.RefreshNone, "")
	f.cancel(f.admit(cat, "db", "a", "idx", job.Create, false))
	f.clk.Advance(6 * 24 * time.Hour) // younger than the default 7 days
	mark := f.p.count()
	if removed, err := f.gc().RunOnce(context.Background()); err != nil || removed != 0 || f.p.count() != mark {
		t.Fatalf("RunOnce = %d, %v with %d entries; want nothing", removed, err, f.p.count()-mark)
	}
}

func TestGCRunPassesAtOnceAndStopsWithCtx(t *testing.T) {
	f := rfNew(t)
	cat := f.catalog("lake", raftfsm.RefreshNone, "")
	id := f.admit(cat, "db", "a", "idx", job.Create, false)
	f.cancel(id)
	f.clk.Advance(8 * 24 * time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.gc().Run(ctx) }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, ok := f.st().Job(id); !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Run did not collect at start")
		}
		time.Sleep(time.Millisecond)
	}
	cancel() // Run now waits the clean interval (3600 s): ctx must end it
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v after ctx ended, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("Run ignored ctx")
	}
}

func TestOptionSecondsNeverOverflows(t *testing.T) {
	for in, want := range map[int64]time.Duration{-5: time.Second, 0: time.Second, 3600: time.Hour} {
		if got := optionSeconds(in); got != want {
			t.Fatalf("optionSeconds(%d) = %s, want %s", in, got, want)
		}
	}
	if got := optionSeconds(1 << 40); got <= 0 {
		t.Fatalf("optionSeconds(2^40) = %s overflowed", got)
	}
}
