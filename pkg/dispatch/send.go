package dispatch

import (
	"context"
	"fmt"
	"strconv"

	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
	"github.com/lancemaster/lancemaster/pkg/rpc"
)

// launchSends sends every job its M1 made RUNNING exactly once, each on its
// own goroutine of the term (DESIGN.md §13.9): each outcome is journaled as
// soon as it is known, group-committed with the others, and the round does
// not wait. A refusal marks the backend refused in the pool before it is
// journaled, so no later round picks it before a heartbeat sent after the
// refusal says it accepts.
func (r *round) launchSends(plans []*dispatchPlan) {
	for _, p := range plans {
		r.work.start([]int64{p.rec.JobID}, p.mark.BackendID, r.deps.SendConcurrency, func() {
			c, refused := r.sendOnce(p)
			if refused {
				r.deps.Pool.MarkRefused(p.mark.BackendID, r.term)
			}
			if c == nil {
				return
			}
			it := r.work.complete(c, "send classification")
			if it != nil && it.Code == journal.TApplyCode_OK && c.GetReturnToPending() {
				r.deps.Waker.Wake() // the job is PENDING again: dispatch it elsewhere now
			}
		})
	}
}

// sendOnce rechecks, sends and classifies one dispatch. It returns the
// completion to journal (M2, M2' or M2″), or nil when there is nothing to
// journal: not sent (the job converges by reconcile, report or deadline),
// or enqueued (the report or the deadline decides); refused says the
// dispatch was proven never enqueued.
func (r *round) sendOnce(p *dispatchPlan) (c *journal.TCompletion, refused bool) {
	id := p.rec.JobID
	if h := r.deps.Hooks.BeforeSend; h != nil {
		if err := h(id); err != nil {
			r.deps.Observer.Dispatched(OutcomeRecheckFailed)
			r.d.log.Info("dispatch not sent: aborted before the send", zap.Int64("job_id", id), zap.Error(err))
			return nil, false
		}
	}
	if why := r.recheck(p); why != "" {
		r.deps.Observer.Dispatched(OutcomeRecheckFailed)
		r.d.log.Info("dispatch not sent: the pre-send recheck failed", zap.Int64("job_id", id), zap.String("reason", why))
		return nil, false
	}
	r.work.noteSent(id, p.mark.InvocationID)
	ctx, cancel := context.WithTimeout(r.ctx, r.deps.SendTimeout)
	status, err := r.deps.Backends.Submit(ctx, p.addr, p.request)
	cancel()

	ident := planIdentity(p)
	fields := []zap.Field{zap.Int64("job_id", id), zap.Int64("backend_id", p.mark.BackendID)}
	switch outcome, msg := classifySend(status, err); outcome {
	case sendEnqueued:
		r.deps.Observer.Dispatched(OutcomeAccepted)
		r.d.log.Debug("dispatch enqueued", fields...)
		return nil, false
	case sendNeverEnqueued:
		c := ident.neverEnqueued(msg, p.returnToPending)
		if p.returnToPending {
			r.deps.Observer.Dispatched(OutcomeReturnedToPending)
			r.d.log.Info("dispatch never enqueued; back to PENDING, possible-live slot released",
				append(fields, zap.Int32("attempts", p.rec.DispatchAttempts+1), zap.String("reason", msg), zapSendErr(err))...)
		} else {
			r.deps.Observer.Dispatched(OutcomeNotEnqueued)
			r.d.log.Warn("dispatch never enqueued and its attempts are used up; NOT_COMMITTED, possible-live slot released",
				append(fields, zap.Int32("attempts", p.rec.DispatchAttempts+1), zap.String("reason", msg), zapSendErr(err))...)
		}
		return c, true
	default:
		r.deps.Observer.Dispatched(OutcomeUnknown)
		r.d.log.Warn("dispatch outcome unknown (bytes may have left); UNKNOWN, possible-live slot kept",
			append(fields, zap.String("reason", msg), zapSendErr(err))...)
		return ident.completion(job.NoTrustedResult, msg, false), false
	}
}

// recheck is done immediately before the send: this node still leads in
// the round's term, and the record is RUNNING with the dispatch revision
// and invocation id the M1 wrote. It returns why not, or "".
func (r *round) recheck(p *dispatchPlan) string {
	if r.ctx.Err() != nil {
		return "the leadership term is over"
	}
	prop := r.deps.Proposer
	if !prop.IsLeader() {
		return "not the leader"
	}
	if t := prop.LeaderTerm(); t != r.term {
		return fmt.Sprintf("the leader term is %d, not %d", t, r.term)
	}
	if t, ok := r.deps.Term(r.ctx); !ok || t != r.term {
		return "the context's leader term changed"
	}
	rec, ok := r.deps.Reader.State().Job(p.rec.JobID)
	switch {
	case !ok:
		return "the job no longer exists"
	case rec.MutationState != job.Running:
		return "the job is " + rec.MutationState.String()
	case rec.DispatchRevision != p.rec.Rev+1 || rec.InvocationID != p.mark.InvocationID:
		return "the job carries another dispatch identity"
	}
	return ""
}

// sendOutcome is what a send proves (DESIGN.md §7).
type sendOutcome int

const (
	sendEnqueued      sendOutcome = iota // OK: the report or the deadline decides
	sendNeverEnqueued                    // M2″ (back to PENDING) or M2' (NOT_COMMITTED); slot released (NOT_ENQUEUED)
	sendAmbiguous                        // M2 NO_TRUSTED_RESULT: UNKNOWN, slot kept
)

