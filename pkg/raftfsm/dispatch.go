package raftfsm

import (
	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/raftfsm/jobcodec"
)

// The dispatch family (DESIGN.md §3): M1 MarkRunning, M2/M2'
// CompleteWithResult and P RecordTerminationProof. Each entry is a batch with
// one item result per job, in order; a failed item changes nothing and does
// not stop the others.

func init() {
	register(CommandSpec{Type: CmdMarkRunningBatch, Name: "mark_running", Forward: ForwardNever, Wake: WakeNever}, journal.NewTMarkRunningBatch, applyMarkRunningBatch)
	register(CommandSpec{Type: CmdCompleteBatch, Name: "complete", Forward: ForwardNever, Wake: WakeDispatcher}, journal.NewTCompleteBatch, applyCompleteBatch)
	register(CommandSpec{Type: CmdRecordProofBatch, Name: "record_proof", Forward: ForwardNever, Wake: WakeDispatcher}, journal.NewTRecordProofBatch, applyRecordProofBatch)
	register(CommandSpec{Type: CmdReportBatch, Name: "report_batch", Forward: ForwardNever, Wake: WakeDispatcher}, journal.NewTReportBatch, applyReportBatch)
}

// applyBatch runs one item function per element.
func applyBatch[E any](t *tx, elems []*E, fn func(*tx, *E) (*journal.TItemResult_, error)) (*journal.TApplyResponse, error) {
	items := make([]*journal.TItemResult_, 0, len(elems))
	for _, e := range elems {
		if e == nil {
			items = append(items, itemFail(0, journal.TApplyCode_INVALID, "empty batch item"))
			continue
		}
		it, err := fn(t, e)
		if err != nil {
			return nil, err
		}
		items = append(items, it)
	}
	return respItems(items), nil
}

func applyMarkRunningBatch(t *tx, c *journal.TMarkRunningBatch) (*journal.TApplyResponse, error) {
	return applyBatch(t, c.Jobs, markRunning)
}

// markRunning is M1, PENDING → RUNNING: the dispatch identity is written
// once, the possible-live slot is taken, and dispatch_revision is the new
// rev, which every later report must echo.
func markRunning(t *tx, m *journal.TMarkRunning) (*journal.TItemResult_, error) {
	r := t.job(m.JobID)
	switch {
	case r == nil:
		return itemFail(m.JobID, journal.TApplyCode_NOT_FOUND, "job %d does not exist", m.JobID), nil
	case r.Rev != m.ExpectedRev:
		return itemFail(m.JobID, journal.TApplyCode_CAS_FAILED, "job %d is at rev %d, not %d", m.JobID, r.Rev, m.ExpectedRev), nil
	case r.MutationState != job.Pending:
		return itemFail(m.JobID, journal.TApplyCode_CAS_FAILED, "job %d is %s, not PENDING", m.JobID, r.MutationState), nil
	case !r.HasFenceIdentity():
		return itemFail(m.JobID, journal.TApplyCode_CAS_FAILED, "job %d has no fence identity and cannot be dispatched", m.JobID), nil
	case r.RestoreHold:
		// At most one accepted invocation per job (§13.2): after a restore
		// nothing proves that no other invocation of this job was accepted.
		return itemFail(m.JobID, journal.TApplyCode_CAS_FAILED, "job %d is held by a snapshot restore and is never dispatched again", m.JobID), nil
	}
	if _, ok := backendByID(t.backends.Version(), m.BackendID); !ok {
		return itemFail(m.JobID, journal.TApplyCode_NOT_FOUND, "backend %d is not registered", m.BackendID), nil
	}
	if m.InvocationID == "" {
		return itemFail(m.JobID, journal.TApplyCode_INVALID, "job %d: invocation id is empty", m.JobID), nil
	}
	if err := job.CheckBytes("invocation id", m.InvocationID, job.MaxInvocationIDBytes); err != nil {
		return itemFail(m.JobID, journal.TApplyCode_INVALID, "job %d: %s", m.JobID, errMessage(err)), nil
	}
	// The secret authenticates the reports; an empty one would authenticate
	// nothing. Its value never appears in a message or a log line.
	if m.InvocationSecret == "" || len(m.InvocationSecret) > job.MaxNameBytes {
		return itemFail(m.JobID, journal.TApplyCode_INVALID, "job %d: invocation secret is empty or longer than %d bytes", m.JobID, job.MaxNameBytes), nil
	}
	err := t.transition(r, func(n *job.Record) {
		n.MutationState = job.Running
		n.BackendID = m.BackendID
		n.ProcessEpoch = m.ProcessEpoch
		n.InvocationID = m.InvocationID
		n.InvocationSecret = m.InvocationSecret
		n.DeadlineMs = m.DeadlineMs
		n.LeaderTerm = m.LeaderTerm
		n.PossibleLiveOwned = true
		n.TerminationProof = job.ProofNone
		n.DispatchRevision = r.Rev + 1
		// What an earlier dispatch of this job announced belongs to that
		// dispatch (an M2″ return); the attempt count and the last refusal
		// stay for the operator.
		n.IndexUUID, n.BuildPhase, n.ResolveAfterMs = "", "", 0
		n.DispatchTimeMs = t.now
		n.LeftoverIndexUUID, n.Resources, n.LogTail, n.BuildElapsedMs, n.ProgressTimeMs = "", job.Resources{}, "", 0, 0
		n.ResultDatasetVersion, n.OptimizedIndexes = 0, ""
	})
	if err != nil {
		return nil, err
	}
	return itemOK(m.JobID), nil
}

