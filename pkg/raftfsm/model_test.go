package raftfsm

import (
	"cmp"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/options"
)

// A seeded random walk over every command, valid and stale, checked against
// brute force: the books must equal a recomputation from the records, and
// every index query must equal a filter over all records.

type walker struct {
	h   *harness
	rng *rand.Rand
	// batchedOK counts admissions that passed inside a batch behind another
	// item of the same batch: proof the walk exercises the group commit.
	batchedOK int
}

func newWalker(t testing.TB, seed uint64) *walker {
	w := &walker{h: newHarness(t), rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	w.h.createCatalog("lake", testRoot)
	w.h.createCatalog("sea", "/data/sea")
	w.h.addBackend("be1:9060")
	w.h.addBackend("be2:9060")
	return w
}

func runningOptimizes(s *State) []*job.Record {
	var out []*job.Record
	for _, r := range s.RunningByDeadline(math.MaxInt64, 0) {
		if r.IsOptimize() {
			out = append(out, r)
		}
	}
	return out
}

func (w *walker) pick(rs []*job.Record) *job.Record {
	if len(rs) == 0 || w.rng.IntN(10) == 0 {
		all, _ := w.h.st().ListJobs(JobFilter{}, 0, 0)
		if len(all) == 0 {
			return &job.Record{JobID: 1 + w.rng.Int64N(5)}
		}
		rs = all
	}
	return rs[w.rng.IntN(len(rs))]
}

// stale returns v, or with probability 1/8 a wrong value.
func (w *walker) stale(v int64) int64 {
	if w.rng.IntN(8) == 0 {
		return v + 1
	}
	return v
}

func (w *walker) step() {
	h, s, rng := w.h, w.h.st(), w.rng
	h.now += rng.Int64N(50)
	switch rng.IntN(14) {
	case 0, 1, 2: // M0, alone or a group commit of several (same fences often)
		cat := s.Catalogs()
		if len(cat) == 0 {
			return
		}
		n := 1
		if rng.IntN(3) == 0 {
			n = 2 + rng.IntN(4)
		}
		rs := make([]*job.Record, n)
		for i := range rs {
			c := cat[rng.IntN(len(cat))]
			name := []string{"idx", "IDX", "vec", "b"}[rng.IntN(4)]
			table := "t" + itoa(rng.Int64N(4))
			rs[i] = newJob(c.ID, c.RootURI, "db", table, name, job.MutationType(1+rng.IntN(3)))
			if rng.IntN(4) == 0 { // an OPTIMIZE (t4 has no index jobs): the dataset fence
				table = "t" + itoa(rng.Int64N(5))
				loc, _ := job.DatasetLocator(c.RootURI, "db", table)
				rs[i] = job.NewOptimize(c.ID, "db", table, loc, "alice")
			}
			if rng.IntN(20) == 0 {
				rs[i].CatalogID = 9
			}
		}
		if n == 1 {
			h.admitRecord(rs[0])
		} else {
			for i, it := range h.admitBatch(rs...).Items {
				if i > 0 && it.Code == journal.TApplyCode_OK {
					w.batchedOK++
				}
			}
		}
	case 3, 4: // M1
		r := w.pick(s.PendingInIDOrder(0))
		m := markCmd(r, 1+rng.Int64N(3))
		m.ExpectedRev = w.stale(r.Rev)
		m.ProcessEpoch = 41 + rng.Int64N(3) // backends restart: jobs at several epochs
		h.markRunning(m)
	case 5, 6: // M2 / M2'
		r := w.pick(s.RunningByDeadline(math.MaxInt64, 0))
		c := completion(r, []job.ResultCode{1, 4, 5, 6, 7, 8, 12, 100}[rng.IntN(8)], rng.IntN(2) == 0)
		c.DispatchRevision = w.stale(c.DispatchRevision)
		c.NeverEnqueued = thrift.BoolPtr(rng.IntN(4) == 0)
		if rng.IntN(3) == 0 {
			// A report: P (sometimes) then M2 in one item.
			c.NeverEnqueued = nil
			it := &journal.TReportItem{Completion: c}
			if rng.IntN(2) == 0 {
				it.Proof = proofCmd(r, job.TerminationProof(2+rng.IntN(4)))
				it.Proof.ProcessEpoch = w.stale(it.Proof.ProcessEpoch)
			}
			h.report(it)
			return
		}
		h.complete(c)
	case 7: // P
		r := w.pick(s.SlotHolders(1 + rng.Int64N(2)))
		finished := rng.IntN(3) == 0
		if rng.IntN(2) == 0 { // a RUNNING OPTIMIZE, its slot held or not
			r, finished = w.pick(runningOptimizes(s)), rng.IntN(4) != 0
		}
		p := proofCmd(r, job.TerminationProof(2+rng.IntN(4)))
		p.ProcessEpoch = w.stale(p.ProcessEpoch)
		if finished { // the worker ended without a result (an OPTIMIZE may go back to PENDING)
			p.Proof = journal.TTerminationProof(2 + rng.IntN(3)) // not NOT_ENQUEUED
			p.FinishedWithoutResult_ = thrift.BoolPtr(true)
			p.ReturnToPending = thrift.BoolPtr(rng.IntN(2) == 0)
		}
		if rng.IntN(3) == 0 {
			h.report(&journal.TReportItem{Proof: p})
			return
		}
		h.proof(p)
	case 8, 9: // R1-R4
		r := w.pick(append(s.RefreshDue(0), s.RefreshRunning()...))
		h.refresh(r.JobID, w.stale(r.Rev), job.RefreshState(2+rng.IntN(4)))
	case 10: // operator
		if rng.IntN(2) == 0 {
			h.cancel(w.pick(s.PendingInIDOrder(0)).JobID)
		} else {
			unknown, _ := s.ListJobs(JobFilter{MutationState: job.Unknown}, 0, 0)
			h.forceRelease(w.pick(unknown).JobID, "walk")
		}
	case 11: // GC
		cutoff := h.now - rng.Int64N(200)
		ids := s.GCEligible(cutoff, 3)
		ids = append(ids, w.pick(nil).JobID)
		h.apply(CmdGC, gcCmd(cutoff, ids...))
	case 12: // catalogs and backends
		switch rng.IntN(4) {
		case 0:
			h.apply(CmdUpdateCatalog, &journal.TCatalogCommand{NowMs: h.now, Catalog: &journal.TCatalogRecord{
				Name: "sea", RootURI: thrift.StringPtr([]string{"/data/sea", "/data/sea2"}[rng.IntN(2)])}})
		case 1:
			h.apply(CmdRemoveCatalog, &journal.TRemoveCatalogCommand{NowMs: h.now, Name: "sea"})
		case 2:
			h.apply(CmdCreateCatalog, &journal.TCatalogCommand{NowMs: h.now, Catalog: &journal.TCatalogRecord{
				Name: "sea", RootURI: thrift.StringPtr("/data/sea")}})
		case 3:
			if rng.IntN(2) == 0 {
				h.apply(CmdRemoveBackend, &journal.TRemoveBackendCommand{NowMs: h.now, BackendID: 1 + rng.Int64N(3)})
			} else {
				h.apply(CmdAddBackend, &journal.TBackendCommand{NowMs: h.now, Address: "be" + itoa(1+rng.Int64N(3)) + ":9060"})
			}
		}
	case 13: // quotas move under the jobs
		if rng.IntN(4) != 0 {
			return
		}
		key := []string{options.OptMaxUnresolvedPerTable, options.OptMaxUnresolvedPerCatalog, options.OptMaxUnresolvedGlobal}[rng.IntN(3)]
		h.apply(CmdSetOption, &journal.TSetOptionCommand{NowMs: h.now, Key: key, Value: itoa(3 + rng.Int64N(30))})
	}
}

// checkAgainstBruteForce compares books and every index query with a
// filter over all records.
func checkAgainstBruteForce(t testing.TB, s *State) {
	t.Helper()
	if got, want := s.Books(), recomputeBooks(s); !reflect.DeepEqual(got, want) {
		t.Fatalf("books drifted\n got %+v\nwant %+v", got, want)
	}
	all, _ := s.ListJobs(JobFilter{}, 0, 0)
	filter := func(keep func(*job.Record) bool) []int64 {
		out := []int64{}
		for _, r := range all {
			if keep(r) {
				out = append(out, r.JobID)
			}
		}
		return out
	}
	byKey := func(ids []int64, key func(*job.Record) int64) []int64 {
		slices.SortStableFunc(ids, func(a, b int64) int {
			ra, _ := s.Job(a)
			rb, _ := s.Job(b)
			return cmp.Or(cmp.Compare(key(ra), key(rb)), cmp.Compare(a, b))
		})
		return ids
	}
	same := func(what string, got []*job.Record, want []int64) {
		t.Helper()
		if g := append([]int64{}, jobIDs(got)...); !slices.Equal(g, want) {
			t.Fatalf("%s = %v, want %v", what, g, want)
		}
	}
	same("pending", s.PendingInIDOrder(0), filter(func(r *job.Record) bool { return r.MutationState == job.Pending }))
	same("running", s.RunningByDeadline(math.MaxInt64, 0), byKey(filter(func(r *job.Record) bool { return r.MutationState == job.Running }),
		func(r *job.Record) int64 { return r.DeadlineMs }))
	same("refresh due", s.RefreshDue(0), filter((*job.Record).NeedsRefresh))
	same("refresh running", s.RefreshRunning(), filter(func(r *job.Record) bool { return r.RefreshState == job.RefreshRunning }))
	if got, want := s.GCEligible(math.MaxInt64, 0), byKey(filter(gcEligible), func(r *job.Record) int64 { return r.UpdateTimeMs }); !slices.Equal(got, want) {
		t.Fatalf("gc = %v, want %v", got, want)
	}
	for be := int64(0); be <= 4; be++ {
		want := filter(func(r *job.Record) bool { return r.HoldsPossibleLiveSlot() && r.BackendID == be })
		same("slots", s.SlotHolders(be), want)
		if s.HeldSlots(be) != len(want) {
			t.Fatalf("held slots of %d = %d, want %d", be, s.HeldSlots(be), len(want))
		}
		for epoch := int64(40); epoch <= 44; epoch++ {
			off := byKey(filter(func(r *job.Record) bool { return epochSwept(r) && r.BackendID == be && r.ProcessEpoch != epoch }),
				func(r *job.Record) int64 { return r.ProcessEpoch })
			same("off epoch", s.OffEpoch(be, epoch), off)
		}
	}
	for cat := int64(0); cat <= 5; cat++ {
		f := JobFilter{CatalogID: cat}
		got, _ := s.ListJobs(f, 0, 0)
		if cat == 0 {
			got = all
		}
		same("catalog", got, filter(func(r *job.Record) bool { return cat == 0 || r.CatalogID == cat }))
		n := len(filter(func(r *job.Record) bool { return r.CatalogID == cat && r.Unresolved() && r.HasFenceIdentity() }))
		if s.UnresolvedInCatalog(cat) != n {
			t.Fatalf("unresolved in catalog %d = %d, want %d", cat, s.UnresolvedInCatalog(cat), n)
		}
	}
	for k, ids := range s.Books().Fence {
		if len(ids) > 1 {
			t.Fatalf("fence %v held by %v: admission let two through", k.NormalizedIndexName, ids)
		}
	}
	// An unresolved OPTIMIZE is the only unresolved job on its dataset.
	holders := map[job.TableKey][]*job.Record{}
	for _, r := range all {
		if r.Unresolved() && r.HasFenceIdentity() {
			holders[r.TableQuotaKey()] = append(holders[r.TableQuotaKey()], r)
		}
	}
	for _, rs := range holders {
		for _, r := range rs {
			if r.IsOptimize() && len(rs) > 1 {
				t.Fatalf("OPTIMIZE %d shares its dataset with %d other unresolved jobs", r.JobID, len(rs)-1)
			}
			if r.IsOptimize() && r.MutationState == job.Resolving {
				t.Fatalf("OPTIMIZE %d is RESOLVING", r.JobID)
			}
		}
	}
}

func TestRandomWalkKeepsBooksAndIndexes(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		w := newWalker(t, seed)
		packed := 0 // checks that met a packed row (row.go): Apply, queries and filters on both forms
		for i := 0; i < 800; i++ {
			w.step()
			if i%20 == 0 {
				checkAgainstBruteForce(t, w.h.st())
				if packedRows(w.h.st()) > 0 {
					packed++
				}
			}
		}
		if packed == 0 {
			t.Fatalf("seed %d: no check met a retained job kept packed", seed)
		}
		checkAgainstBruteForce(t, w.h.st())
		if n := w.h.st().LastJobID(); n < 50 {
			t.Fatalf("seed %d: the walk admitted only %d jobs", seed, n)
		}
		if w.batchedOK < 10 {
			t.Fatalf("seed %d: only %d admissions passed behind another in a batch", seed, w.batchedOK)
		}
	}
}

func TestListJobsPaging(t *testing.T) {
	w := newWalker(t, 9)
	for i := 0; i < 400; i++ {
		w.step()
	}
	s := w.h.st()
	for _, f := range []JobFilter{{}, {CatalogID: 1}, {MutationState: job.Pending}, {RefreshState: job.RefreshRunning},
		{MutationState: job.Committed, DB: "db"}, {CatalogID: 1, Table: "t1", RefreshState: job.RefreshRequired}} {
		want, _ := s.ListJobs(f, 0, 0)
		var got []*job.Record
		after := int64(0)
		for {
			page, more := s.ListJobs(f, after, 3)
			got = append(got, page...)
			if !more {
				break
			}
			if len(page) != 3 {
				t.Fatalf("short page with more")
			}
			after = page[len(page)-1].JobID
		}
		if !slices.Equal(jobIDs(got), jobIDs(want)) {
			t.Fatalf("paging %+v: %v, want %v", f, jobIDs(got), jobIDs(want))
		}
		for _, r := range want {
			if !f.match(r) {
				t.Fatalf("job %d does not match %+v", r.JobID, f)
			}
		}
	}
}
