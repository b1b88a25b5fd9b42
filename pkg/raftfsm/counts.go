package raftfsm

import "github.com/lancemaster/lancemaster/pkg/job"

// JobCounts is how many jobs are in each mutation state and in each refresh
// state. Every known state is present (zeros included), so an exporter sees
// a stable label set.
type JobCounts struct {
	Mutation map[job.MutationState]int64
	Refresh  map[job.RefreshState]int64
	// Other counts records whose state is outside the known enums (a newer
	// master's); 0 normally, since record reads fail closed to known states.
	OtherMutation, OtherRefresh int64
	// UnknownUnresolved counts UNKNOWN jobs an operator has not
	// force-released yet: the ones that still need someone (a released
	// UNKNOWN job stays UNKNOWN in the journal until retention collects it).
	UnknownUnresolved int64
	// HeldPending counts PENDING jobs a snapshot restore held (RestoreHold):
	// never dispatched, each waits for an operator to cancel it.
	HeldPending int64
}

// stateSlots bounds the enum values counted in place; slot 0 holds any value
// outside 1..stateSlots-1.
const stateSlots = 8

// stateCounts are the per-state job counts, kept in meta. They are two small
// arrays copied by value with meta, so a published view's counts never
// change and maintaining them costs O(1) per record change: metrics read
// them in O(states) instead of walking every job.
//
// Every record change goes through tx.put / tx.remove (Apply) or
// loader.load (Restore), which call move, so the counts cannot drift from
// the records.
type stateCounts struct {
	mutation          [stateSlots]int64
	refresh           [stateSlots]int64
	unknownUnresolved int64
	heldPending       int64
}

func stateSlot[T ~int32](v T) int {
	if v > 0 && int(v) < stateSlots {
		return int(v)
	}
	return 0
}

// move uncounts old and counts new (either may be nil).
func (c *stateCounts) move(old, new *job.Record) {
	if old != nil {
		c.mutation[stateSlot(old.MutationState)]--
		c.refresh[stateSlot(old.RefreshState)]--
		if unknownUnresolved(old) {
			c.unknownUnresolved--
		}
		if heldPending(old) {
			c.heldPending--
		}
	}
	if new != nil {
		c.mutation[stateSlot(new.MutationState)]++
		c.refresh[stateSlot(new.RefreshState)]++
		if unknownUnresolved(new) {
			c.unknownUnresolved++
		}
		if heldPending(new) {
			c.heldPending++
		}
	}
}

// unknownUnresolved: an UNKNOWN job nobody has force-released.
func unknownUnresolved(r *job.Record) bool { return r.MutationState == job.Unknown && !r.ForceReleased }

// heldPending: a PENDING job a snapshot restore held.
func heldPending(r *job.Record) bool { return r.MutationState == job.Pending && r.RestoreHold }

var (
	mutationStates = []job.MutationState{job.Pending, job.Running, job.Committed, job.NotCommitted, job.Unknown, job.Cancelled, job.Resolving}
	refreshStates  = []job.RefreshState{job.RefreshNotRequired, job.RefreshRequired, job.RefreshRunning, job.RefreshDone, job.RefreshFailed}
)

// JobCounts returns the number of jobs per mutation and refresh state, in
// O(states).
func (s *State) JobCounts() JobCounts {
	c := &s.m.counts
	out := JobCounts{
		Mutation: make(map[job.MutationState]int64, len(mutationStates)),
		Refresh:  make(map[job.RefreshState]int64, len(refreshStates)),

		UnknownUnresolved: c.unknownUnresolved,
		HeldPending:       c.heldPending,
	}
	for i := range stateSlots {
		out.OtherMutation += c.mutation[i]
		out.OtherRefresh += c.refresh[i]
	}
	for _, m := range mutationStates {
		out.Mutation[m] = c.mutation[stateSlot(m)]
		out.OtherMutation -= out.Mutation[m]
	}
	for _, r := range refreshStates {
		out.Refresh[r] = c.refresh[stateSlot(r)]
		out.OtherRefresh -= out.Refresh[r]
	}
	return out
}