func applyCompleteBatch(t *tx, c *journal.TCompleteBatch) (*journal.TApplyResponse, error) {
	return applyBatch(t, c.Completions, completeWithResult)
}

// completeWithResult is M2, RUNNING (or RESOLVING) → outcome by the
// classification of the typed result (DESIGN.md §6), M2' when
// never_enqueued is set, and M2″ when return_to_pending is set too.
//
// M2 leaves the slot alone: a result proves nothing about the worker's
// process. M2' releases it with NOT_ENQUEUED in the same entry and is
// NOT_COMMITTED whatever the code classifies to, because a dispatch that was
// provably never enqueued cannot have changed the dataset. M2″ (§13.2) is
// M2' that returns the job to PENDING instead of ending it, with its attempt
// count +1; the leader decides between the two by the attempt bound.
//
// From RESOLVING (the worker is provably gone without a result, §13.3) only
// M2 applies: the worker ran, so "never enqueued" would be false. A result
// with reason RESOLVED_FROM_DATASET is classified by job.ClassifyResolved.
func completeWithResult(t *tx, c *journal.TCompletion) (*journal.TItemResult_, error) {
	r := t.job(c.JobID)
	if r == nil {
		return itemFail(c.JobID, journal.TApplyCode_NOT_FOUND, "job %d does not exist", c.JobID), nil
	}
	neverEnqueued := c.GetNeverEnqueued()
	okState := r.MutationState == job.Running || (r.MutationState == job.Resolving && !neverEnqueued)
	if !okState || !r.MatchesIdentity(c.DispatchRevision, c.InvocationID, c.ProcessEpoch) {
		return itemFail(c.JobID, journal.TApplyCode_CAS_FAILED,
			"job %d is %s and its dispatch identity does not match (a stale or mismatched result)", c.JobID, r.MutationState), nil
	}
	if err := checkEvidence(c.GetIndexUUID(), c.GetLeftoverIndexUUID(), c.GetLogTail()); err != nil {
		return itemFail(c.JobID, journal.TApplyCode_INVALID, "job %d: %s", c.JobID, errMessage(err)), nil
	}
	res := c.Result_
	if res == nil {
		res = &journal.TJobResult_{}
	}
	if neverEnqueued && c.GetReturnToPending() {
		return returnToPending(t, r, res.GetMessage())
	}
	version, optimized, err := completionResult(r, c)
	if err != nil {
		return itemFail(c.JobID, journal.TApplyCode_INVALID, "job %d: %s", c.JobID, errMessage(err)), nil
	}
	code := job.NoTrustedResult
	if res.IsSetCode() {
		code = job.ResultCode(res.GetCode())
	}
	ema := res.GetExternalMetadataAdvanced()
	var cls job.Classification
	if job.CompletionReason(res.GetReason()) == job.ReasonResolvedFromDataset {
		cls = job.ClassifyResolved(code, ema, r.MutationType, r.IfExists)
	} else {
		cls = job.Classify(code, ema, r.MutationType, r.IfExists)
	}
	if neverEnqueued && cls.State != job.NotCommitted {
		cls = job.Classification{State: job.NotCommitted, Refresh: job.RefreshNotRequired, Reason: job.ReasonNone}
	}
	err = t.transition(r, func(n *job.Record) {
		n.MutationState = cls.State
		n.RefreshState = cls.Refresh
		n.Result = job.Result{
			Code:                     code,
			Reason:                   cls.Reason,
			Message:                  t.strs.Get(job.TruncateMessage(res.GetMessage())),
			ExternalMetadataAdvanced: ema,
		}
		if u := c.GetIndexUUID(); u != "" && code == job.NativeOK {
			n.IndexUUID = u
		}
		applyBuildEvidence(n, c.Resources, c.LogTail)
		n.LeftoverIndexUUID = leftover(n, c.GetLeftoverIndexUUID())
		if code == job.NativeOK && cls.State == job.Committed {
			n.ResultDatasetVersion, n.OptimizedIndexes = version, optimized
		}
		if neverEnqueued && n.PossibleLiveOwned && n.TerminationProof == job.ProofNone {
			n.PossibleLiveOwned = false
			n.TerminationProof = job.ProofNotEnqueued
		}
	})
	if err != nil {
		return nil, err
	}
	return itemOK(c.JobID), nil
}

