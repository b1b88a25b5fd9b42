package raftfsm

import (
	"strings"
	"testing"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/config"
	"github.com/lancemaster/lancemaster/pkg/job"
)

func TestAdmitAllocatesAndOwnsFields(t *testing.T) {
	h := newHarness(t)
	cat := h.createCatalog("lake", testRoot)
	r := newJob(cat, testRoot, "db", "t", "Idx_A", job.Create)
	// Fields the FSM owns: whatever the proposer sends is overwritten.
	r.JobID, r.Rev, r.MutationState, r.RefreshState = 99, 5, job.Committed, job.RefreshDone
	r.InvocationSecret, r.PossibleLiveOwned, r.ForceReleased, r.BackendID = "x", true, true, 3
	r.Result = job.Result{Code: job.NativeOK}
	h.now = 1234
	resp := h.admitRecord(r)
	wantCode(t, resp, journal.TApplyCode_OK)
	if resp.GetID() != 1 {
		t.Fatalf("id = %d, want 1", resp.GetID())
	}
	got := h.job(1)
	want := newJob(cat, testRoot, "db", "t", "Idx_A", job.Create)
	want.JobID, want.CreateTimeMs, want.UpdateTimeMs = 1, 1234, 1234
	want.MutationState, want.RefreshState, want.TerminationProof = job.Pending, job.RefreshNotRequired, job.ProofNone
	if *got != *want {
		t.Fatalf("admitted record\n got %+v\nwant %+v", got, want)
	}
	if id := h.admit(cat, "db", "t", "other"); id != 2 {
		t.Fatalf("second id = %d, want 2", id)
	}
	if ids := h.st().UnresolvedForFence(got.Fence()); len(ids) != 1 || ids[0] != 1 {
		t.Fatalf("fence = %v", ids)
	}
}

func TestAdmitGuards(t *testing.T) {
	long := strings.Repeat("x", job.MaxNameBytes+1)
	cases := []struct {
		name   string
		mutate func(r *job.Record)
		code   journal.TApplyCode
	}{
		{"creator too long", func(r *job.Record) { r.Creator = long }, journal.TApplyCode_INVALID},
		{"index name too long", func(r *job.Record) { r.DisplayIndexName, r.NormalizedIndexName = long, long }, journal.TApplyCode_INVALID},
		{"properties too long", func(r *job.Record) { r.PropertiesJSON = strings.Repeat("x", job.MaxPropertiesBytes+1) }, journal.TApplyCode_INVALID},
		{"invalid utf-8", func(r *job.Record) { r.DB = "\xff" }, journal.TApplyCode_INVALID},
		{"bad mutation type", func(r *job.Record) { r.MutationType = 9 }, journal.TApplyCode_INVALID},
		{"create without column", func(r *job.Record) { r.Column = "" }, journal.TApplyCode_INVALID},
		{"no catalog id", func(r *job.Record) { r.CatalogID = 0 }, journal.TApplyCode_INVALID},
		{"no locator", func(r *job.Record) { r.Locator = "" }, journal.TApplyCode_INVALID},
		{"no provider", func(r *job.Record) { r.Provider = "" }, journal.TApplyCode_INVALID},
		{"no index name", func(r *job.Record) { r.DisplayIndexName, r.NormalizedIndexName = "", "" }, journal.TApplyCode_INVALID},
		{"normalized name mismatch", func(r *job.Record) { r.NormalizedIndexName = "other" }, journal.TApplyCode_INVALID},
		{"unknown catalog", func(r *job.Record) { r.CatalogID = 77 }, journal.TApplyCode_NOT_FOUND},
		{"provider mismatch", func(r *job.Record) { r.Provider = "S3TABLES" }, journal.TApplyCode_INVALID},
		{"locator outside catalog root", func(r *job.Record) { r.Locator = "s3://elsewhere/db/t.lance" }, journal.TApplyCode_CAS_FAILED},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			cat := h.createCatalog("lake", testRoot)
			r := newJob(cat, testRoot, "db", "t", "idx", job.Create)
			c.mutate(r)
			before := h.st()
			resp := h.admitRecord(r)
			wantCode(t, resp, c.code)
			if strings.Contains(resp.GetMessage(), "s3://") {
				t.Fatalf("message shows a locator: %q", resp.GetMessage())
			}
			h.unchanged(before)
			if h.st().LastJobID() != 0 {
				t.Fatalf("a rejected admission allocated an id")
			}
		})
	}
}

func TestAdmitDropNeedsNoDefinition(t *testing.T) {
	h := newHarness(t)
	cat := h.createCatalog("lake", testRoot)
	wantCode(t, h.admitRecord(newJob(cat, testRoot, "db", "t", "idx", job.Drop)), journal.TApplyCode_OK)
}

