package dispatch

import (
	"context"
	"strconv"
	"testing"

	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/options"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

func TestDowngradeRefreshRunningOnNewLeader(t *testing.T) {
	f := rfNew(t)
	cat := f.catalog("lake", raftfsm.RefreshNone, "")
	a, b, c := f.committed(cat, "a"), f.committed(cat, "b"), f.committed(cat, "c")
	f.refresh(job.RefreshRunning, a, c) // a deposed leader's refreshes in flight
	revs := f.revs(a, c)
	bRev := f.job(b).Rev

	mark := f.p.count()
	if err := DowngradeRefreshRunning(context.Background(), f.p, f.fsm, f.clk.Now); err != nil {
		t.Fatalf("DowngradeRefreshRunning: %v", err)
	}
	entries := f.p.Since(mark)
	if len(entries) != 1 {
		t.Fatalf("%d entries, want 1", len(entries))
	}
	rfWantTransitions(t, entries[0], job.RefreshRequired, []int64{a, c}, revs)
	rfWantRefresh(t, f, job.RefreshRequired, a, b, c)
	if f.job(b).Rev != bRev {
		t.Fatalf("a REQUIRED job was touched")
	}

	// The next leader's driver refreshes them at once (REQUIRED is never delayed).
	rec := &rfRefresher{}
	rfStep(t, f.driver(rec, nil))
	rfWantRefresh(t, f, job.RefreshDone, a, b, c)

	mark = f.p.count()
	if err := DowngradeRefreshRunning(context.Background(), f.p, f.fsm, f.clk.Now); err != nil || f.p.count() != mark {
		t.Fatalf("nothing RUNNING: err %v, %d entries; want none", err, f.p.count()-mark)
	}
}

func TestDowngradeRefreshRunningBatchesOf1024(t *testing.T) {
	f := rfNew(t)
	for _, k := range []string{options.OptMaxUnresolvedPerTable, options.OptMaxUnresolvedPerCatalog, options.OptMaxUnresolvedGlobal} {
		f.setOption(k, "2000")
	}
	cat := f.catalog("lake", raftfsm.RefreshNone, "")
	const n = maxRefreshBatch + 1
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = f.admit(cat, "db", "t", "idx"+strconv.Itoa(i), job.Create, false)
	}
	f.finish(job.NativeOK, false, ids...)
	f.refresh(job.RefreshRunning, ids...)

	mark := f.p.count()
	if err := DowngradeRefreshRunning(context.Background(), f.p, f.fsm, f.clk.Now); err != nil {
		t.Fatalf("DowngradeRefreshRunning: %v", err)
	}
	entries := f.p.Since(mark)
	if len(entries) != 2 || len(rfRefreshBatch(t, entries[0]).Transitions) != maxRefreshBatch ||
		len(rfRefreshBatch(t, entries[1]).Transitions) != 1 {
		t.Fatalf("%d entries; want one of %d transitions and one of 1", len(entries), maxRefreshBatch)
	}
	if left := f.st().RefreshRunning(); len(left) != 0 {
		t.Fatalf("%d jobs still refresh RUNNING", len(left))
	}
}

// The first leader names the Raft history once; later leaders keep it.
func TestEnsureClusterID(t *testing.T) {
	f := rfNew(t)
	if err := EnsureClusterID(context.Background(), f.p, f.fsm, f.clk.Now); err != nil {
		t.Fatal(err)
	}
	id := f.fsm.State().ClusterID()
	if len(id) != len("lm-")+32 {
		t.Fatalf("cluster id %q", id)
	}
	mark := f.p.count()
	if err := EnsureClusterID(context.Background(), f.p, f.fsm, f.clk.Now); err != nil || f.p.count() != mark {
		t.Fatalf("a second leader journaled again: err %v, %d entries", err, f.p.count()-mark)
	}
	if f.fsm.State().ClusterID() != id {
		t.Fatalf("the cluster id changed")
	}
}
