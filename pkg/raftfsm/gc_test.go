package raftfsm

import (
	"testing"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
)

func gcCmd(cutoff int64, ids ...int64) *journal.TGCCommand {
	return &journal.TGCCommand{NowMs: cutoff + 1, CutoffMs: cutoff, JobIds: ids}
}

func TestGC(t *testing.T) {
	h := newHarness(t)
	cat := h.createCatalog("lake", testRoot)
	be := h.addBackend("be1:9060")
	h.now = 100
	cancelled := h.admit(cat, "db", "a", "idx")
	wantCode(t, h.cancel(cancelled), journal.TApplyCode_OK)
	pending := h.admit(cat, "db", "b", "idx")
	// NOT_COMMITTED with nothing to refresh but the slot still held.
	slot := h.admit(cat, "db", "c", "idx")
	wantItem(t, h.complete(completion(h.run(slot, be), job.PreInvocationStaleAdmission, false)), journal.TApplyCode_OK)
	h.now = 200
	young := h.admit(cat, "db", "d", "idx")
	wantCode(t, h.cancel(young), journal.TApplyCode_OK)

	if got := h.st().GCEligible(150, 0); len(got) != 1 || got[0] != cancelled {
		t.Fatalf("eligible = %v", got)
	}
	resp := h.apply(CmdGC, gcCmd(150, cancelled, pending, slot, young, 99))
	want := []journal.TApplyCode{journal.TApplyCode_OK, journal.TApplyCode_CAS_FAILED, journal.TApplyCode_CAS_FAILED,
		journal.TApplyCode_CAS_FAILED, journal.TApplyCode_NOT_FOUND}
	for i, w := range want {
		if resp.Items[i].Code != w {
			t.Fatalf("item %d = %v (%s), want %v", i, resp.Items[i].Code, resp.Items[i].GetMessage(), w)
		}
	}
	if _, ok := h.st().Job(cancelled); ok {
		t.Fatalf("collected job still present")
	}
	for _, id := range []int64{pending, slot, young} {
		h.job(id)
	}
	if !equalBooks(h.st()) {
		t.Fatalf("books drifted")
	}
}

// The cutoff is exclusive, as GCEligible's: a job last updated at the
// cutoff is not collected; one tick later it is.
func TestGCCutoffIsExclusive(t *testing.T) {
	h := newHarness(t)
	cat := h.createCatalog("lake", testRoot)
	id := h.admit(cat, "db", "a", "idx")
	wantCode(t, h.cancel(id), journal.TApplyCode_OK)
	at := h.job(id).UpdateTimeMs
	if got := h.st().GCEligible(at, 0); len(got) != 0 {
		t.Fatalf("eligible at its own update time: %v", got)
	}
	before := h.st()
	wantItem(t, h.apply(CmdGC, gcCmd(at, id)), journal.TApplyCode_CAS_FAILED)
	h.unchanged(before)
	wantItem(t, h.apply(CmdGC, gcCmd(at+1, id)), journal.TApplyCode_OK)
	if _, ok := h.st().Job(id); ok {
		t.Fatalf("job %d still present after GC past its update time", id)
	}
}

func TestGCGuardsLeaveStateAlone(t *testing.T) {
	h := newHarness(t)
	cat := h.createCatalog("lake", testRoot)
	id := h.admit(cat, "db", "a", "idx")
	before := h.st()
	wantItem(t, h.apply(CmdGC, gcCmd(h.now+10, id)), journal.TApplyCode_CAS_FAILED)
	h.unchanged(before)
	ids := make([]int64, MaxGCBatch+1)
	wantCode(t, h.apply(CmdGC, gcCmd(h.now+10, ids...)), journal.TApplyCode_INVALID)
	h.unchanged(before)
}

func TestGCEligibleOldestFirst(t *testing.T) {
	h := newHarness(t)
	cat := h.createCatalog("lake", testRoot)
	var ids []int64
	for i := 0; i < 5; i++ {
		ids = append(ids, h.admit(cat, "db", "t"+itoa(int64(i)), "idx"))
	}
	// Cancel in reverse id order: update time, not id, orders GC.
	for i := len(ids) - 1; i >= 0; i-- {
		h.now += 10
		wantCode(t, h.cancel(ids[i]), journal.TApplyCode_OK)
	}
	got := h.st().GCEligible(h.now+1, 3)
	if len(got) != 3 || got[0] != ids[4] || got[1] != ids[3] || got[2] != ids[2] {
		t.Fatalf("order = %v", got)
	}
	if n := len(h.st().GCEligible(h.now-15, 0)); n != 3 {
		t.Fatalf("cutoff: %d eligible, want 3", n)
	}
}

func jobIDs(rs []*job.Record) []int64 {
	out := make([]int64, len(rs))
	for i, r := range rs {
		out[i] = r.JobID
	}
	return out
}
