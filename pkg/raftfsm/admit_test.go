package raftfsm

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/options"
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
	want.AdmitIndex = h.index // the admission entry's; no timeline yet
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
		{"per table", options.OptMaxUnresolvedPerTable, func(h *harness, cat, _ int64, i int) *journal.TApplyResponse {
			return h.admitRecord(newJob(cat, testRoot, "db", "t", "idx"+itoa(int64(i)), job.Create))
		}},
		{"per catalog", options.OptMaxUnresolvedPerCatalog, func(h *harness, cat, _ int64, i int) *journal.TApplyResponse {
			return h.admitRecord(newJob(cat, testRoot, "db", "t"+itoa(int64(i)), "idx", job.Create))
		}},
		{"global", options.OptMaxUnresolvedGlobal, func(h *harness, cat, cat2 int64, i int) *journal.TApplyResponse {
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

// ---- CmdAdmitBatch --------------------------------------------------------------

// wantAdmitItem checks one item of an admit batch.
func wantAdmitItem(t *testing.T, it *journal.TItemResult_, code journal.TApplyCode, id, conflict int64) {
	t.Helper()
	if it.Code != code || it.GetID() != id || it.JobID != id || it.GetConflictJobID() != conflict {
		t.Fatalf("item = %v id %d job %d conflict %d (%q); want %v id %d conflict %d",
			it.Code, it.GetID(), it.JobID, it.GetConflictJobID(), it.GetMessage(), code, id, conflict)
	}
	if (code == journal.TApplyCode_OK) != it.IsSetID() || (conflict != 0) != it.IsSetConflictJobID() {
		t.Fatalf("item %v: id set %v, conflict set %v", it.Code, it.IsSetID(), it.IsSetConflictJobID())
	}
}

// One entry, several admissions: ids in order, a fence taken by an earlier
// item of the same batch refuses a later one, a bad item refuses only itself.
func TestAdmitBatchIsPerItemInOrder(t *testing.T) {
	h := newHarness(t)
	cat := h.createCatalog("lake", testRoot)
	held := h.admit(cat, "db", "held", "idx") // job 1, fences db.held idx
	unknownCat := newJob(cat, testRoot, "db", "t3", "idx", job.Create)
	unknownCat.CatalogID = 77
	h.now = 2_000_000
	resp := h.admitBatch(
		newJob(cat, testRoot, "db", "t", "idx", job.Create),  // 2
		newJob(cat, testRoot, "db", "t", "IDX", job.Replace), // same fence as 2, in this batch
		newJob(cat, testRoot, "db", "held", "Idx", job.Drop), // fenced by job 1, from the log
		unknownCat, // NOT_FOUND
		newJob(cat, testRoot, "db", "t2", "idx", job.Create),     // 3
		newJob(cat, testRoot, "db", "t", "other", job.Create),    // 4: another name on t
		newJob(cat, testRoot, "db", "t2", "idx", job.Drop),       // same fence as 3
		newJob(cat, "s3://elsewhere", "db", "t5", "i", job.Drop), // locator outside the root
	)
	wantCode(t, resp, journal.TApplyCode_OK)
	if len(resp.Items) != 8 {
		t.Fatalf("%d items for 8 jobs", len(resp.Items))
	}
	wantAdmitItem(t, resp.Items[0], journal.TApplyCode_OK, 2, 0)
	wantAdmitItem(t, resp.Items[1], journal.TApplyCode_FENCE_CONFLICT, 0, 2)
	wantAdmitItem(t, resp.Items[2], journal.TApplyCode_FENCE_CONFLICT, 0, held)
	wantAdmitItem(t, resp.Items[3], journal.TApplyCode_NOT_FOUND, 0, 0)
	wantAdmitItem(t, resp.Items[4], journal.TApplyCode_OK, 3, 0)
	wantAdmitItem(t, resp.Items[5], journal.TApplyCode_OK, 4, 0)
	wantAdmitItem(t, resp.Items[6], journal.TApplyCode_FENCE_CONFLICT, 0, 3)
	wantAdmitItem(t, resp.Items[7], journal.TApplyCode_CAS_FAILED, 0, 0)
	if m := resp.Items[1].GetMessage(); !strings.Contains(m, `"IDX"`) || !strings.Contains(m, "job 2") || strings.Contains(m, "s3://") {
		t.Fatalf("conflict message %q", m)
	}
	for _, it := range resp.Items {
		if strings.Contains(it.GetMessage(), "s3://") {
			t.Fatalf("message shows a locator: %q", it.GetMessage())
		}
	}
	if h.st().LastJobID() != 4 || h.st().m.jobs != 4 {
		t.Fatalf("last id %d, %d jobs; want 4, 4", h.st().LastJobID(), h.st().m.jobs)
	}
	for id, table := range map[int64]string{2: "t", 3: "t2", 4: "t"} {
		r := h.job(id)
		if r.Table != table || r.CreateTimeMs != 2_000_000 || r.MutationState != job.Pending || r.Rev != 0 {
			t.Fatalf("job %d: %+v", id, r)
		}
	}
	if !equalBooks(h.st()) {
		t.Fatal("books drifted")
	}
}

// Quotas count the items admitted before them in the same batch.
func TestAdmitBatchQuotaExhaustedMidBatch(t *testing.T) {
	for _, c := range []struct {
		key   string
		table func(i int) string
	}{
		{options.OptMaxUnresolvedPerTable, func(int) string { return "t" }},
		{options.OptMaxUnresolvedPerCatalog, func(i int) string { return "t" + itoa(int64(i)) }},
		{options.OptMaxUnresolvedGlobal, func(i int) string { return "t" + itoa(int64(i)) }},
	} {
		t.Run(c.key, func(t *testing.T) {
			h := newHarness(t)
			cat := h.createCatalog("lake", testRoot)
			h.setOption(c.key, "3")
			h.admit(cat, "db", c.table(0), "first") // job 1: one of the three
			var rs []*job.Record
			for i := 1; i <= 4; i++ {
				rs = append(rs, newJob(cat, testRoot, "db", c.table(i), "idx"+itoa(int64(i)), job.Create))
			}
			resp := h.admitBatch(rs...)
			wantAdmitItem(t, resp.Items[0], journal.TApplyCode_OK, 2, 0)
			wantAdmitItem(t, resp.Items[1], journal.TApplyCode_OK, 3, 0)
			wantAdmitItem(t, resp.Items[2], journal.TApplyCode_QUOTA_EXCEEDED, 0, 0)
			wantAdmitItem(t, resp.Items[3], journal.TApplyCode_QUOTA_EXCEEDED, 0, 0)
			if m := resp.Items[2].GetMessage(); !strings.Contains(m, c.key) || !strings.Contains(m, "already has 3 unresolved") {
				t.Fatalf("message %q", m)
			}
			if h.st().LastJobID() != 3 || !equalBooks(h.st()) {
				t.Fatalf("last id %d; books equal %v", h.st().LastJobID(), equalBooks(h.st()))
			}
		})
	}
}

func TestAdmitBatchBlockedByCorruptRecord(t *testing.T) {
	h := newHarness(t)
	cat := h.createCatalog("lake", testRoot)
	h.admit(cat, "db", "t", "idx")
	h.restoreWith(t, func(recs []*job.Record) []*job.Record {
		bad := recs[0].Clone()
		bad.JobID, bad.CatalogID, bad.MutationState = 2, 0, job.Unknown
		return append(recs, bad)
	})
	before := h.st()
	resp := h.admitBatch(newJob(cat, testRoot, "db", "a", "idx", job.Create), newJob(cat, testRoot, "db", "b", "idx", job.Create))
	for _, it := range resp.Items {
		wantAdmitItem(t, it, journal.TApplyCode_ADMISSION_BLOCKED, 0, 0)
	}
	h.unchanged(before)
}

// A batch whose every item is refused, and an empty batch, change nothing.
func TestAdmitBatchRefusedChangesNothing(t *testing.T) {
	h := newHarness(t)
	cat := h.createCatalog("lake", testRoot)
	h.admit(cat, "db", "t", "idx")
	before := h.st()
	bad := newJob(cat, testRoot, "db", "t2", "idx", job.Create)
	bad.Column = ""
	resp := h.admitBatch(newJob(cat, testRoot, "db", "t", "IDX", job.Create), bad)
	wantAdmitItem(t, resp.Items[0], journal.TApplyCode_FENCE_CONFLICT, 0, 1)
	wantAdmitItem(t, resp.Items[1], journal.TApplyCode_INVALID, 0, 0)
	h.unchanged(before)
	resp = h.admitBatch()
	if wantCode(t, resp, journal.TApplyCode_OK); resp.Items == nil || len(resp.Items) != 0 {
		t.Fatalf("empty batch items %v", resp.Items)
	}
	h.unchanged(before)
}

// The batch is exactly its items applied one CmdAdmit at a time: a walk's
// log replayed with every CmdAdmitBatch entry split into CmdAdmit entries
// (same clock) answers every item the same and reaches byte-identical state
// and books after every batch.
func TestAdmitBatchEqualsSingleAdmits(t *testing.T) {
	for _, seed := range []uint64{4, 5, 6} {
		h := walked(t, seed, 600)
		batched, single := newHarness(t), newHarness(t)
		batches := 0
		for i, entry := range h.log {
			resp := batched.applyRaw(entry).(*journal.TApplyResponse)
			// Both journal the same indexes (the timeline records them):
			// a batch's items all at its entry's index.
			single.index = batched.index - 1
			if CommandType(entry[0]) != CmdAdmitBatch {
				single.applyRaw(entry)
				continue
			}
			batches++
			c := journal.NewTAdmitBatch()
			if err := decodeCompact(entry[1:], c); err != nil {
				t.Fatal(err)
			}
			if len(resp.Items) != len(c.Jobs) {
				t.Fatalf("entry %d: %d items for %d jobs", i, len(resp.Items), len(c.Jobs))
			}
			for k, tj := range c.Jobs {
				single.index = batched.index - 1
				one := single.apply(CmdAdmit, &journal.TAdmitCommand{NowMs: c.NowMs, Job: tj})
				it := resp.Items[k]
				if it.Code != one.Code || it.GetMessage() != one.GetMessage() || it.GetID() != one.GetID() ||
					it.IsSetID() != one.IsSetID() || it.GetConflictJobID() != one.GetConflictJobID() ||
					it.IsSetConflictJobID() != one.IsSetConflictJobID() {
					t.Fatalf("seed %d entry %d item %d: batch %v %q id %d conflict %d; single %v %q id %d conflict %d", seed, i, k,
						it.Code, it.GetMessage(), it.GetID(), it.GetConflictJobID(), one.Code, one.GetMessage(), one.GetID(), one.GetConflictJobID())
				}
			}
			if !bytes.Equal(snapshotBytes(t, batched.st()), snapshotBytes(t, single.st())) {
				t.Fatalf("seed %d entry %d: state differs from single admissions", seed, i)
			}
			if !reflect.DeepEqual(batched.st().Books(), single.st().Books()) {
				t.Fatalf("seed %d entry %d: books differ from single admissions", seed, i)
			}
		}
		if batches < 20 {
			t.Fatalf("seed %d: only %d batches in the walk", seed, batches)
		}
		if len(batched.fatals)+len(single.fatals) > 0 {
			t.Fatalf("fatal: %v %v", batched.fatals, single.fatals)
		}
	}
}
