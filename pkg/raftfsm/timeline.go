package raftfsm

import (
	"strconv"

	"github.com/lancemaster/lancemaster/pkg/job"
)

// The job timeline (pkg/job/timeline.go): every transition (tx.transition)
// appends what it did, read off the difference between the record before
// and after, with the command's clock and the entry's journal index. It is
// part of the record, so it is deterministic, in snapshots, and the same in
// Preview (which drops it with the rest of its transaction).

// transitionsOf lists what changing old into n did, in the order a reader
// follows: the dispatch, what its worker said, the outcome, the operator's
// acts, the refresh, and the end.
func transitionsOf(old, n *job.Record, now int64, index uint64) []job.Transition {
	var out []job.Transition
	add := func(k job.TransitionKind, actor, detail string) {
		out = append(out, job.Transition{Kind: k, TimeMs: now, Index: index, Actor: actor, Detail: detail})
	}
	if old.MutationState == job.Pending && n.MutationState == job.Running {
		add(job.TransitionDispatched, "", job.DispatchDetail(n))
	}
	if n.MutationState == job.Running && old.IndexUUID == "" && n.IndexUUID != "" {
		add(job.TransitionAccepted, "", n.IndexUUID)
	}
	if n.BuildPhase != old.BuildPhase && n.BuildPhase != "" {
		add(job.TransitionPhase, "", n.BuildPhase)
	}
	if n.TerminationProof != old.TerminationProof && n.TerminationProof != job.ProofNone && n.TerminationProof != 0 {
		add(job.TransitionSlotReleased, "", n.TerminationProof.String())
	}
	if n.Result.Code != 0 && n.Result != old.Result {
		add(job.TransitionReported, "", n.Result.Code.String())
	}
	if n.MutationState != old.MutationState {
		switch n.MutationState {
		case job.Pending:
			add(job.TransitionReturnedToPending, "", "attempts "+strconv.FormatInt(int64(n.DispatchAttempts), 10))
		case job.Resolving:
			add(job.TransitionResolving, "", "")
		case job.Committed, job.NotCommitted:
			add(job.TransitionResolved, "", n.MutationState.String())
		case job.Unknown:
			add(job.TransitionUnknown, "", "")
		case job.Cancelled:
			add(job.TransitionCancelled, n.CancelActor, "")
		}
	}
	if n.RestoreHold && !old.RestoreHold {
		add(job.TransitionHeld, "", restoreHeldDetail)
	}
	if n.ForceReleased && !old.ForceReleased {
		add(job.TransitionForceReleased, n.ForceActor, n.ForceNote)
	}
	if n.RefreshState != old.RefreshState && n.MutationState.IsOutcome() {
		switch n.RefreshState {
		case job.RefreshRequired:
			add(job.TransitionRefreshRequired, "", "")
		case job.RefreshRunning:
			add(job.TransitionRefreshRunning, "", "")
		case job.RefreshDone:
			add(job.TransitionRefreshDone, "", "")
		case job.RefreshFailed:
			add(job.TransitionRefreshFailed, "", "")
		}
	}
	if old.Unresolved() && !n.Unresolved() {
		add(job.TransitionDone, "", "")
	}
	return out
}

// recordTimeline appends to n's timeline what changing old into n did.
func (t *tx) recordTimeline(old, n *job.Record) {
	add := transitionsOf(old, n, t.now, t.index)
	if len(add) == 0 {
		return
	}
	n.Timeline = job.AppendTimeline(n.Timeline, add...)
}