// classifySend reads only typed facts: whether bytes may have left, an
// UNKNOWN_METHOD answer, and the status code. The message it returns names
// the code and never carries error text (which could echo request content).
func classifySend(st *wire.TStatus, err error) (sendOutcome, string) {
	switch {
	case err != nil && rpc.NotSent(err):
		return sendNeverEnqueued, "dispatch never sent: the connection to the backend was not established"
	case err != nil && rpc.IsUnknownMethod(err):
		return sendNeverEnqueued, "dispatch refused: the backend does not implement submit_lance_index_job (UNKNOWN_METHOD)"
	case err != nil:
		return sendAmbiguous, "dispatch send failed after bytes may have left; no trusted result"
	case st == nil:
		return sendAmbiguous, "dispatch send returned no status; no trusted result"
	case st.StatusCode != wire.TStatusCode_OK:
		return sendNeverEnqueued, "dispatch refused by the backend with status " + statusName(st.StatusCode) + "; never enqueued"
	}
	return sendEnqueued, ""
}

// zapSendErr logs a client error: rpc errors carry the operation, the
// address and the transport's message, never request content.
func zapSendErr(err error) zap.Field {
	if err == nil {
		return zap.Skip()
	}
	return zap.Error(err)
}

// ---- dispatch identities and batches ----------------------------------------------

// identity is the quad every M2 and P must name (DESIGN.md §3).
type identity struct {
	jobID            int64
	dispatchRevision int64
	invocationID     string
	epoch            int64
}

func recordIdentity(r *job.Record) identity {
	return identity{r.JobID, r.DispatchRevision, r.InvocationID, r.ProcessEpoch}
}

// planIdentity is the identity the plan's M1 gave its record.
func planIdentity(p *dispatchPlan) identity {
	return identity{p.rec.JobID, p.rec.Rev + 1, p.mark.InvocationID, p.mark.ProcessEpoch}
}

// completion is an M2 (or M2' with neverEnqueued) naming this identity.
func (id identity) completion(code job.ResultCode, msg string, neverEnqueued bool) *journal.TCompletion {
	c := journal.TResultCode(code)
	m := msg
	out := &journal.TCompletion{JobID: id.jobID, DispatchRevision: id.dispatchRevision,
		InvocationID: id.invocationID, ProcessEpoch: id.epoch,
		Result_: &journal.TJobResult_{Code: &c, Message: &m}}
	if neverEnqueued {
		t := true
		out.NeverEnqueued = &t
	}
	return out
}

// neverEnqueued is the completion of a dispatch proven never enqueued
// (§13.2): M2″ (back to PENDING, attempts + 1) when returnToPending, else
// M2' (NOT_COMMITTED). Either releases the slot with NOT_ENQUEUED.
func (id identity) neverEnqueued(msg string, returnToPending bool) *journal.TCompletion {
	c := id.completion(job.PreInvocationResourceRejected, msg, true)
	if returnToPending {
		t := true
		c.ReturnToPending = &t
	}
	return c
}

// proof is a P (RecordTerminationProof) naming this identity on a backend.
func (id identity) proof(backendID int64, p job.TerminationProof) *journal.TProof {
	return &journal.TProof{JobID: id.jobID, DispatchRevision: id.dispatchRevision, InvocationID: id.invocationID,
		ProcessEpoch: id.epoch, BackendID: backendID, Proof: journal.TTerminationProof(p)}
}

// completeWithResults journals M2/M2' items as one CompleteBatch entry
// (nothing for an empty batch). A failed item (a report got there first)
// is logged, not an error.
func (d *Dispatcher) completeWithResults(ctx context.Context, batch []*journal.TCompletion, what string) error {
	if len(batch) == 0 {
		return nil
	}
	resp, err := propose(ctx, d.d.Proposer, raftfsm.CmdCompleteBatch, &journal.TCompleteBatch{NowMs: d.d.Clock().UnixMilli(), Completions: batch})
	return d.checkBatch(resp, err, what, len(batch))
}

// recordTerminationProofs journals P items as one RecordProofBatch entry.
func (d *Dispatcher) recordTerminationProofs(ctx context.Context, batch []*journal.TProof, what string) error {
	if len(batch) == 0 {
		return nil
	}
	resp, err := propose(ctx, d.d.Proposer, raftfsm.CmdRecordProofBatch, &journal.TRecordProofBatch{NowMs: d.d.Clock().UnixMilli(), Proofs: batch})
	return d.checkBatch(resp, err, what, len(batch))
}

func (d *Dispatcher) checkBatch(resp *journal.TApplyResponse, err error, what string, n int) error {
	if err != nil {
		return fmt.Errorf("journal %s (%d items): %w", what, n, err)
	}
	if resp.Code != journal.TApplyCode_OK {
		return fmt.Errorf("journal %s (%d items): %s: %s", what, n, resp.Code, resp.GetMessage())
	}
	for _, it := range resp.Items {
		if it.Code != journal.TApplyCode_OK {
			d.log.Info("journal item not applied (stale or already settled)", zap.String("what", what),
				zap.Int64("job_id", it.JobID), zap.Stringer("code", it.Code), zap.String("reason", it.GetMessage()))
		}
	}
	return nil
}

// statusName is a status code's name, or its raw value when it is outside
// the enum this master knows (a newer backend's, or a broken one's): the
// journal keeps what the backend said, never "<UNSET>".
func statusName(c wire.TStatusCode) string {
	if _, err := wire.TStatusCodeFromString(c.String()); err == nil {
		return c.String()
	}
	return strconv.FormatInt(int64(c), 10) + " (not a status this master knows)"
}
