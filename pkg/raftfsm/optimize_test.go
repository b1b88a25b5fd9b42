package raftfsm

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/options"
)

// optimizeJob is what a leader proposes for OPTIMIZE of db.table.
func optimizeJob(catalogID int64, db, table string) *job.Record {
	loc, err := job.DatasetLocator(testRoot, db, table)
	if err != nil {
		panic(err)
	}
	r := job.NewOptimize(catalogID, db, table, loc, "alice")
	r.AdmittedDatasetVersion = 7
	return r
}

func (h *harness) admitOptimize(catalogID int64, db, table string) int64 {
	h.t.Helper()
	resp := h.admitRecord(optimizeJob(catalogID, db, table))
	wantCode(h.t, resp, journal.TApplyCode_OK)
	return resp.GetID()
}

func wantConflict(t *testing.T, resp *journal.TApplyResponse, id int64) {
	t.Helper()
	wantCode(t, resp, journal.TApplyCode_FENCE_CONFLICT)
	if resp.GetConflictJobID() != id {
		t.Fatalf("conflict names job %d, want %d (%s)", resp.GetConflictJobID(), id, resp.GetMessage())
	}
}

func TestOptimizeFenceExcludesIndexJobsOnTheDataset(t *testing.T) {
	h := newHarness(t)
	cat := h.createCatalog("lake", testRoot)
	opt := h.admitOptimize(cat, "db", "t")
	if r := h.job(opt); r.MutationState != job.Pending || r.DisplayIndexName != "" || r.NormalizedIndexName != job.OptimizeFenceName {
		t.Fatalf("admitted OPTIMIZE: %+v", r)
	}
	before := h.st()
	resp := h.admitRecord(newJob(cat, testRoot, "db", "t", "idx", job.Create))
	wantConflict(t, resp, opt)
	if !strings.Contains(resp.GetMessage(), "OPTIMIZE") {
		t.Fatalf("message does not name the OPTIMIZE: %q", resp.GetMessage())
	}
	wantConflict(t, h.admitRecord(newJob(cat, testRoot, "db", "t", "other", job.Drop)), opt)
	wantConflict(t, h.admitRecord(optimizeJob(cat, "db", "t")), opt)
	h.unchanged(before)
	// Another dataset of the catalog, and another catalog, are not fenced.
	h.admit(cat, "db", "t2", "idx")
	h.admitOptimize(cat, "db", "t3")
	cat2 := h.createCatalog("lake2", "s3://other/root")
	wantCode(t, h.admitRecord(newJob(cat2, "s3://other/root", "db", "t", "idx", job.Create)), journal.TApplyCode_OK)
	// Quotas count an OPTIMIZE as one job.
	if n := h.st().Books().PerTable[h.job(opt).TableQuotaKey()]; n != 1 {
		t.Fatalf("per-table count = %d, want 1", n)
	}
	// Once resolved (cancelled) the dataset is free again.
	wantCode(t, h.cancel(opt), journal.TApplyCode_OK)
	h.admit(cat, "db", "t", "idx")
}

func TestOptimizeFencedByAnyUnresolvedJobOnTheDataset(t *testing.T) {
	h := newHarness(t)
	cat := h.createCatalog("lake", testRoot)
	a := h.admit(cat, "db", "t", "zzz") // the smallest id, the largest name
	b := h.admit(cat, "db", "t", "aaa")
	h.admit(cat, "db", "s", "idx") // another dataset sorting before
	before := h.st()
	resp := h.admitRecord(optimizeJob(cat, "db", "t"))
	wantConflict(t, resp, a)
	h.unchanged(before)
	// In one batch, an index job then an OPTIMIZE of its dataset: the second is fenced.
	resp = h.admitBatch(newJob(cat, testRoot, "db", "u", "idx", job.Create), optimizeJob(cat, "db", "u"))
	wantCode(t, resp, journal.TApplyCode_OK)
	if resp.Items[0].Code != journal.TApplyCode_OK || resp.Items[1].Code != journal.TApplyCode_FENCE_CONFLICT ||
		resp.Items[1].GetConflictJobID() != resp.Items[0].GetID() {
		t.Fatalf("batch items: %v", resp.Items)
	}
	wantCode(t, h.cancel(a), journal.TApplyCode_OK)
	wantConflict(t, h.admitRecord(optimizeJob(cat, "db", "t")), b)
	wantCode(t, h.cancel(b), journal.TApplyCode_OK)
	h.admitOptimize(cat, "db", "t")
}

