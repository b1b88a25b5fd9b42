package raftfsm

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/options"
)

// ListJobs and ListJobsNewestFirst against brute force: after a random
// walk (with leader clocks that sometimes step back, so create times are not
// monotonic in id), paging either way with any filter returns exactly the
// filtered set, in its order, each page at most the limit.

// randomFilter draws a filter over every field, often several at once.
func randomFilter(rng *rand.Rand, createTimes []int64) JobFilter {
	var f JobFilter
	maybe := func() bool { return rng.IntN(3) == 0 }
	if maybe() {
		f.CatalogID = []int64{1, 2, 9}[rng.IntN(3)]
	}
	if maybe() {
		f.DB = []string{"db", "other"}[rng.IntN(2)]
	}
	if maybe() {
		f.Table = "t" + itoa(rng.Int64N(5))
	}
	switch rng.IntN(5) {
	case 0:
		f.MutationState = job.MutationState(1 + rng.IntN(7))
	case 1:
		f.MutationStates = []job.MutationState{job.MutationState(1 + rng.IntN(7)), job.MutationState(1 + rng.IntN(7))}
	}
	switch rng.IntN(5) {
	case 0:
		f.RefreshState = job.RefreshState(1 + rng.IntN(5))
	case 1:
		f.RefreshStates = []job.RefreshState{job.RefreshState(1 + rng.IntN(5)), job.RefreshState(1 + rng.IntN(5))}
	}
	f.Unresolved = rng.IntN(4) == 0
	if maybe() && len(createTimes) > 0 {
		f.SinceMs = createTimes[rng.IntN(len(createTimes))] + rng.Int64N(3) - 1
	}
	if maybe() {
		f.MutationType = job.MutationType(1 + rng.IntN(4))
	}
	if maybe() {
		f.IndexType = []string{job.IndexBTree, job.IndexIVFPQ}[rng.IntN(2)]
	}
	f.Held = rng.IntN(4) == 0
	return f
}

// bruteForce is every job matching f, written out field by field (not
// through f.match), oldest first.
func bruteForce(all []*job.Record, f JobFilter) []int64 {
	out := []int64{}
	for _, r := range all {
		ok := (f.CatalogID == 0 || r.CatalogID == f.CatalogID) && (f.DB == "" || r.DB == f.DB) &&
			(f.Table == "" || r.Table == f.Table) &&
			(f.MutationState == 0 || r.MutationState == f.MutationState) &&
			(f.RefreshState == 0 || r.RefreshState == f.RefreshState) &&
			(len(f.MutationStates) == 0 || slices.Contains(f.MutationStates, r.MutationState)) &&
			(len(f.RefreshStates) == 0 || slices.Contains(f.RefreshStates, r.RefreshState)) &&
			(!f.Unresolved || r.Unresolved()) &&
			(f.SinceMs == 0 || r.CreateTimeMs >= f.SinceMs) &&
			(f.MutationType == 0 || r.MutationType == f.MutationType) &&
			(f.IndexType == "" || r.IndexType == f.IndexType) &&
			(!f.Held || r.RestoreHold)
		if ok {
			out = append(out, r.JobID)
		}
	}
	return out
}

// pageAll follows the pages of one direction to the end.
func pageAll(t *testing.T, s *State, f JobFilter, newest bool, limit int) []int64 {
	t.Helper()
	var got []int64
	cursor := int64(0)
	for range 10_000 {
		var page []*job.Record
		var more bool
		if newest {
			page, more = s.ListJobsNewestFirst(f, cursor, limit)
		} else {
			page, more = s.ListJobs(f, cursor, limit)
		}
		if len(page) > limit {
			t.Fatalf("a page of %d jobs for limit %d", len(page), limit)
		}
		got = append(got, jobIDs(page)...)
		if !more {
			return got
		}
		if len(page) != limit {
			t.Fatalf("a short page (%d of %d) says more follow", len(page), limit)
		}
		cursor = page[len(page)-1].JobID
	}
	t.Fatalf("paging did not end")
	return nil
}

