package dispatch

import (
	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
)

// deadlineSweep is step 1 of the round: RUNNING jobs past their deadline
// are reconciled first (their backend may know the result), and the rest
// are given up as M2 NO_TRUSTED_RESULT → UNKNOWN. Their possible-live slot,
// fence and quota stay held: a deadline proves nothing about the worker.
//
// Everything goes in at most two entries: the proofs reconcile found, on
// their own first, then one CompleteBatch with reconciled results and the
// give-ups.
func (r *round) deadlineSweep() error {
	nowMs := r.d.d.Clock.Now().UnixMilli()
	expired := r.d.d.Reader.State().RunningByDeadline(nowMs, maxSweepJobs)
	if len(expired) == 0 {
		return nil
	}
	plan := r.d.reconcile(r.ctx, r.term, expired)
	for _, rec := range expired {
		if plan.settled[rec.JobID] {
			continue
		}
		r.d.log.Warn("execute deadline passed without a trusted result; UNKNOWN, possible-live slot kept",
			zap.Int64("job_id", rec.JobID), zap.Int64("backend_id", rec.BackendID), zap.Int64("deadline_ms", rec.DeadlineMs))
		plan.completions = append(plan.completions,
			recordIdentity(rec).completion(job.NoTrustedResult, "execute deadline passed without a trusted result", false))
	}
	return r.d.applyReconcile(r.ctx, plan)
}

// epochSweep is step 2 of the round: every job holding a possible-live slot
// on a backend that, during this term, answered a heartbeat with another
// process epoch gets the proof PROCESS_EPOCH_GONE (in any mutation state,
// UNKNOWN included): the process that ran its worker, and the worker, are
// gone. A backend not heard this term, lost heartbeats or an unregistered
// backend prove nothing and release nothing.
func (r *round) epochSweep() error {
	st := r.d.d.Reader.State()
	var proofs []*journal.TProof
	for _, b := range st.Backends() {
		_, epoch, heard := r.d.d.Pool.heardInTerm(b.ID, r.term)
		if !heard {
			continue
		}
		for _, rec := range st.SlotHolders(b.ID) {
			if rec.ProcessEpoch == epoch {
				continue
			}
			r.d.log.Info("backend reports another process epoch; possible-live slot released (PROCESS_EPOCH_GONE)",
				zap.Int64("job_id", rec.JobID), zap.Int64("backend_id", b.ID),
				zap.Int64("job_epoch", rec.ProcessEpoch), zap.Int64("epoch", epoch), zap.Stringer("mutation_state", rec.MutationState))
			proofs = append(proofs, recordIdentity(rec).proof(b.ID, job.ProofProcessEpochGone))
		}
	}
	return r.d.recordTerminationProofs(r.ctx, proofs, "epoch sweep")
}