// returnToPending is M2″ (DESIGN.md §13.2): a dispatch proven never
// enqueued releases its slot (NOT_ENQUEUED) and the job is PENDING again,
// its attempt count +1, all in this one entry. The old dispatch identity
// stays on the record until the next M1 replaces it with a fresh one; a
// report naming it is refused, the job not being RUNNING.
func returnToPending(t *tx, r *job.Record, msg string) (*journal.TItemResult_, error) {
	err := t.transition(r, func(n *job.Record) {
		n.MutationState = job.Pending
		n.RefreshState = job.RefreshNotRequired
		n.Result = job.Result{}
		n.DispatchAttempts++
		n.TerminationMessage = job.TruncateMessage(msg)
		if n.PossibleLiveOwned && n.TerminationProof == job.ProofNone {
			n.PossibleLiveOwned = false
			n.TerminationProof = job.ProofNotEnqueued
		}
	})
	if err != nil {
		return nil, err
	}
	return itemOK(r.JobID), nil
}

func applyRecordProofBatch(t *tx, c *journal.TRecordProofBatch) (*journal.TApplyResponse, error) {
	return applyBatch(t, c.Proofs, recordTerminationProof)
}

// recordTerminationProof is P: the worker of this dispatch is provably gone,
// so its possible-live slot is released. It never changes the outcome, the
// fence or the quota, and it applies in any mutation state (a proof may
// arrive before or after the result).
//
// With finished_without_result (DESIGN.md §13.3) the proof also says the
// worker ended without a trusted result: a RUNNING job moves to RESOLVING in
// this same entry (its outcome is then read from the dataset, §13.4), with
// the cause and the uuid the worker announced. That part applies even when
// the slot was already released by an earlier proof (the epoch sweep may
// have released it before the new process delivered its outbox).
//
// An OPTIMIZE never goes to RESOLVING (there is no uuid to resolve): with
// return_to_pending it returns to PENDING, attempts + 1, else it ends
// UNKNOWN with NO_TRUSTED_RESULT (optimize.go). return_to_pending on any
// other job is refused (INVALID).
func recordTerminationProof(t *tx, p *journal.TProof) (*journal.TItemResult_, error) {
	proof := job.TerminationProof(p.Proof)
	if proof == job.ProofNone || !jobcodec.ValidProof(proof) {
		return itemFail(p.JobID, journal.TApplyCode_INVALID, "job %d: %d is not a termination proof", p.JobID, int64(p.Proof)), nil
	}
	finished := p.GetFinishedWithoutResult_()
	if finished && proof == job.ProofNotEnqueued {
		return itemFail(p.JobID, journal.TApplyCode_INVALID, "job %d: NOT_ENQUEUED cannot say a worker finished", p.JobID), nil
	}
	if err := checkEvidence(p.GetIndexUUID(), "", p.GetLogTail()); err != nil {
		return itemFail(p.JobID, journal.TApplyCode_INVALID, "job %d: %s", p.JobID, errMessage(err)), nil
	}
	if err := job.CheckBytes("termination message", p.GetMessage(), job.MaxMessageBytes); err != nil {
		return itemFail(p.JobID, journal.TApplyCode_INVALID, "job %d: %s", p.JobID, errMessage(err)), nil
	}
	r := t.job(p.JobID)
	if r == nil {
		return itemFail(p.JobID, journal.TApplyCode_NOT_FOUND, "job %d does not exist", p.JobID), nil
	}
	if it := checkReturnToPending(p, r); it != nil {
		return it, nil
	}
	if !r.MatchesIdentity(p.DispatchRevision, p.InvocationID, p.ProcessEpoch) || r.BackendID != p.BackendID {
		return itemFail(p.JobID, journal.TApplyCode_CAS_FAILED,
			"job %d: the proof names another dispatch (stale or mismatched)", p.JobID), nil
	}
	releases := r.PossibleLiveOwned && r.TerminationProof == job.ProofNone
	resolves := finished && r.MutationState == job.Running
	if !releases && !resolves {
		// Reports are retried and sweeps race them: a second proof is harmless.
		return itemFail(p.JobID, journal.TApplyCode_NOOP,
			"job %d: the slot is already released (%s)", p.JobID, r.TerminationProof), nil
	}
	err := t.transition(r, func(n *job.Record) {
		applyBuildEvidence(n, p.Resources, p.LogTail)
		if releases {
			n.TerminationProof = proof
			n.PossibleLiveOwned = false
		}
		if resolves && r.IsOptimize() {
			optimizeFinished(n, p, t.strs.Get(p.GetMessage()))
		} else if resolves {
			n.MutationState = job.Resolving
			n.TerminationMessage = t.strs.Get(p.GetMessage())
			n.ResolveAfterMs = p.GetResolveAfterMs()
			if n.IndexUUID == "" {
				n.IndexUUID = p.GetIndexUUID()
			}
		}
	})
	if err != nil {
		return nil, err
	}
	return itemOK(p.JobID), nil
}

