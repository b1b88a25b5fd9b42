package raftfsm

import (
	"bytes"
	"testing"
	"unsafe"

	"github.com/lancemaster/lancemaster/pkg/raftfsm/ordtree"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
)

// TestFatalMidEntryChangesNothing: an entry that fails after it has already
// written (here an index found out of step with the records on the second
// item of a batch) publishes nothing, and the view it started from is intact.
func TestFatalMidEntryChangesNothing(t *testing.T) {
	h, first, be := pendingFixture(t)
	second := h.admit(1, "db", "t2", "idx")
	// Break the pending index behind the FSM's back: the second job is
	// PENDING but missing from it.
	s := h.st()
	x := s.t.jobs[ixPending].Txn(ordtree.NewOwner(), jobIndexes[ixPending].cmp)
	if _, ok := x.Delete(probeRow(h.job(second))); !ok {
		t.Fatal("job not in the pending index")
	}
	broken := *s
	broken.t.jobs[ixPending] = x.Version()
	h.f.state.Store(&broken)
	before := snapshotBytes(t, &broken)

	data, err := Encode(CmdMarkRunningBatch, &journal.TMarkRunningBatch{NowMs: h.now,
		Jobs: []*journal.TMarkRunning{markCmd(h.job(first), be), markCmd(h.job(second), be)}})
	if err != nil {
		t.Fatal(err)
	}
	resp := h.applyRaw(data).(*journal.TApplyResponse)
	if len(h.fatals) != 1 || resp.Code == journal.TApplyCode_OK {
		t.Fatalf("fatals %v, response %v", h.fatals, resp)
	}
	if h.st() != &broken {
		t.Fatalf("a fatal entry published a new view")
	}
	if r := h.job(first); r.MutationState != job.Pending || r.Rev != 0 {
		t.Fatalf("the first item's write survived: %s rev %d", r.MutationState, r.Rev)
	}
	if len(h.st().PendingInIDOrder(0)) != 1 || h.st().HeldSlots(be) != 0 {
		t.Fatalf("indexes or books changed")
	}
	if !bytes.Equal(before, snapshotBytes(t, h.st())) {
		t.Fatalf("state changed")
	}
}

// TestAdmittedJobsShareStrings: jobs admitted through Apply share the
// strings they repeat, as restored ones do, and invocation ids stay their own.
func TestAdmittedJobsShareStrings(t *testing.T) {
	h, first, be := pendingFixture(t)
	second := h.admit(1, "db", "t", "idx2")
	a, b := h.job(first), h.job(second)
	same := func(x, y string) bool { return unsafe.StringData(x) == unsafe.StringData(y) }
	for _, f := range []struct {
		name string
		x, y string
	}{
		{"creator", a.Creator, b.Creator}, {"db", a.DB, b.DB}, {"table", a.Table, b.Table},
		{"locator", a.Locator, b.Locator}, {"properties", a.PropertiesJSON, b.PropertiesJSON},
		{"schema contract", a.SchemaContract, b.SchemaContract},
	} {
		if !same(f.x, f.y) {
			t.Errorf("%s is not shared", f.name)
		}
	}
	if !same(a.DisplayIndexName, a.NormalizedIndexName) {
		t.Errorf("a lowercase index name is stored twice")
	}
	h.run(first, be)
	h.run(second, be)
	if same(h.job(first).InvocationID, h.job(second).InvocationID) {
		t.Errorf("invocation ids shared")
	}
}

// The job indexes keep their node shapes through Apply and Restore: 1 KiB
// nodes for the three that hold retained jobs, small nodes for those that
// hold live jobs only (ordtree, "Node shapes").
func TestJobIndexShapes(t *testing.T) {
	h, id, be := pendingFixture(t)
	h.run(id, be)
	for i := range 3 {
		h.admit(h.job(id).CatalogID, "db", "t"+itoa(int64(i)), "idx")
	}
	check := func(when string) {
		t.Helper()
		for i, spec := range jobIndexes {
			tr := h.st().t.jobs[i]
			want := ordtree.SmallCap
			if spec.packed {
				want = ordtree.NodeCap
			}
			if tr.Len() > 0 && tr.Shape() != want {
				t.Errorf("%s: job index %d has nodes of %d entries, want %d", when, i, tr.Shape(), want)
			}
		}
	}
	check("after Apply")
	h.restoreWith(t, func(rs []*job.Record) []*job.Record { return rs })
	check("after Restore")
}