func TestOptimizeAdmissionGuards(t *testing.T) {
	h := newHarness(t)
	cat := h.createCatalog("lake", testRoot)
	cases := map[string]func(r *job.Record){
		"index name":  func(r *job.Record) { r.DisplayIndexName = "idx" },
		"fence name":  func(r *job.Record) { r.NormalizedIndexName = "idx" },
		"column":      func(r *job.Record) { r.Column = "id" },
		"type":        func(r *job.Record) { r.IndexType = job.IndexBTree },
		"properties":  func(r *job.Record) { r.PropertiesJSON = "{}" },
		"if exists":   func(r *job.Record) { r.IfExists = true },
		"schema":      func(r *job.Record) { r.SchemaContract = "{}" },
		"index uuid":  func(r *job.Record) { r.AdmittedIndexUUID = "u" },
		"no db/table": func(r *job.Record) { r.Locator = "" },
	}
	before := h.st()
	for name, edit := range cases {
		r := optimizeJob(cat, "db", "t")
		edit(r)
		if resp := h.admitRecord(r); resp.Code != journal.TApplyCode_INVALID {
			t.Fatalf("%s: code %v (%s), want INVALID", name, resp.Code, resp.GetMessage())
		}
	}
	// An index job may not carry the dataset fence name.
	r := newJob(cat, testRoot, "db", "t", job.OptimizeFenceName, job.Create)
	wantCode(t, h.admitRecord(r), journal.TApplyCode_INVALID)
	h.unchanged(before)
}

// crashed runs the OPTIMIZE id on be and returns its RUNNING record.
func optimizeFixture(t *testing.T) (h *harness, id, be int64) {
	h = newHarness(t)
	cat := h.createCatalog("lake", testRoot)
	be = h.addBackend("be1:9060")
	return h, h.admitOptimize(cat, "db", "t"), be
}

func finishedProof(r *job.Record, p job.TerminationProof, back bool) *journal.TProof {
	pr := proofCmd(r, p)
	pr.FinishedWithoutResult_ = thrift.BoolPtr(true)
	pr.Message = thrift.StringPtr("worker killed")
	if back {
		pr.ReturnToPending = thrift.BoolPtr(true)
	}
	return pr
}

func TestOptimizeCrashReturnsToPendingThenEndsUnknown(t *testing.T) {
	h, id, be := optimizeFixture(t)
	running := h.run(id, be)
	wantItem(t, h.proof(finishedProof(running, job.ProofChildReaped, true)), journal.TApplyCode_OK)
	got := h.job(id)
	if got.MutationState != job.Pending || got.DispatchAttempts != 1 || got.HoldsPossibleLiveSlot() ||
		got.TerminationProof != job.ProofChildReaped || got.TerminationMessage != "worker killed" || h.st().HeldSlots(be) != 0 {
		t.Fatalf("after a crash with return_to_pending: %+v", got)
	}
	if !got.Unresolved() || len(h.st().PendingInIDOrder(0)) != 1 {
		t.Fatalf("the returned OPTIMIZE must be PENDING and keep its fence")
	}
	// A fresh dispatch; the slot was released by the proof only once (the
	// epoch sweep may have released it already: finished still applies).
	running = h.run(id, be)
	wantItem(t, h.proof(proofCmd(running, job.ProofProcessEpochGone)), journal.TApplyCode_OK)
	wantItem(t, h.proof(finishedProof(h.job(id), job.ProofProcessEpochGone, true)), journal.TApplyCode_OK)
	if got := h.job(id); got.MutationState != job.Pending || got.DispatchAttempts != 2 {
		t.Fatalf("second crash: %+v", got)
	}
	// Without return_to_pending (attempts used up): UNKNOWN, NO_TRUSTED_RESULT, never RESOLVING.
	running = h.run(id, be)
	wantItem(t, h.proof(finishedProof(running, job.ProofChildReaped, false)), journal.TApplyCode_OK)
	got = h.job(id)
	if got.MutationState != job.Unknown || got.Result.Code != job.NoTrustedResult || got.DispatchAttempts != 2 ||
		got.HoldsPossibleLiveSlot() || !got.Unresolved() || got.ResolveAfterMs != 0 {
		t.Fatalf("attempts used up: %+v", got)
	}
	if len(h.st().ResolvingDue(1<<62, 0)) != 0 {
		t.Fatalf("an OPTIMIZE went to RESOLVING")
	}
	if !equalBooks(h.st()) {
		t.Fatalf("books drifted")
	}
}

