package dispatch

import (
	"fmt"

	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/options"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// deadlineSweep is step 1 of the round: RUNNING jobs past their deadline
// are reconciled first (their backend may know the result), and the rest
// are given up as M2 NO_TRUSTED_RESULT → UNKNOWN. Their possible-live slot,
// fence and quota stay held: a deadline proves nothing about the worker.
// RESOLVING jobs are not its business (the resolve step gives them up), and
// a job whose send or query is still in flight waits for the next round.
// Nor is a job whose backend answers this term with a higher process epoch:
// its worker is provably gone, and the new process's outbox may still hold
// its result; the epoch path (step 2) decides it once that outbox is
// delivered (a report, or RESOLVING and the dataset). A deadline passing
// meanwhile proves nothing. The same holds when the sweep's own query is
// the first news of the new process (STALE_EPOCH before this term heard
// the backend: newProcessUnheard).
//
// Each query group (one backend, one epoch) runs on its own goroutine of
// the term, so a hung backend holds neither the others nor the round
// (§13.9); it journals at most two entries: the proofs reconcile found, on
// their own first, then one CompleteBatch with reconciled results and the
// give-ups. Jobs that cannot be asked (an unregistered backend, no
// invocation id) are given up at once, in the round.
func (r *round) deadlineSweep() error {
	st := r.deps.Reader.State()
	nowMs := r.deps.Clock().UnixMilli()
	var expired []*job.Record
	for _, rec := range st.RunningByDeadline(nowMs, maxSweepJobs) {
		if rec.MutationState != job.Running || r.work.busy(rec.JobID) {
			continue
		}
		if b, heard := r.deps.Pool.heardInTerm(rec.BackendID, r.term); heard && b.Epoch > rec.ProcessEpoch {
			continue
		}
		expired = append(expired, rec)
	}
	if len(expired) == 0 {
		return nil
	}
	asked, _ := r.ask(st, groupForQuery(expired), true)
	var rest []*job.Record
	for _, rec := range expired {
		if !asked[rec.JobID] {
			rest = append(rest, rec)
		}
	}
	plan := reconcilePlan{settled: map[int64]bool{}}
	r.giveUp(&plan, rest)
	return r.d.applyReconcile(r.ctx, plan)
}

// giveUp plans M2 NO_TRUSTED_RESULT for every job of recs the plan does not
// settle.
func (r *round) giveUp(plan *reconcilePlan, recs []*job.Record) {
	for _, rec := range recs {
		if plan.settled[rec.JobID] {
			continue
		}
		r.d.log.Warn("execute deadline passed without a trusted result; UNKNOWN, possible-live slot kept",
			zap.Int64("job_id", rec.JobID), zap.Int64("backend_id", rec.BackendID), zap.Int64("deadline_ms", rec.DeadlineMs))
		plan.completions = append(plan.completions,
			recordIdentity(rec).completion(job.NoTrustedResult, "execute deadline passed without a trusted result", false))
	}
}

// epochSweep is step 2 of the round (DESIGN.md §7, §13.1, §13.3). For every
// backend whose epoch this term has heard:
//
//   - a job holding a possible-live slot there at a LOWER epoch than the
//     backend's gets the proof PROCESS_EPOCH_GONE (in any mutation state,
//     UNKNOWN included): the process that ran its worker, and the worker,
//     are gone;
//   - a job at a HIGHER epoch proves nothing (two processes behind one
//     address, or a clock gone back): logged at Warn once per change and
//     counted, never released;
//   - once the new process says its outbox is delivered, every RUNNING job
//     of an older epoch there has lost its result for good: the proof
//     carries finished_without_result and the job moves to RESOLVING in the
//     same item (a job whose slot was released already gets the same item;
//     its proof part is then a no-op).
//
// A backend not heard this term, lost heartbeats or an unregistered
// backend prove nothing and release nothing. All proofs go in one entry.
func (r *round) epochSweep() error {
	st := r.deps.Reader.State()
	opts := st.Options()
	nowMs := r.deps.Clock().UnixMilli()
	var proofs []*journal.TProof
	for _, b := range st.Backends() {
		v, heard := r.deps.Pool.heardInTerm(b.ID, r.term)
		if !heard {
			continue
		}
		// Only jobs at another epoch than the one heard can be proved gone:
		// one seek when there are none (every round asks).
		off := st.OffEpoch(b.ID, v.Epoch)
		if len(off) == 0 {
			continue
		}
		planned := map[int64]bool{}
		for _, rec := range off {
			switch {
			case !rec.HoldsPossibleLiveSlot():
				continue
			case rec.ProcessEpoch > v.Epoch:
				r.lowerEpoch(b.ID, rec, v.Epoch)
				continue
			}
			p := recordIdentity(rec).proof(b.ID, job.ProofProcessEpochGone)
			if v.OutboxDelivered && rec.MutationState == job.Running && !r.work.busy(rec.JobID) {
				r.epochGoneFinished(p, rec, v.Epoch, opts, nowMs)
			}
			r.d.log.Info("backend reports a newer process epoch; possible-live slot released (PROCESS_EPOCH_GONE)",
				zap.Int64("job_id", rec.JobID), zap.Int64("backend_id", b.ID), zap.Int64("job_epoch", rec.ProcessEpoch),
				zap.Int64("epoch", v.Epoch), zap.Stringer("mutation_state", rec.MutationState),
				zap.Bool("finished_without_result", p.GetFinishedWithoutResult_()))
			proofs = append(proofs, p)
			planned[rec.JobID] = true
		}
		if !v.OutboxDelivered {
			continue
		}
		finished := 0
		for _, rec := range off {
			if rec.MutationState != job.Running || planned[rec.JobID] || rec.ProcessEpoch >= v.Epoch || r.work.busy(rec.JobID) {
				continue
			}
			if finished++; finished > maxSweepJobs {
				break // the rest in a later round: one entry stays bounded
			}
			p := recordIdentity(rec).proof(b.ID, job.ProofProcessEpochGone)
			r.epochGoneFinished(p, rec, v.Epoch, opts, nowMs)
			r.d.log.Info("the backend's new process delivered its outbox without a result for the job; "+afterNoResult(rec, p),
				zap.Int64("job_id", rec.JobID), zap.Int64("backend_id", b.ID),
				zap.Int64("job_epoch", rec.ProcessEpoch), zap.Int64("epoch", v.Epoch))
			proofs = append(proofs, p)
		}
	}
	return r.d.recordTerminationProofs(r.ctx, proofs, "epoch sweep")
}

// epochGoneFinished makes p the P of §13.3: the worker's process is gone
// and the new one delivered its outbox without a result for it.
func (r *round) epochGoneFinished(p *journal.TProof, rec *job.Record, epoch int64, opts options.Options, nowMs int64) {
	t := true
	msg := fmt.Sprintf("the backend process that ran the worker is gone (epoch %d → %d) and its outbox is delivered", rec.ProcessEpoch, epoch)
	after := resolveAfterMs(rec, opts, nowMs)
	p.FinishedWithoutResult_, p.Message, p.ResolveAfterMs = &t, &msg, &after
	raftfsm.MarkOptimizeProof(p, rec, maxDispatchAttempts(opts))
}

// afterNoResult names where a proof with finished_without_result takes
// rec: RESOLVING, or for an OPTIMIZE (never RESOLVING: a crashed OPTIMIZE
// is safe to run again) PENDING while attempts are left, else UNKNOWN.
func afterNoResult(rec *job.Record, p *journal.TProof) string {
	switch {
	case !rec.IsOptimize():
		return "RESOLVING"
	case p.GetReturnToPending():
		return "OPTIMIZE back to PENDING"
	}
	return "OPTIMIZE UNKNOWN (its dispatch attempts are used up)"
}

// resolveAfterMs is when a job whose worker ended now may be read from its
// dataset: at once for a local dataset, after the grace on an object store.
func resolveAfterMs(rec *job.Record, opts options.Options, nowMs int64) int64 {
	if job.IsLocalLocator(rec.Locator) {
		return nowMs
	}
	return nowMs + resolveGraceMs(opts)
}

// lowerEpoch: the backend answers with an epoch lower than the one a job
// was dispatched at. Not a proof of anything (§13.1): warned once per
// (backend, epoch) and counted.
func (r *round) lowerEpoch(backendID int64, rec *job.Record, epoch int64) {
	if !r.work.warnLowerEpoch(backendID, epoch) {
		return
	}
	if o, ok := r.deps.Observer.(EvidenceObserver); ok {
		o.LowerEpoch()
	}
	r.d.log.Warn("backend reports a LOWER process epoch than a job was dispatched at: not a proof, the possible-live slot stays held (two processes behind one address?)",
		zap.Int64("backend_id", backendID), zap.Int64("job_id", rec.JobID),
		zap.Int64("job_epoch", rec.ProcessEpoch), zap.Int64("epoch", epoch))
}
