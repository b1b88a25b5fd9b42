package report

import (
	"context"
	"errors"

	"github.com/apache/thrift/lib/go/thrift"
	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// authenticate is steps 1–2 on the leader: identity bounds, the secret, the
// dispatch identity. A failure drops the whole envelope; the returned record
// is the one every later step judges.
func (h *Handler) authenticate(ctx context.Context, id identity, secret *string) (*job.Record, *wire.TStatus) {
	if err := job.CheckBytes("invocation id", id.invocationID, job.MaxInvocationIDBytes); err != nil {
		// No dispatch can carry such an id: nothing in the envelope can apply.
		return nil, h.drop(id.jobID, ReasonInvalidField, invalid(id.jobID, "the invocation id is longer than 256 bytes or not valid UTF-8"))
	}
	if st := h.catchUp(ctx); st != nil {
		return nil, st
	}
	// The term before the view: a refusal judged on this view is given only
	// once this master is confirmed to lead in that same term (refuse).
	term := h.d.Proposer.LeaderTerm()
	rec, ok := h.d.Reader.State().Job(id.jobID)
	if !ok {
		return nil, h.refuse(ctx, term, id.jobID, ReasonUnknownJob,
			status(wire.TStatusCode_STALE_REPORT, id.jobID, "no such job (never admitted, or already collected)"))
	}
	if !job.SecretMatches(secret, rec.InvocationSecret) {
		return nil, h.refuse(ctx, term, id.jobID, ReasonUnauthenticated,
			status(wire.TStatusCode_UNAUTHENTICATED, id.jobID, "the report does not carry this dispatch's invocation secret"))
	}
	if !rec.MatchesIdentity(id.dispatchRevision, id.invocationID, id.epoch) {
		return nil, h.refuse(ctx, term, id.jobID, ReasonStaleIdentity,
			status(wire.TStatusCode_STALE_REPORT, id.jobID, "the report names another dispatch (revision, invocation id or process epoch)"))
	}
	return rec, nil
}

// refuse answers a refusal for good that was judged on this replica's view
// (UNAUTHENTICATED, STALE_REPORT) only once this master has confirmed it
// still leads in term, the leader term read before that view
// (Deps.VerifyLeader, DESIGN.md §13.5): a leader deposed without knowing it
// may lack the entries that would make the report valid (the newer
// leader's dispatch). Unconfirmed, the answer is NOT_LEADER and the backend
// retries, with this master or another.
func (h *Handler) refuse(ctx context.Context, term uint64, jobID int64, r Reason, st *wire.TStatus) *wire.TStatus {
	if h.d.VerifyLeader != nil {
		if err := h.d.VerifyLeader(ctx, term); err != nil {
			h.counts.add(ReasonUnconfirmed)
			h.log.Info("report: leadership not confirmed; the refusal is not given", zap.Int64("job_id", jobID),
				zap.String("reason", ReasonUnconfirmed.String()), zap.String("would_be", r.String()), zap.Error(err))
			return status(wire.TStatusCode_NOT_LEADER, jobID, "this master could not confirm it still leads; retry")
		}
	}
	return h.drop(jobID, r, st)
}

// catchUp runs Deps.CatchUp once per leader term; see its doc.
func (h *Handler) catchUp(ctx context.Context) *wire.TStatus {
	if h.d.CatchUp == nil {
		return nil
	}
	term := h.d.Proposer.LeaderTerm()
	if term != 0 && h.caughtUp.Load() == term {
		return nil
	}
	h.catchMu.Lock()
	defer h.catchMu.Unlock()
	if term != 0 && h.caughtUp.Load() == term {
		return nil
	}
	if err := h.d.CatchUp(ctx); err != nil {
		return h.unavailable(0, err)
	}
	h.caughtUp.Store(term)
	return nil
}

// journal is steps 3 and 5 in one entry: the report's proof through P (when
// the record still lacks one, or when term says the worker ended without a
// result and the job is still RUNNING: P then moves it to RESOLVING) and its
// result through M2 (when res is set and the job is RUNNING or RESOLVING for
// this dispatch) go into one item of a report batch,
// which the FSM applies P first, each half on its own guard (DESIGN.md §9).
// pb is what a termination report says of the build (resources, log tail),
// carried by P.
// One entry instead of two halves a report's journal latency. The answers
// are proofSt for P and resultSt for M2: nil means applied or acknowledged
// (resultSt is then statusOK when a result was given).
func (h *Handler) journal(ctx context.Context, rec *job.Record, id identity, proof job.TerminationProof,
	term *termination, pb buildInfo, res *parsedResult) (proofSt, resultSt *wire.TStatus) {
	item := &journal.TReportItem{}
	if proof != job.ProofNone {
		resolves := term != nil && rec.MutationState == job.Running
		if !resolves && (!rec.PossibleLiveOwned || rec.TerminationProof != job.ProofNone) {
			h.acknowledged(rec.JobID, ReasonDuplicate, "termination proof already recorded")
		} else {
			item.Proof = &journal.TProof{JobID: rec.JobID, DispatchRevision: rec.DispatchRevision,
				InvocationID: rec.InvocationID, ProcessEpoch: rec.ProcessEpoch, BackendID: rec.BackendID,
				Proof: journal.TTerminationProof(proof)}
			pb.onProof(item.Proof)
			if term != nil {
				item.Proof.FinishedWithoutResult_ = thrift.BoolPtr(true)
				item.Proof.ResolveAfterMs = thrift.Int64Ptr(term.resolveAfterMs)
				if term.message != "" {
					item.Proof.Message = thrift.StringPtr(term.message)
				}
				if term.indexUUID != "" {
					item.Proof.IndexUUID = thrift.StringPtr(term.indexUUID)
				}
				// An OPTIMIZE never goes to RESOLVING: a crashed OPTIMIZE
				// is safe to run again, back to PENDING while attempts are
				// left (return_to_pending), else UNKNOWN.
				raftfsm.MarkOptimizeProof(item.Proof, rec, h.d.Reader.State().Options().MaxDispatchAttempts)
			}
		}
	}
	if res != nil {
		if rec.MutationState != job.Running && rec.MutationState != job.Resolving {
			resultSt = h.acknowledge(rec, res.code)
		} else {
			item.Completion = completion(id, *res)
		}
	}
	if item.Proof == nil && item.Completion == nil {
		return nil, resultSt
	}
	o := h.reports.Do(ctx, item)
	if o.Err != nil {
		st := h.unavailable(rec.JobID, o.Err)
		if item.Proof != nil {
			proofSt = st
		}
		if item.Completion != nil {
			resultSt = st
		}
		return proofSt, resultSt
	}
	if item.Proof != nil {
		proofSt = h.proofAnswer(rec.JobID, proof, o.Item)
	}
	if item.Completion != nil {
		resultSt = h.resultAnswer(id, *res, o.Item)
	}
	return proofSt, resultSt
}

// proofAnswer reads P's answer in a report item. nil: applied or
// acknowledged.
func (h *Handler) proofAnswer(jobID int64, p job.TerminationProof, it *journal.TItemResult_) *wire.TStatus {
	if !it.IsSetProofCode() {
		return h.internal(jobID, it)
	}
	switch it.GetProofCode() {
	case journal.TApplyCode_OK:
		h.counts.add(ReasonAppliedProof)
		h.log.Debug("report: termination proof recorded", zap.Int64("job_id", jobID), zap.Stringer("proof", p))
		h.wake()
		return nil
	case journal.TApplyCode_NOOP:
		h.acknowledged(jobID, ReasonDuplicate, "termination proof already recorded")
		return nil
	case journal.TApplyCode_NOT_FOUND:
		return h.drop(jobID, ReasonUnknownJob, status(wire.TStatusCode_STALE_REPORT, jobID, "no such job"))
	case journal.TApplyCode_CAS_FAILED:
		return h.drop(jobID, ReasonStaleIdentity, status(wire.TStatusCode_STALE_REPORT, jobID, "the proof names another dispatch"))
	}
	return h.internal(jobID, &journal.TItemResult_{JobID: jobID, Code: it.GetProofCode(), Message: it.ProofMessage})
}

// resultAnswer reads M2's answer in a report item: statusOK when applied or
// acknowledged.
func (h *Handler) resultAnswer(id identity, res parsedResult, it *journal.TItemResult_) *wire.TStatus {
	switch it.Code {
	case journal.TApplyCode_OK:
		h.counts.add(ReasonAppliedResult)
		h.log.Debug("report: result applied", zap.Int64("job_id", id.jobID), zap.Stringer("result_code", res.code))
		h.wake()
		return statusOK()
	case journal.TApplyCode_NOT_FOUND:
		return h.drop(id.jobID, ReasonUnknownJob, status(wire.TStatusCode_STALE_REPORT, id.jobID, "no such job"))
	case journal.TApplyCode_CAS_FAILED:
		// Something else completed it since rec was read (the deadline sweep,
		// reconcile, a concurrent copy of this report). The entry has been
		// applied here when Propose returned on the leader, so re-read.
		cur, ok := h.d.Reader.State().Job(id.jobID)
		switch {
		case !ok:
			return h.drop(id.jobID, ReasonUnknownJob, status(wire.TStatusCode_STALE_REPORT, id.jobID, "no such job"))
		case !cur.MatchesIdentity(id.dispatchRevision, id.invocationID, id.epoch):
			return h.drop(id.jobID, ReasonStaleIdentity, status(wire.TStatusCode_STALE_REPORT, id.jobID, "the report names another dispatch"))
		case cur.MutationState == job.Running || cur.MutationState == job.Resolving:
			// Only a replica behind the entry it just wrote sees this (the
			// command was forwarded after a leadership change): retry.
			return h.unavailable(id.jobID, errors.New("this replica has not applied the guard's answer yet"))
		}
		return h.acknowledge(cur, res.code)
	}
	return h.internal(id.jobID, it)
}

// acknowledge answers OK for an authenticated result whose job already has
// an outcome for this dispatch: the backend's outbox stops retrying, and
// nothing is written. The outcome stands even when the codes differ (a
// worker that finished after its deadline: UNKNOWN never turns known, §3).
func (h *Handler) acknowledge(rec *job.Record, reported job.ResultCode) *wire.TStatus {
	if rec.Result.Code == reported {
		h.acknowledged(rec.JobID, ReasonDuplicate, "result already applied")
		return statusOK()
	}
	h.counts.add(ReasonLateResult)
	h.log.Warn("report: result for a job that already has another outcome; acknowledged, not applied",
		zap.Int64("job_id", rec.JobID), zap.String("reason", ReasonLateResult.String()),
		zap.Stringer("state", rec.MutationState), zap.Stringer("recorded_code", rec.Result.Code),
		zap.Stringer("reported_code", reported))
	return statusOK()
}

func (h *Handler) acknowledged(jobID int64, r Reason, what string) {
	h.counts.add(r)
	h.log.Debug("report: "+what+"; acknowledged", zap.Int64("job_id", jobID), zap.String("reason", r.String()))
}

// drop counts and logs a dropped envelope (or part) and returns st. The log
// is sampled per reason (dropLog); the counters are exact.
// Authentication and parse failures are Warn: a backend (or someone else)
// sends what it should not. Stale and unknown ones are Info: retries and
// collected jobs produce them in normal operation.
func (h *Handler) drop(jobID int64, r Reason, st *wire.TStatus) *wire.TStatus {
	h.counts.add(r)
	lvl := zap.WarnLevel
	if r == ReasonUnknownJob || r == ReasonStaleIdentity || r == ReasonNoLeader {
		lvl = zap.InfoLevel
	}
	h.dropLog.Log(lvl, "report dropped: "+r.String(), zap.Int64("job_id", jobID), zap.String("reason", r.String()),
		zap.Stringer("code", st.StatusCode))
	return st
}

// unavailable answers a journal (or catch-up) failure: the backend retries,
// which is harmless. err comes from the cluster and carries no request
// content.
func (h *Handler) unavailable(jobID int64, err error) *wire.TStatus {
	h.counts.add(ReasonUnavailable)
	code := wire.TStatusCode_SERVICE_UNAVAILABLE
	msg := "the journal could not be written now; retry"
	if errors.Is(err, raftfsm.ErrNotLeader) || errors.Is(err, raftfsm.ErrNoLeader) {
		code, msg = wire.TStatusCode_NOT_LEADER, "this master stopped leading; retry with another master"
	}
	h.log.Warn("report: not applied", zap.Int64("job_id", jobID), zap.String("reason", ReasonUnavailable.String()),
		zap.Stringer("code", code), zap.Error(err))
	return status(code, jobID, "%s", msg)
}

func (h *Handler) internal(jobID int64, it *journal.TItemResult_) *wire.TStatus {
	h.counts.add(ReasonInternal)
	h.log.Error("report: unexpected apply answer", zap.Int64("job_id", jobID),
		zap.String("reason", ReasonInternal.String()), zap.Stringer("apply_code", it.Code),
		zap.String("apply_message", it.GetMessage())) // FSM messages carry ids, never values
	return status(wire.TStatusCode_INTERNAL_ERROR, jobID, "unexpected journal answer %v; see the master's log", it.Code)
}
