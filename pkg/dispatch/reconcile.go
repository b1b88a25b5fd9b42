package dispatch

import (
	"context"
	"sort"
	"sync"

	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/options"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// Reconcile (DESIGN.md §7, Improvement: term fencing and reconcile). A new
// leader, and the deadline sweep before it gives up, ask each job's backend
// what became of the invocation with query_lance_index_invocations,
// carrying the current term: the backend then refuses every dispatch of an
// older leader, so its answer cannot be overtaken by one.
//
//   - FINISHED with a result: applied exactly as a report would be, after
//     the report path's checks (checkStoredResult: identity, the invocation
//     secret, a wire result code, a wire completion reason, a bounded UTF-8
//     message); M2 with the report's identity quad. A result failing them
//     is ignored. A termination proof CHILD_REAPED / NEVER_LAUNCHED is
//     recorded too, in its own entry first.
//   - FINISHED without a result (no_result) with such a proof: the worker
//     is provably gone without a trusted result (§13.3) → P with
//     finished_without_result: the job moves to RESOLVING in that item, its
//     outcome is then read from the dataset (the resolve step). An OPTIMIZE
//     never goes to RESOLVING: it returns to PENDING (return_to_pending)
//     while attempts are left, else ends UNKNOWN.
//   - UNKNOWN_INVOCATION: the backend, at the job's epoch (the request names
//     it and the backend answers STALE_EPOCH otherwise), never accepted the
//     dispatch, and being asked after the fence it never will → M2″ (back
//     to PENDING, slot released with NOT_ENQUEUED) while the job has
//     dispatch attempts left, else M2' (NOT_COMMITTED). Not for a dispatch
//     this leader itself handed to Submit in this term: its bytes may still
//     be on the way, and the term fence does not cover it.
//   - FORGOTTEN (accepted once, its entry since dropped), QUEUED, RUNNING,
//     any error, a non-OK status (STALE_EPOCH, STALE_LEADER_TERM,
//     OTHER_CLUSTER, ...) or no answer: wait for the report, the epoch sweep
//     or the deadline.

// reconcilePlan is what reconcile found, to be journaled.
type reconcilePlan struct {
	proofs      []*journal.TProof
	completions []*journal.TCompletion
	settled     map[int64]bool // jobs a completion, or a move to RESOLVING, is planned for
}

// queryGroup is one query request: jobs of one backend dispatched at one
// epoch.
type queryGroup struct {
	backendID int64
	epoch     int64
	jobs      []*job.Record
}

// ask starts one query per group (one backend, one epoch), each on its own
// goroutine of the term, so that a slow or hung backend holds neither the
// others nor the round (§13.9). Each journals what its answer proves — its
// proofs first, in their own entry, then its completions in one entry —
// and, with giveUp (the deadline sweep), M2 NO_TRUSTED_RESULT for every
// job of the group its answer does not settle. Groups whose backend is not
// registered are not asked (the caller decides). It returns the jobs asked
// and a function that waits for these calls.
func (r *round) ask(st *raftfsm.State, groups []queryGroup, giveUp bool) (asked map[int64]bool, wait func()) {
	cluster := clusterIDOf(st)
	a := answerCtx{term: r.term, opts: st.Options(), nowMs: r.deps.Clock().UnixMilli()}
	asked = map[int64]bool{}
	var wg sync.WaitGroup
	for _, g := range groups {
		b, ok := st.Backend(g.backendID)
		if !ok {
			continue
		}
		ids := make([]int64, len(g.jobs))
		for i, rec := range g.jobs {
			ids[i] = rec.JobID
			asked[rec.JobID] = true
		}
		wg.Add(1)
		r.work.start(ids, g.backendID, r.deps.SendConcurrency, func() {
			defer wg.Done()
			plan := reconcilePlan{settled: map[int64]bool{}}
			resp, otherEpoch := r.d.query(r.ctx, r.term, cluster, b.Address, g)
			if resp != nil {
				r.d.planFromAnswer(&plan, a, g, resp)
			}
			if giveUp && !r.newProcessUnheard(g, otherEpoch) {
				r.giveUp(&plan, g.jobs)
			}
			if err := r.d.applyReconcile(r.ctx, plan); err != nil && r.ctx.Err() == nil {
				r.d.log.Warn("reconcile: journal failed; the jobs are asked again later",
					zap.Int64("backend_id", g.backendID), zap.Error(err))
			}
		})
	}
	return asked, wg.Wait
}

// groupForQuery groups jobs by (backend, epoch), in that order, at most
// maxQueryIDs per group.
func groupForQuery(recs []*job.Record) []queryGroup {
	sorted := append([]*job.Record(nil), recs...)
	sort.Slice(sorted, func(i, j int) bool {
		a, b := sorted[i], sorted[j]
		if a.BackendID != b.BackendID {
			return a.BackendID < b.BackendID
		}
		if a.ProcessEpoch != b.ProcessEpoch {
			return a.ProcessEpoch < b.ProcessEpoch
		}
		return a.JobID < b.JobID
	})
	var out []queryGroup
	for _, r := range sorted {
		if r.InvocationID == "" {
			continue
		}
		n := len(out)
		if n == 0 || out[n-1].backendID != r.BackendID || out[n-1].epoch != r.ProcessEpoch || len(out[n-1].jobs) == maxQueryIDs {
			out = append(out, queryGroup{backendID: r.BackendID, epoch: r.ProcessEpoch})
			n++
		}
		out[n-1].jobs = append(out[n-1].jobs, r)
	}
	return out
}

// newProcessUnheard reports whether the deadline sweep must not give up
// g's jobs although their deadline passed: the backend answered the query
// STALE_EPOCH (otherEpoch) before this term heard its epoch. The answer
// says another process serves the address. A newer one (the usual case)
// proves the worker gone, and its outbox may still hold the result: the
// epoch path decides, as for a backend heard at a higher epoch (see
// deadlineSweep), once a heartbeat tells the epoch. Until then the jobs
// wait; once heard, an epoch that is not higher proves nothing and the
// sweep gives up as before. (Fault seed 34210: the sweep made a job
// UNKNOWN 4 ms before the new process's outbox delivered its NATIVE_OK.)
func (r *round) newProcessUnheard(g queryGroup, otherEpoch bool) bool {
	if !otherEpoch {
		return false
	}
	_, heard := r.deps.Pool.heardInTerm(g.backendID, r.term)
	return !heard
}

// query asks one backend; a nil answer means no usable answer (wait).
// otherEpoch says the backend refused it as STALE_EPOCH: the epoch asked is
// not its process's.
func (d *Dispatcher) query(ctx context.Context, term uint64, cluster, addr string, g queryGroup) (resp *wire.TQueryInvocationsResponse, otherEpoch bool) {
	ids := make([]string, len(g.jobs))
	for i, r := range g.jobs {
		ids[i] = r.InvocationID
	}
	req := &wire.TQueryInvocationsRequest{LeaderTerm: int64(term), BeProcessEpoch: g.epoch, InvocationIds: ids}
	if cluster != "" {
		req.ClusterID = &cluster
	}
	qctx, cancel := context.WithTimeout(ctx, d.d.QueryTimeout)
	defer cancel()
	resp, err := d.d.Backends.Query(qctx, addr, req)
	switch {
	case err != nil:
		d.log.Info("reconcile query failed; the jobs wait", zap.Int64("backend_id", g.backendID), zap.Error(err))
		return nil, false
	case resp == nil || resp.Status == nil:
		d.log.Info("reconcile query answered without a status; the jobs wait", zap.Int64("backend_id", g.backendID))
		return nil, false
	case resp.Status.StatusCode != wire.TStatusCode_OK:
		d.log.Info("reconcile query refused; the jobs wait", zap.Int64("backend_id", g.backendID),
			zap.Int64("epoch", g.epoch), zap.Stringer("status", resp.Status.StatusCode))
		return nil, resp.Status.StatusCode == wire.TStatusCode_STALE_EPOCH
	}
	return resp, false
}

// answerCtx is what judging the answers of one reconcile pass needs.
type answerCtx struct {
	term  uint64
	opts  options.Options
	nowMs int64
}

// planFromAnswer turns one OK answer into proofs and completions.
func (d *Dispatcher) planFromAnswer(plan *reconcilePlan, a answerCtx, g queryGroup, resp *wire.TQueryInvocationsResponse) {
	byInvocation := make(map[string]*job.Record, len(g.jobs))
	for _, r := range g.jobs {
		byInvocation[r.InvocationID] = r
	}
	for _, st := range resp.Invocations {
		if st == nil {
			continue
		}
		rec := byInvocation[st.InvocationID]
		if rec == nil || plan.settled[rec.JobID] {
			continue // not asked, or answered twice: the first answer counts
		}
		fields := []zap.Field{zap.Int64("job_id", rec.JobID), zap.Int64("backend_id", rec.BackendID)}
		switch st.State {
		case wire.TLanceInvocationState_FINISHED:
			proof, proven := reconciledProof(st)
			if c := d.reconciledResult(rec, st.Result_); c != nil {
				if proven {
					plan.proofs = append(plan.proofs, recordIdentity(rec).proof(rec.BackendID, proof))
				}
				plan.completions = append(plan.completions, c)
				plan.settled[rec.JobID] = true
				continue
			}
			if !proven {
				d.log.Info("reconcile: finished without a usable result or a termination proof; waiting", fields...)
				continue
			}
			p := recordIdentity(rec).proof(rec.BackendID, proof)
			if st.GetNoResult_() && st.Result_ == nil {
				finishedWithoutResult(p, rec, st, a)
				plan.settled[rec.JobID] = true
				d.log.Info("reconcile: the worker ended without a result; "+afterNoResult(rec, p),
					append(fields, zap.Stringer("proof", proof))...)
			}
			plan.proofs = append(plan.proofs, p)
		case wire.TLanceInvocationState_UNKNOWN_INVOCATION:
			if d.mayBeOnTheWire(rec, a.term) {
				d.log.Info("reconcile: backend does not know an invocation this leader sent; waiting", fields...)
				continue
			}
			back := int64(rec.DispatchAttempts)+1 < maxDispatchAttempts(a.opts)
			d.log.Info("reconcile: backend never accepted the invocation; possible-live slot released",
				append(fields, zap.Int64("epoch", rec.ProcessEpoch), zap.Bool("back_to_pending", back))...)
			plan.completions = append(plan.completions, recordIdentity(rec).neverEnqueued(
				"reconcile: the backend never accepted the invocation (UNKNOWN_INVOCATION after the term fence)", back))
			plan.settled[rec.JobID] = true
		case wire.TLanceInvocationState_FORGOTTEN:
			d.log.Info("reconcile: the backend accepted the invocation once and forgot it (FORGOTTEN proves nothing); waiting", fields...)
		}
	}
}

// finishedWithoutResult makes p the P of §13.3 for a reconcile answer
// FINISHED, no_result, with a wire proof: the job moves to RESOLVING.
func finishedWithoutResult(p *journal.TProof, rec *job.Record, st *wire.TInvocationStatus, a answerCtx) {
	t := true
	msg := "the worker ended without a result"
	if cause := st.GetSanitizedMessage(); cause != "" {
		msg = boundedText(msg+": "+cause, job.MaxMessageBytes)
	}
	after := resolveAfterMs(rec, a.opts, a.nowMs)
	p.FinishedWithoutResult_, p.Message, p.ResolveAfterMs = &t, &msg, &after
	// A uuid not of the canonical shape is dropped (the FSM would refuse
	// the whole item for an oversized one), the proof still goes in.
	if u, ok := job.CanonicalUUID(st.GetIndexUUID()); ok && rec.IndexUUID == "" {
		p.IndexUUID = &u
	}
	raftfsm.MarkOptimizeProof(p, rec, maxDispatchAttempts(a.opts))
}

// reconciledProof returns a wire termination proof of a finished
// invocation: the status's own, else the stored report's.
func reconciledProof(st *wire.TInvocationStatus) (job.TerminationProof, bool) {
	p := st.TerminationProof
	if p == nil && st.Result_ != nil {
		p = st.Result_.TerminationProof
	}
	if p == nil {
		return 0, false
	}
	switch *p {
	case wire.TLanceIndexTerminationProof_CHILD_REAPED:
		return job.ProofChildReaped, true
	case wire.TLanceIndexTerminationProof_NEVER_LAUNCHED:
		return job.ProofNeverLaunched, true
	}
	return 0, false
}

// reconciledResult is the M2 of a stored report, as the report path would
// apply it, or nil when the report is unusable (checkStoredResult).
func (d *Dispatcher) reconciledResult(rec *job.Record, rep *wire.TLanceIndexJobReport) *journal.TCompletion {
	if rep == nil {
		return nil
	}
	if why := checkStoredResult(rec, rep); why != "" {
		d.log.Warn("reconcile: the stored result is ignored: "+why, zap.Int64("job_id", rec.JobID))
		return nil
	}
	code := journal.TResultCode(*rep.ResultCode)
	msg := rep.GetSanitizedMessage()
	res := &journal.TJobResult_{Code: &code, Message: &msg, ExternalMetadataAdvanced: rep.ExternalMetadataAdvanced}
	if rep.CompletionReason != nil {
		reason := journal.TCompletionReason(*rep.CompletionReason)
		res.Reason = &reason
	}
	d.log.Info("reconcile: applying the stored result", zap.Int64("job_id", rec.JobID),
		zap.Stringer("result_code", job.ResultCode(code)))
	c := &journal.TCompletion{JobID: rep.JobID, DispatchRevision: rep.DispatchRevision,
		InvocationID: rep.InvocationID, ProcessEpoch: rep.BeProcessEpoch, Result_: res}
	if u, ok := job.CanonicalUUID(rep.GetIndexUUID()); ok && job.ResultCode(code) == job.NativeOK {
		c.IndexUUID = &u
	}
	if job.ResultCode(code) == job.NativeOK {
		raftfsm.RelayResult(c, rec, rep.DatasetVersion, rep.OptimizedIndexes)
	}
	return c
}

// applyReconcile journals a plan: the proofs first, on their own, then the
// completions, each family in one entry.
func (d *Dispatcher) applyReconcile(ctx context.Context, plan reconcilePlan) error {
	if err := d.recordTerminationProofs(ctx, plan.proofs, "reconciled termination proofs"); err != nil {
		return err
	}
	return d.completeWithResults(ctx, plan.completions, "reconciled results")
}
