package dispatch

import (
	"context"
	"crypto/subtle"
	"sort"
	"sync"

	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/job"
)

// Reconcile (DESIGN.md §7, Improvement: term fencing and reconcile). A new
// leader, and the deadline sweep before it gives up, ask each job's backend
// what became of the invocation with query_lance_index_invocations,
// carrying the current term: the backend then refuses every dispatch of an
// older leader, so its answer cannot be overtaken by one.
//
//   - FINISHED with a result: applied exactly as a report would be (M2 with
//     the report's identity quad; a result code outside 1..12 is ignored).
//     A termination proof CHILD_REAPED / NEVER_LAUNCHED is recorded too, in
//     its own entry first.
//   - UNKNOWN_INVOCATION: the backend, at the job's epoch (the request names
//     it and the backend answers STALE_EPOCH otherwise), never accepted the
//     dispatch → M2' (NOT_COMMITTED, slot released with NOT_ENQUEUED). Not
//     for a dispatch this leader itself handed to Submit in this term: its
//     bytes may still be on the way, and the term fence does not cover it.
//   - QUEUED, RUNNING, any error, a non-OK status (STALE_EPOCH,
//     STALE_LEADER_TERM, ...) or no answer: wait for the report, the epoch
//     sweep or the deadline.

// reconcilePlan is what reconcile found, to be journaled.
type reconcilePlan struct {
	proofs      []*journal.TProof
	completions []*journal.TCompletion
	settled     map[int64]bool // jobs a completion is planned for
}

// queryGroup is one query request: jobs of one backend dispatched at one
// epoch.
type queryGroup struct {
	backendID int64
	epoch     int64
	jobs      []*job.Record
}