func TestAdmitFenceConflictNamesSmallestID(t *testing.T) {
	h := newHarness(t)
	cat := h.createCatalog("lake", testRoot)
	first := h.admit(cat, "db", "t", "idx")
	// A hand-made state with two holders of one fence (an older journal):
	// the conflict must name the smallest.
	h.restoreWith(t, func(recs []*job.Record) []*job.Record {
		dup := recs[0].Clone()
		dup.JobID = 50
		return append(recs, dup)
	})
	before := h.st()
	resp := h.admitRecord(newJob(cat, testRoot, "db", "t", "IDX", job.Replace))
	wantCode(t, resp, journal.TApplyCode_FENCE_CONFLICT)
	if resp.GetConflictJobID() != first {
		t.Fatalf("conflict job = %d, want %d", resp.GetConflictJobID(), first)
	}
	if !strings.Contains(resp.GetMessage(), "IDX") || strings.Contains(resp.GetMessage(), "s3://") {
		t.Fatalf("message %q must name the index and never the locator", resp.GetMessage())
	}
	h.unchanged(before)
	// Another table, or another name, is not fenced.
	h.admit(cat, "db", "t2", "idx")
	h.admit(cat, "db", "t", "idx2")
}

func TestAdmitFenceFreedByResolution(t *testing.T) {
	h := newHarness(t)
	cat := h.createCatalog("lake", testRoot)
	id := h.admit(cat, "db", "t", "idx")
	wantCode(t, h.cancel(id), journal.TApplyCode_OK)
	h.admit(cat, "db", "t", "idx")
}

func TestAdmitQuotas(t *testing.T) {
	cases := []struct {
		name  string
		key   string
		admit func(h *harness, cat, cat2 int64, i int) *journal.TApplyResponse
	}{
		{"per table", config.OptMaxUnresolvedPerTable, func(h *harness, cat, _ int64, i int) *journal.TApplyResponse {
			return h.admitRecord(newJob(cat, testRoot, "db", "t", "idx"+itoa(int64(i)), job.Create))
		}},
		{"per catalog", config.OptMaxUnresolvedPerCatalog, func(h *harness, cat, _ int64, i int) *journal.TApplyResponse {
			return h.admitRecord(newJob(cat, testRoot, "db", "t"+itoa(int64(i)), "idx", job.Create))
		}},
		{"global", config.OptMaxUnresolvedGlobal, func(h *harness, cat, cat2 int64, i int) *journal.TApplyResponse {
			c := []int64{cat, cat2}[i%2]
			return h.admitRecord(newJob(c, testRoot, "db", "t"+itoa(int64(i)), "idx", job.Create))
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			cat := h.createCatalog("lake", testRoot)
			cat2 := h.createCatalog("lake2", testRoot)
			h.setOption(c.key, "3")
			for i := 0; i < 3; i++ {
				wantCode(t, c.admit(h, cat, cat2, i), journal.TApplyCode_OK)
			}
			before := h.st()
			resp := c.admit(h, cat, cat2, 3)
			wantCode(t, resp, journal.TApplyCode_QUOTA_EXCEEDED)
			if !strings.Contains(resp.GetMessage(), c.key) {
				t.Fatalf("message %q does not name %s", resp.GetMessage(), c.key)
			}
			h.unchanged(before)
			// Resolving one frees room.
			wantCode(t, h.cancel(1), journal.TApplyCode_OK)
			wantCode(t, c.admit(h, cat, cat2, 4), journal.TApplyCode_OK)
		})
	}
}

func TestAdmitBlockedByCorruptRecord(t *testing.T) {
	h := newHarness(t)
	cat := h.createCatalog("lake", testRoot)
	h.admit(cat, "db", "t", "idx")
	// An UNKNOWN record that lost its catalog id (restored from a damaged
	// snapshot) holds nothing it can be charged for: it must block admission.
	h.restoreWith(t, func(recs []*job.Record) []*job.Record {
		bad := recs[0].Clone()
		bad.JobID, bad.CatalogID, bad.MutationState = 2, 0, job.Unknown
		return append(recs, bad)
	})
	if h.st().CorruptUnresolved() != 1 {
		t.Fatalf("corrupt = %d, want 1", h.st().CorruptUnresolved())
	}
	before := h.st()
	wantCode(t, h.admitRecord(newJob(cat, testRoot, "db", "other", "idx", job.Create)), journal.TApplyCode_ADMISSION_BLOCKED)
	h.unchanged(before)
	wantCode(t, h.forceRelease(2, "lost its catalog"), journal.TApplyCode_OK)
	if h.st().CorruptUnresolved() != 0 {
		t.Fatalf("corrupt = %d after force-release", h.st().CorruptUnresolved())
	}
	wantCode(t, h.admitRecord(newJob(cat, testRoot, "db", "other", "idx", job.Create)), journal.TApplyCode_OK)
}