func TestListJobsPagingBothWaysAgainstModel(t *testing.T) {
	for _, seed := range []uint64{11, 12, 13} {
		w := newWalker(t, seed)
		h := w.h
		for range 800 {
			w.step()
		}
		// More jobs than the walk keeps (its GC and quotas hold it near 30),
		// of more index types, admitted by leaders whose clocks sometimes
		// step back; then the walk moves some of them on.
		for _, key := range []string{options.OptMaxUnresolvedPerCatalog, options.OptMaxUnresolvedGlobal} {
			h.apply(CmdSetOption, &journal.TSetOptionCommand{NowMs: h.now, Key: key, Value: "100000"})
		}
		for i := range 200 {
			h.now += w.rng.Int64N(50)
			if w.rng.IntN(15) == 0 {
				h.now -= 400
			}
			mt := []job.MutationType{job.Create, job.Replace, job.Drop}[w.rng.IntN(3)]
			r := newJob(1, testRoot, "other", "u"+itoa(int64(i)), "x", mt)
			if mt != job.Drop && w.rng.IntN(2) == 0 {
				r.IndexType = job.IndexIVFPQ
			}
			wantCode(t, h.admitRecord(r), journal.TApplyCode_OK)
		}
		for range 300 {
			w.step()
		}
		// A restore that holds every seventh job (the walk itself restores
		// only what it saved). TestListJobsHeldReadsRetainedRows covers
		// held jobs that are resolved.
		h.restoreWith(t, func(rs []*job.Record) []*job.Record {
			out := make([]*job.Record, len(rs))
			for i, r := range rs {
				out[i] = r.Clone() // rs's live records are the state's own
				out[i].RestoreHold = out[i].RestoreHold || i%7 == 3
			}
			return out
		})
		s := w.h.st()
		all, _ := s.ListJobs(JobFilter{}, 0, 0)
		if held, _ := s.ListJobs(JobFilter{Held: true}, 0, 0); len(held) < len(all)/8 {
			t.Fatalf("seed %d: %d of %d jobs held: the filter is tested on too little", seed, len(held), len(all))
		}
		var times []int64
		inversions := 0
		for i, r := range all {
			times = append(times, r.CreateTimeMs)
			if i > 0 && r.CreateTimeMs < all[i-1].CreateTimeMs {
				inversions++
			}
		}
		if len(all) < 40 || inversions == 0 {
			t.Fatalf("seed %d: %d jobs, %d create-time inversions: the walk tests too little", seed, len(all), inversions)
		}
		nonEmpty := 0
		for range 300 {
			f := randomFilter(w.rng, times)
			want := bruteForce(all, f)
			if len(want) > 0 {
				nonEmpty++
			}
			limit := 1 + w.rng.IntN(7)
			if got := pageAll(t, s, f, false, limit); !slices.Equal(got, want) {
				t.Fatalf("seed %d, oldest first, %+v limit %d:\n got %v\nwant %v", seed, f, limit, got, want)
			}
			slices.Reverse(want)
			if got := pageAll(t, s, f, true, limit); !slices.Equal(got, want) {
				t.Fatalf("seed %d, newest first, %+v limit %d:\n got %v\nwant %v", seed, f, limit, got, want)
			}
			// No limit: one page, everything.
			if got, more := s.ListJobsNewestFirst(f, 0, 0); more || !slices.Equal(jobIDs(got), want) {
				t.Fatalf("seed %d, newest first without a limit, %+v: %v (more %t), want %v", seed, f, jobIDs(got), more, want)
			}
		}
		if nonEmpty < 60 {
			t.Fatalf("seed %d: only %d of 300 filters matched anything", seed, nonEmpty)
		}
	}
}

// TestListJobsSinceDoesNotTrustIDOrder: job 2 was admitted by a leader
// whose clock is behind job 1's. A newest-first walk that stopped at the
// first job created before --since would miss job 1.
func TestListJobsSinceDoesNotTrustIDOrder(t *testing.T) {
	h := newHarness(t)
	h.createCatalog("lake", testRoot)
	for i, now := range []int64{10_000, 5_000, 12_000} {
		h.now = now
		if id := h.admit(1, "db", "t"+itoa(int64(i)), "idx"); id != int64(i+1) {
			t.Fatalf("admitted job %d, want %d", id, i+1)
		}
	}
	s := h.st()
	f := JobFilter{SinceMs: 10_000}
	if got, _ := s.ListJobsNewestFirst(f, 0, 0); !slices.Equal(jobIDs(got), []int64{3, 1}) {
		t.Fatalf("since 10000, newest first: %v, want [3 1]", jobIDs(got))
	}
	if got, _ := s.ListJobs(f, 0, 0); !slices.Equal(jobIDs(got), []int64{1, 3}) {
		t.Fatalf("since 10000, oldest first: %v, want [1 3]", jobIDs(got))
	}
	// Paging by one across the job that does not match.
	if got, more := s.ListJobsNewestFirst(f, 3, 1); !more && !slices.Equal(jobIDs(got), []int64{1}) || more {
		t.Fatalf("since 10000 before 3: %v more %t, want [1] and no more", jobIDs(got), more)
	}
	if got, _ := s.ListJobsNewestFirst(JobFilter{}, 1, 0); len(got) != 0 {
		t.Fatalf("before job 1: %v", jobIDs(got))
	}
}

// A held job that is resolved is a retained (packed) row: the filter reads
// its hold without unpacking it.
func TestListJobsHeldReadsRetainedRows(t *testing.T) {
	h := newHarness(t)
	cat := h.createCatalog("lake", testRoot)
	for i := range 4 {
		h.admit(cat, "db", "t"+itoa(int64(i)), "idx")
	}
	wantCode(t, h.cancel(2), journal.TApplyCode_OK)
	wantCode(t, h.cancel(3), journal.TApplyCode_OK)
	h.restoreWith(t, func(rs []*job.Record) []*job.Record {
		out := make([]*job.Record, len(rs))
		for i, r := range rs {
			out[i] = r.Clone()
			out[i].RestoreHold = r.JobID == 1 || r.JobID == 2
		}
		return out
	})
	s := h.st()
	if w, ok := jobByID(s.t.jobs[ixID], 2); !ok || w.live != nil {
		t.Fatalf("job 2 (CANCELLED) is not a retained row")
	}
	f := JobFilter{Held: true}
	if got, _ := s.ListJobs(f, 0, 0); !slices.Equal(jobIDs(got), []int64{1, 2}) {
		t.Fatalf("held, oldest first: %v, want [1 2]", jobIDs(got))
	}
	if got, _ := s.ListJobsNewestFirst(f, 0, 0); !slices.Equal(jobIDs(got), []int64{2, 1}) {
		t.Fatalf("held, newest first: %v, want [2 1]", jobIDs(got))
	}
	f.MutationState = job.Cancelled
	if got, _ := s.ListJobs(f, 0, 0); !slices.Equal(jobIDs(got), []int64{2}) {
		t.Fatalf("held and CANCELLED: %v, want [2]", jobIDs(got))
	}
}