// reconcile queries the backends of recs (in parallel, bounded) and plans
// what their answers prove. It journals nothing itself.
func (d *Dispatcher) reconcile(ctx context.Context, term uint64, recs []*job.Record) reconcilePlan {
	plan := reconcilePlan{settled: map[int64]bool{}}
	groups := groupForQuery(recs)
	answers := make([]*wire.TQueryInvocationsResponse, len(groups))
	st := d.d.Reader.State()
	sem := make(chan struct{}, d.d.SendConcurrency)
	var wg sync.WaitGroup
	for i, g := range groups {
		b, ok := st.Backend(g.backendID)
		if !ok {
			continue // an unregistered backend cannot be asked; the jobs wait
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			answers[i] = d.query(ctx, term, b.Address, g)
		}()
	}
	wg.Wait()
	for i, g := range groups {
		if answers[i] != nil {
			d.planFromAnswer(&plan, term, g, answers[i])
		}
	}
	return plan
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

// query asks one backend; nil means no usable answer (wait).
func (d *Dispatcher) query(ctx context.Context, term uint64, addr string, g queryGroup) *wire.TQueryInvocationsResponse {
	ids := make([]string, len(g.jobs))
	for i, r := range g.jobs {
		ids[i] = r.InvocationID
	}
	qctx, cancel := context.WithTimeout(ctx, d.d.QueryTimeout)
	defer cancel()
	resp, err := d.d.Backends.Query(qctx, addr, &wire.TQueryInvocationsRequest{
		LeaderTerm: int64(term), BeProcessEpoch: g.epoch, InvocationIds: ids})
	switch {
	case err != nil:
		d.log.Info("reconcile query failed; the jobs wait", zap.Int64("backend_id", g.backendID), zap.Error(err))
		return nil
	case resp == nil || resp.Status == nil:
		d.log.Info("reconcile query answered without a status; the jobs wait", zap.Int64("backend_id", g.backendID))
		return nil
	case resp.Status.StatusCode != wire.TStatusCode_OK:
		d.log.Info("reconcile query refused; the jobs wait", zap.Int64("backend_id", g.backendID),
			zap.Int64("epoch", g.epoch), zap.Stringer("status", resp.Status.StatusCode))
		return nil
	}
	return resp
}

// planFromAnswer turns one OK answer into proofs and completions.
func (d *Dispatcher) planFromAnswer(plan *reconcilePlan, term uint64, g queryGroup, resp *wire.TQueryInvocationsResponse) {
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
		switch st.State {
		case wire.TLanceInvocationState_FINISHED:
			if p, ok := reconciledProof(st); ok {
				plan.proofs = append(plan.proofs, recordIdentity(rec).proof(rec.BackendID, p))
			}
			if c := d.reconciledResult(rec, st.Result_); c != nil {
				plan.completions = append(plan.completions, c)
				plan.settled[rec.JobID] = true
			}
		case wire.TLanceInvocationState_UNKNOWN_INVOCATION:
			if d.mayBeOnTheWire(rec, term) {
				d.log.Info("reconcile: backend does not know an invocation this leader sent; waiting",
					zap.Int64("job_id", rec.JobID), zap.Int64("backend_id", rec.BackendID))
				continue
			}
			d.log.Info("reconcile: backend never accepted the invocation; NOT_COMMITTED, possible-live slot released",
				zap.Int64("job_id", rec.JobID), zap.Int64("backend_id", rec.BackendID), zap.Int64("epoch", rec.ProcessEpoch))
			plan.completions = append(plan.completions, recordIdentity(rec).completion(job.PreInvocationResourceRejected,
				"reconcile: the backend never accepted the invocation (UNKNOWN_INVOCATION after the term fence)", true))
			plan.settled[rec.JobID] = true
		}
	}
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
// apply it, or nil when the report is unusable (another identity, another
// secret, no code or a code outside 1..12). The message is bounded by the
// FSM.
func (d *Dispatcher) reconciledResult(rec *job.Record, rep *wire.TLanceIndexJobReport) *journal.TCompletion {
	if rep == nil {
		return nil
	}
	if rep.JobID != rec.JobID || rep.InvocationID != rec.InvocationID ||
		rep.DispatchRevision != rec.DispatchRevision || rep.BeProcessEpoch != rec.ProcessEpoch {
		d.log.Info("reconcile: stored result names another dispatch; ignored", zap.Int64("job_id", rec.JobID))
		return nil
	}
	if rep.InvocationSecret != nil && subtle.ConstantTimeCompare([]byte(*rep.InvocationSecret), []byte(rec.InvocationSecret)) != 1 {
		d.log.Warn("reconcile: stored result carries a wrong invocation secret; ignored", zap.Int64("job_id", rec.JobID))
		return nil
	}
	if rep.ResultCode == nil || !job.ResultCode(*rep.ResultCode).IsWire() {
		d.log.Info("reconcile: stored result has no valid result code; ignored", zap.Int64("job_id", rec.JobID))
		return nil
	}
	code := journal.TResultCode(*rep.ResultCode)
	res := &journal.TJobResult_{Code: &code, Message: rep.SanitizedMessage, ExternalMetadataAdvanced: rep.ExternalMetadataAdvanced}
	if rep.CompletionReason != nil {
		reason := journal.TCompletionReason(*rep.CompletionReason)
		res.Reason = &reason
	}
	d.log.Info("reconcile: applying the stored result", zap.Int64("job_id", rec.JobID),
		zap.Stringer("result_code", job.ResultCode(code)))
	return &journal.TCompletion{JobID: rep.JobID, DispatchRevision: rep.DispatchRevision,
		InvocationID: rep.InvocationID, ProcessEpoch: rep.BeProcessEpoch, Result_: res}
}

// applyReconcile journals a plan: the proofs first, on their own, then the
// completions, each family in one entry.
func (d *Dispatcher) applyReconcile(ctx context.Context, plan reconcilePlan) error {
	if err := d.recordTerminationProofs(ctx, plan.proofs, "reconciled termination proofs"); err != nil {
		return err
	}
	return d.completeWithResults(ctx, plan.completions, "reconciled results")
}
