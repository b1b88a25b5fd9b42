package backend

import (
	"time"

	"github.com/lancemaster/lancemaster/gen-go/wire"
)

// invocation is one accepted dispatch of this process. Its fields are
// guarded by Agent.mu, except dispatch, which only the worker that took the
// invocation from the queue reads (it was written before the send on the
// queue channel).
type invocation struct {
	id       string
	jobID    int64
	deadline time.Time
	// dispatch holds the request, storage credentials included, in memory
	// only, until the worker starts; the worker drops it when it finishes.
	dispatch *wire.TLanceIndexJobDispatch

	state  wire.TLanceInvocationState
	report *wire.TLanceIndexJobReport // set when FINISHED
}

// table is the invocations this process accepted, by invocation id. It is
// what makes a redelivered dispatch answer OK without running twice, and
// what query answers from. Finished entries are forgotten deadline + Grace
// after their deadline; queued and running ones never are.
//
// Not safe for concurrent use: the Agent guards it with its mutex.
type table struct {
	byID    map[string]*invocation
	queued  int
	running int
}

func newTable() *table { return &table{byID: make(map[string]*invocation)} }

func (t *table) get(id string) (*invocation, bool) {
	inv, ok := t.byID[id]
	return inv, ok
}

// add records a newly accepted (QUEUED) invocation.
func (t *table) add(inv *invocation) {
	inv.state = wire.TLanceInvocationState_QUEUED
	t.byID[inv.id] = inv
	t.queued++
}

// markRunning moves a queued invocation to RUNNING.
func (t *table) markRunning(inv *invocation) {
	if inv.state == wire.TLanceInvocationState_QUEUED {
		t.queued--
		t.running++
		inv.state = wire.TLanceInvocationState_RUNNING
	}
}

// markFinished records the final report of a queued or running invocation.
func (t *table) markFinished(inv *invocation, rep *wire.TLanceIndexJobReport) {
	switch inv.state {
	case wire.TLanceInvocationState_QUEUED:
		t.queued--
	case wire.TLanceInvocationState_RUNNING:
		t.running--
	case wire.TLanceInvocationState_FINISHED:
		return
	}
	inv.state = wire.TLanceInvocationState_FINISHED
	inv.report = rep
	inv.dispatch = nil
}

// forgetFinished drops the finished invocations whose deadline + grace is
// before now, and returns how many.
func (t *table) forgetFinished(now time.Time, grace time.Duration) int {
	n := 0
	for id, inv := range t.byID {
		if inv.state == wire.TLanceInvocationState_FINISHED && now.After(inv.deadline.Add(grace)) {
			delete(t.byID, id)
			n++
		}
	}
	return n
}

// status is the query answer for id.
func (t *table) status(id string) *wire.TInvocationStatus {
	inv, ok := t.byID[id]
	if !ok {
		return &wire.TInvocationStatus{InvocationID: id, State: wire.TLanceInvocationState_UNKNOWN_INVOCATION}
	}
	st := &wire.TInvocationStatus{InvocationID: id, State: inv.state}
	if inv.state == wire.TLanceInvocationState_FINISHED && inv.report != nil {
		st.Result_ = copyReport(inv.report)
		if p := inv.report.TerminationProof; p != nil {
			pv := *p
			st.TerminationProof = &pv
		}
	}
	return st
}

// copyReport returns a deep copy, so an answer being serialized never
// shares memory with the table.
func copyReport(r *wire.TLanceIndexJobReport) *wire.TLanceIndexJobReport {
	c := *r
	if r.ResultCode != nil {
		v := *r.ResultCode
		c.ResultCode = &v
	}
	if r.CompletionReason != nil {
		v := *r.CompletionReason
		c.CompletionReason = &v
	}
	if r.SanitizedMessage != nil {
		v := *r.SanitizedMessage
		c.SanitizedMessage = &v
	}
	if r.ExternalMetadataAdvanced != nil {
		v := *r.ExternalMetadataAdvanced
		c.ExternalMetadataAdvanced = &v
	}
	if r.TerminationProof != nil {
		v := *r.TerminationProof
		c.TerminationProof = &v
	}
	if r.InvocationSecret != nil {
		v := *r.InvocationSecret
		c.InvocationSecret = &v
	}
	if r.Forwarded != nil {
		v := *r.Forwarded
		c.Forwarded = &v
	}
	return &c
}
