package raftfsm

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/raftfsm/jobcodec"
	"github.com/lancemaster/lancemaster/pkg/raftfsm/jobcodec/jobcodectest"
)

// TestRetainedRowsArePackedAndReadAsWritten restores random records: the
// retained ones (packable) are kept packed, the others whole, every read
// answers the record written, every index holds what its rule says, a
// filter on packed rows answers what it answers on records, and the view
// writes back the job frames it was restored from.
func TestRetainedRowsArePackedAndReadAsWritten(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var recs []*job.Record
	for i := 1; i <= 600; i++ {
		r := jobcodectest.Random(rng)
		r.JobID = int64(i)
		r.CatalogID, r.DB, r.Table = int64(1+i%3), []string{"db", "x"}[i%2], []string{"t", "u", "v"}[i%3]
		recs = append(recs, jobcodec.RecordFromThrift(RecordToThrift(r))) // as a snapshot reads it
	}
	var buf bytes.Buffer
	writeSnapshotFrom(t, &buf, emptyMeta(), nil, nil, recs)
	data := buf.Bytes()
	s := restored(t, data).State()
	packed, resolvedLive := 0, 0 // resolvedLive: resolved, but in a live index (refresh RUNNING)
	for _, want := range recs {
		w, ok := jobByID(s.t.jobs[ixID], want.JobID)
		if !ok || (w.live == nil) != (gcEligible(want) && packable(want)) {
			t.Fatalf("job %d: found %t, packed %t, retained %t", want.JobID, ok, w.live == nil, gcEligible(want))
		}
		if w.live == nil {
			packed++
		} else if gcEligible(want) {
			resolvedLive++
		}
		if got, _ := s.Job(want.JobID); !reflect.DeepEqual(got, want) {
			t.Fatalf("job %d reads\n %+v\nwant %+v", want.JobID, got, want)
		}
		for i := range jobIndexes {
			if jobIndexes[i].hasRow(w) != jobIndexes[i].has(want) {
				t.Fatalf("job %d: index %d holds the row %t, the record %t", want.JobID, i, jobIndexes[i].hasRow(w), jobIndexes[i].has(want))
			}
		}
	}
	if packed == 0 || packed == len(recs) || resolvedLive == 0 {
		t.Fatalf("%d of %d rows packed, %d resolved kept whole: the sample lacks a case", packed, len(recs), resolvedLive)
	}
	filters := []JobFilter{{}, {DB: "db"}, {Table: "u"}, {CatalogID: 2, Table: "v"}, {Unresolved: true},
		{MutationState: job.Committed}, {RefreshState: job.RefreshDone}, {SinceMs: 1 << 40}, {MutationType: job.Create},
		{IndexType: recs[7].IndexType}, {MutationStates: []job.MutationState{job.Cancelled, job.NotCommitted}, DB: "x"},
		{RefreshStates: []job.RefreshState{job.RefreshNotRequired}}}
	for _, f := range filters {
		var want []*job.Record
		for _, r := range recs {
			if f.match(r) {
				want = append(want, r)
			}
		}
		if got, _ := s.ListJobs(f, 0, 0); !reflect.DeepEqual(got, want) {
			t.Fatalf("filter %+v: %d jobs, want %d", f, len(got), len(want))
		}
	}
	// EachJobOfCatalog reads the facts of packed and live rows alike, of
	// that catalog only, in id order.
	for cat := int64(1); cat <= 3; cat++ {
		var want, got []JobFacts
		for _, r := range recs {
			if r.CatalogID == cat {
				want = append(want, JobFacts{JobID: r.JobID, DB: r.DB, Table: r.Table, MutationType: r.MutationType,
					CreateTimeMs: r.CreateTimeMs, Unresolved: r.Unresolved()})
			}
		}
		s.EachJobOfCatalog(cat, func(f JobFacts) bool { got = append(got, f); return true })
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("catalog %d: facts\n %+v\nwant %+v", cat, got, want)
		}
	}
	if got, want := frames(t, snapshotBytes(t, s))[1:], frames(t, data)[1:]; !reflect.DeepEqual(got, want) {
		t.Fatalf("the restored view writes other job frames")
	}
}

// packedRows counts the jobs of s kept packed.
func packedRows(s *State) int {
	n := 0
	s.t.jobs[ixID].Ascend(nil, func(w *row) bool {
		if w.live == nil {
			n++
		}
		return true
	})
	return n
}

// TestApplyPacksWhatItRetires: a job that becomes retained through Apply
// is kept packed, reads the same, and is still found by the commands that
// touch retained jobs (GC).
func TestApplyPacksWhatItRetires(t *testing.T) {
	h, id, _ := pendingFixture(t)
	w, _ := jobByID(h.st().t.jobs[ixID], id)
	if w.live == nil {
		t.Fatalf("a PENDING job is packed")
	}
	wantCode(t, h.cancel(id), journal.TApplyCode_OK)
	w, _ = jobByID(h.st().t.jobs[ixID], id)
	if w.live != nil {
		t.Fatalf("a CANCELLED job is kept whole")
	}
	if r := h.job(id); r.MutationState != job.Cancelled || r.CancelActor == "" || r.Locator == "" {
		t.Fatalf("read back %+v", r)
	}
	if got := h.st().GCEligible(h.now+1, 0); len(got) != 1 || got[0] != id {
		t.Fatalf("GC sees %v", got)
	}
}
