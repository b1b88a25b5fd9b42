package raftfsm

import (
	"reflect"
	"testing"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
)

// bruteCounts walks every record.
func bruteCounts(s *State) JobCounts {
	out := JobCounts{Mutation: map[job.MutationState]int64{}, Refresh: map[job.RefreshState]int64{}}
	for _, m := range mutationStates {
		out.Mutation[m] = 0
	}
	for _, r := range refreshStates {
		out.Refresh[r] = 0
	}
	all, _ := s.ListJobs(JobFilter{}, 0, 0)
	for _, r := range all {
		if _, ok := out.Mutation[r.MutationState]; ok {
			out.Mutation[r.MutationState]++
		} else {
			out.OtherMutation++
		}
		if r.MutationState == job.Unknown && !r.ForceReleased {
			out.UnknownUnresolved++
		}
		if r.MutationState == job.Pending && r.RestoreHold {
			out.HeldPending++
		}
		if _, ok := out.Refresh[r.RefreshState]; ok {
			out.Refresh[r.RefreshState]++
		} else {
			out.OtherRefresh++
		}
	}
	return out
}

// The per-state counts follow every Apply of a random walk (admissions,
// dispatches, completions, proofs, refreshes, cancels, releases, GC) and
// survive a snapshot round trip.
func TestJobCountsFollowApplyAndRestore(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		w := newWalker(t, seed)
		for i := 0; i < 400; i++ {
			w.step()
			if got, want := w.h.st().JobCounts(), bruteCounts(w.h.st()); !reflect.DeepEqual(got, want) {
				t.Fatalf("seed %d step %d: counts %+v, records say %+v", seed, i, got, want)
			}
		}
		st := w.h.st()
		var total int64
		for _, n := range st.JobCounts().Mutation {
			total += n
		}
		if total == 0 {
			t.Fatalf("seed %d: the walk admitted nothing", seed)
		}
		r := restored(t, snapshotBytes(t, st))
		if got, want := r.State().JobCounts(), st.JobCounts(); !reflect.DeepEqual(got, want) {
			t.Fatalf("seed %d: restored counts %+v, want %+v", seed, got, want)
		}
	}
}

func TestJobCountsEmpty(t *testing.T) {
	c := New(nil).State().JobCounts()
	if len(c.Mutation) != len(mutationStates) || len(c.Refresh) != len(refreshStates) {
		t.Fatalf("every known state must be present: %+v", c)
	}
	for m, n := range c.Mutation {
		if n != 0 {
			t.Fatalf("%v = %d", m, n)
		}
	}
}

// A force-released UNKNOWN job stays UNKNOWN in the journal until retention
// collects it, but nobody needs to act on it any more: the unresolved count
// (what the documented alert watches) drops, and the Unresolved list filter
// leaves it out.
func TestUnknownUnresolvedDropsOnForceRelease(t *testing.T) {
	h, id, _ := unknownFixture(t)
	c := h.st().JobCounts()
	if c.Mutation[job.Unknown] != 1 || c.UnknownUnresolved != 1 {
		t.Fatalf("before: %+v", c)
	}
	if got, _ := h.st().ListJobs(JobFilter{MutationState: job.Unknown, Unresolved: true}, 0, 0); len(got) != 1 {
		t.Fatalf("unresolved UNKNOWN list before: %d jobs", len(got))
	}
	wantCode(t, h.forceRelease(id, "checked by hand"), journal.TApplyCode_OK)
	c = h.st().JobCounts()
	if c.Mutation[job.Unknown] != 1 || c.UnknownUnresolved != 0 {
		t.Fatalf("after force-release: %+v", c)
	}
	if got, _ := h.st().ListJobs(JobFilter{MutationState: job.Unknown, Unresolved: true}, 0, 0); len(got) != 0 {
		t.Fatalf("unresolved UNKNOWN list after: %d jobs", len(got))
	}
	if got, _ := h.st().ListJobs(JobFilter{MutationState: job.Unknown}, 0, 0); len(got) != 1 {
		t.Fatalf("UNKNOWN list after: %d jobs", len(got))
	}
	r := restored(t, snapshotBytes(t, h.st()))
	if got := r.State().JobCounts().UnknownUnresolved; got != 0 {
		t.Fatalf("restored: %d", got)
	}
}