func TestReturnToPendingGuards(t *testing.T) {
	t.Run("not an OPTIMIZE", func(t *testing.T) {
		h, id, be := pendingFixture(t)
		running := h.run(id, be)
		before := h.st()
		wantItem(t, h.proof(finishedProof(running, job.ProofChildReaped, true)), journal.TApplyCode_INVALID)
		h.unchanged(before)
	})
	t.Run("without finished_without_result", func(t *testing.T) {
		h, id, be := optimizeFixture(t)
		running := h.run(id, be)
		p := proofCmd(running, job.ProofChildReaped)
		p.ReturnToPending = thrift.BoolPtr(true)
		before := h.st()
		wantItem(t, h.proof(p), journal.TApplyCode_INVALID)
		h.unchanged(before)
	})
	t.Run("a deadline proves nothing", func(t *testing.T) {
		h, id, be := optimizeFixture(t)
		running := h.run(id, be)
		wantItem(t, h.complete(completion(running, job.NoTrustedResult, false)), journal.TApplyCode_OK)
		unknown := h.job(id)
		if unknown.MutationState != job.Unknown || !unknown.HoldsPossibleLiveSlot() {
			t.Fatalf("deadline: %+v", unknown)
		}
		// A later proof releases the slot; UNKNOWN does not turn PENDING.
		wantItem(t, h.proof(finishedProof(unknown, job.ProofChildReaped, true)), journal.TApplyCode_OK)
		if got := h.job(id); got.MutationState != job.Unknown || got.HoldsPossibleLiveSlot() || got.DispatchAttempts != 0 {
			t.Fatalf("after the proof: %+v", got)
		}
	})
	t.Run("a stale identity", func(t *testing.T) {
		h, id, be := optimizeFixture(t)
		running := h.run(id, be)
		p := finishedProof(running, job.ProofChildReaped, true)
		p.InvocationID = "other"
		before := h.st()
		wantItem(t, h.proof(p), journal.TApplyCode_CAS_FAILED)
		h.unchanged(before)
	})
}

func optimizedList() []*journal.TOptimizedIndexRecord {
	return []*journal.TOptimizedIndexRecord{{Name: "vec",
		Before: &journal.TIndexCountsRecord{IndexUUID: thrift.StringPtr("u1"), IndexedRows: thrift.Int64Ptr(100),
			UnindexedRows: thrift.Int64Ptr(40), Segments: thrift.Int32Ptr(2)},
		After: &journal.TIndexCountsRecord{IndexUUID: thrift.StringPtr("u2"), IndexedRows: thrift.Int64Ptr(140),
			UnindexedRows: thrift.Int64Ptr(0), Segments: thrift.Int32Ptr(1)}}}
}

func TestOptimizeResultIsStoredAndSurvivesRestore(t *testing.T) {
	h, id, be := optimizeFixture(t)
	running := h.run(id, be)
	c := completion(running, job.NativeOK, false)
	c.OptimizedIndexes, c.DatasetVersion = optimizedList(), thrift.Int64Ptr(12)
	wantItem(t, h.complete(c), journal.TApplyCode_OK)
	got := h.job(id)
	if got.MutationState != job.Committed || got.ResultDatasetVersion != 12 {
		t.Fatalf("after NATIVE_OK: %+v", got)
	}
	ixs := job.DecodeOptimized(got.OptimizedIndexes)
	if len(ixs) != 1 || ixs[0].Name != "vec" || ixs[0].Before.UnindexedRows != 40 || ixs[0].After.IndexUUID != "u2" || ixs[0].After.Segments != 1 {
		t.Fatalf("optimized indexes: %+v", ixs)
	}
	// Snapshot and restore: the record and the books come back identically.
	want, books := *got, h.st().Books()
	var buf bytes.Buffer
	if err := h.st().WriteSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	g := newHarness(t)
	if err := g.f.Restore(io.NopCloser(&buf)); err != nil {
		t.Fatal(err)
	}
	if r := g.job(id); *r != want {
		t.Fatalf("restored\n got %+v\nwant %+v", r, &want)
	}
	if !equalBooksTo(g.st().Books(), books) {
		t.Fatalf("restored books differ")
	}
}