// recordProgress is a worker's announcement (DESIGN.md §13.4): the uuid of
// the index it builds, written once, and its phase. Only while RUNNING, by
// the dispatch identity.
func recordProgress(t *tx, p *journal.TProgress) (*journal.TItemResult_, error) {
	if err := job.CheckBytes("index uuid", p.GetIndexUUID(), job.MaxIndexUUIDBytes); err != nil {
		return itemFail(p.JobID, journal.TApplyCode_INVALID, "job %d: %s", p.JobID, errMessage(err)), nil
	}
	if err := job.CheckBytes("build phase", p.GetPhase(), job.MaxPhaseBytes); err != nil {
		return itemFail(p.JobID, journal.TApplyCode_INVALID, "job %d: %s", p.JobID, errMessage(err)), nil
	}
	r := t.job(p.JobID)
	if r == nil {
		return itemFail(p.JobID, journal.TApplyCode_NOT_FOUND, "job %d does not exist", p.JobID), nil
	}
	if r.MutationState != job.Running || !r.MatchesIdentity(p.DispatchRevision, p.InvocationID, p.ProcessEpoch) {
		return itemFail(p.JobID, journal.TApplyCode_CAS_FAILED,
			"job %d is %s and its dispatch identity does not match (a stale or mismatched progress report)", p.JobID, r.MutationState), nil
	}
	uuid, phase := p.GetIndexUUID(), p.GetPhase()
	if uuid != "" && r.IndexUUID != "" && uuid != r.IndexUUID {
		return itemFail(p.JobID, journal.TApplyCode_INVALID,
			"job %d already announced index uuid %s; another uuid is refused", p.JobID, r.IndexUUID), nil
	}
	setUUID := uuid != "" && r.IndexUUID == ""
	setPhase := p.IsSetPhase() && phase != r.BuildPhase
	if !setUUID && !setPhase {
		return itemFail(p.JobID, journal.TApplyCode_NOOP, "job %d: nothing new in the progress report", p.JobID), nil
	}
	err := t.transition(r, func(n *job.Record) {
		if setUUID {
			n.IndexUUID = uuid
		}
		if setPhase {
			n.BuildPhase = t.strs.Get(phase)
		}
		if e := p.GetElapsedMs(); p.IsSetElapsedMs() && e >= 0 {
			n.BuildElapsedMs, n.ProgressTimeMs = e, t.now
		}
	})
	if err != nil {
		return nil, err
	}
	return itemOK(p.JobID), nil
}

func applyReportBatch(t *tx, c *journal.TReportBatch) (*journal.TApplyResponse, error) {
	return applyBatch(t, c.Reports, applyReport)
}

// applyReport is one authenticated report (DESIGN.md §9): its proof through
// P on its own, then its result through M2. Each has its own guard and its
// own answer; neither's refusal stops the other. The item's code is M2's
// when it carries a result, else P's; proof_code is P's whenever it carries
// a proof.
func applyReport(t *tx, r *journal.TReportItem) (*journal.TItemResult_, error) {
	switch {
	case r.Progress != nil && (r.Proof != nil || r.Completion != nil):
		return itemFail(r.Progress.JobID, journal.TApplyCode_INVALID, "a progress report is alone in its item"), nil
	case r.Progress != nil:
		return recordProgress(t, r.Progress)
	case r.Proof == nil && r.Completion == nil:
		return itemFail(0, journal.TApplyCode_INVALID, "a report item carries neither a proof nor a result"), nil
	case r.Proof != nil && r.Completion != nil && r.Proof.JobID != r.Completion.JobID:
		return itemFail(r.Proof.JobID, journal.TApplyCode_INVALID,
			"a report item's proof names job %d and its result job %d", r.Proof.JobID, r.Completion.JobID), nil
	}
	var proof *journal.TItemResult_
	if r.Proof != nil {
		var err error
		if proof, err = recordTerminationProof(t, r.Proof); err != nil {
			return nil, err
		}
		if r.Completion == nil {
			proof.ProofCode, proof.ProofMessage = &proof.Code, proof.Message
			return proof, nil
		}
	}
	it, err := completeWithResult(t, r.Completion)
	if err != nil {
		return nil, err
	}
	if proof != nil {
		it.ProofCode, it.ProofMessage = &proof.Code, proof.Message
	}
	return it, nil
}
