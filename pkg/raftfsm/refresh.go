package raftfsm

import (
	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
)

// The refresh family (DESIGN.md §3, R1-R4): after an outcome the external
// metadata is refreshed; until it is DONE the job stays unresolved and keeps
// its fence and quota. Every step is a rev compare-and-set, so a refresh
// driver on a deposed leader cannot overwrite its successor's progress.

func init() {
	register(CommandSpec{Type: CmdRefreshBatch, Name: "refresh", Forward: ForwardNever, Wake: WakeNever}, journal.NewTRefreshBatch, applyRefreshBatch)
}

func applyRefreshBatch(t *tx, c *journal.TRefreshBatch) (*journal.TApplyResponse, error) {
	return applyBatch(t, c.Transitions, refreshTransition)
}

// refreshTransition tells R1-R4 apart by (current state, to_state):
//
//	R1 REQUIRED|FAILED → RUNNING  outcome terminal, not force-released
//	R2 RUNNING → DONE             fence + quota released (book)
//	R3 RUNNING → FAILED           refresh_failure_time = now (retry throttle)
//	R4 RUNNING → REQUIRED         a new leader restarts an interrupted refresh
func refreshTransition(t *tx, c *journal.TRefreshTransition) (*journal.TItemResult_, error) {
	to := job.RefreshState(c.ToState)
	r := t.job(c.JobID)
	if r == nil {
		return itemFail(c.JobID, journal.TApplyCode_NOT_FOUND, "job %d does not exist", c.JobID), nil
	}
	if r.Rev != c.ExpectedRev {
		return itemFail(c.JobID, journal.TApplyCode_CAS_FAILED, "job %d is at rev %d, not %d", c.JobID, r.Rev, c.ExpectedRev), nil
	}
	from := r.RefreshState
	ok := false
	switch to {
	case job.RefreshRunning:
		ok = (from == job.RefreshRequired || from == job.RefreshFailed) &&
			r.MutationState.IsOutcome() && !r.ForceReleased
	case job.RefreshDone, job.RefreshFailed, job.RefreshRequired:
		ok = from == job.RefreshRunning
	default:
		return itemFail(c.JobID, journal.TApplyCode_INVALID, "job %d: refresh cannot be moved to state %d", c.JobID, int32(to)), nil
	}
	if !ok {
		return itemFail(c.JobID, journal.TApplyCode_CAS_FAILED,
			"job %d: refresh %s → %s is not allowed (mutation %s, force-released %t)",
			c.JobID, from, to, r.MutationState, r.ForceReleased), nil
	}
	err := t.transition(r, func(n *job.Record) {
		n.RefreshState = to
		if to == job.RefreshFailed {
			n.RefreshFailureTimeMs = t.now
		}
	})
	if err != nil {
		return nil, err
	}
	return itemOK(c.JobID), nil
}