func TestOptimizeRestoreRebuildsDatasetFence(t *testing.T) {
	h := newHarness(t)
	cat := h.createCatalog("lake", testRoot)
	opt := h.admitOptimize(cat, "db", "t")
	h.admit(cat, "db", "u", "idx")
	books := h.st().Books()
	h.restoreWith(t, func(rs []*job.Record) []*job.Record { return rs })
	if !equalBooksTo(h.st().Books(), books) || !equalBooks(h.st()) {
		t.Fatalf("books differ after restore")
	}
	// The rebuilt books still fence both ways.
	wantConflict(t, h.admitRecord(newJob(cat, testRoot, "db", "t", "idx", job.Create)), opt)
	wantConflict(t, h.admitRecord(optimizeJob(cat, "db", "u")), opt+1)
}

func TestOptimizeResultBoundsRefuseTheItem(t *testing.T) {
	h, id, be := optimizeFixture(t)
	running := h.run(id, be)
	c := completion(running, job.NativeOK, false)
	for range job.MaxOptimizedIndexes + 1 {
		c.OptimizedIndexes = append(c.OptimizedIndexes, &journal.TOptimizedIndexRecord{Name: "ix"})
	}
	before := h.st()
	wantItem(t, h.complete(c), journal.TApplyCode_INVALID)
	h.unchanged(before)
}

func TestMarkOptimizeProof(t *testing.T) {
	rec := optimizeJob(1, "db", "t")
	p := &journal.TProof{FinishedWithoutResult_: thrift.BoolPtr(true), IndexUUID: thrift.StringPtr("u"), ResolveAfterMs: thrift.Int64Ptr(5)}
	if !MarkOptimizeProof(p, rec, 3) || !p.GetReturnToPending() || p.IndexUUID != nil || p.ResolveAfterMs != nil {
		t.Fatalf("attempts left: %+v", p)
	}
	rec.DispatchAttempts = 2
	if MarkOptimizeProof(p, rec, 3) || p.ReturnToPending != nil {
		t.Fatalf("attempts used up: %+v", p)
	}
	idx := newJob(1, testRoot, "db", "t", "idx", job.Create)
	p = &journal.TProof{FinishedWithoutResult_: thrift.BoolPtr(true), IndexUUID: thrift.StringPtr("u")}
	if MarkOptimizeProof(p, idx, 3) || p.ReturnToPending != nil || p.GetIndexUUID() != "u" {
		t.Fatalf("an index job's proof changed: %+v", p)
	}
}

// admit_rules 2: the mutation gate is re-checked at apply time for an
// OPTIMIZE as for any admission.
func TestOptimizeAdmissionRechecksTheGate(t *testing.T) {
	h := newHarness(t)
	cat := h.createCatalog("lake", testRoot)
	h.setOption(options.OptEnableMutation, "false")
	rules := thrift.Int32Ptr(AdmitRulesRecheck)
	wantCode(t, h.apply(CmdAdmit, &journal.TAdmitCommand{NowMs: h.now, Job: RecordToThrift(optimizeJob(cat, "db", "t")), AdmitRules: rules}),
		journal.TApplyCode_MUTATION_DISABLED)
	h.setOption(options.OptEnableMutation, "true")
	wantCode(t, h.apply(CmdAdmit, &journal.TAdmitCommand{NowMs: h.now, Job: RecordToThrift(optimizeJob(cat, "db", "t")), AdmitRules: rules}),
		journal.TApplyCode_OK)
}
