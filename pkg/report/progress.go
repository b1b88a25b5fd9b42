package report

import (
	"context"
	"unicode/utf8"

	"github.com/apache/thrift/lib/go/thrift"
	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/job"
)

// HandleProgress handles reportLanceIndexJobProgress (DESIGN.md §13.4): a
// running worker's announcement of the uuid of the index it builds, and of
// its phase, delivered through the backend's outbox. Followers forward it
// like the other reports; the leader authenticates it like a result (the
// secret, then the dispatch identity, a refusal for good only once its
// leadership is confirmed) and journals it as a progress item of the same
// group-committed report batch. The FSM writes the uuid once (the same uuid
// again is a no-op, another one is refused) and replaces the phase.
//
// Answers: OK when journaled, when there is nothing new, or when the job has
// already left RUNNING for this dispatch (the announcement is moot; the
// outbox stops retrying); INVALID_ARGUMENT for a malformed uuid or phase, or
// a second, different uuid; otherwise as the other reports.
func (h *Handler) HandleProgress(ctx context.Context, r *wire.TLanceIndexJobProgressReport) *wire.TStatus {
	if r == nil {
		return h.drop(0, ReasonInvalidField, invalid(0, "the report is empty"))
	}
	id := identity{r.JobID, r.DispatchRevision, r.InvocationID, r.BeProcessEpoch}
	rec, st := h.receive(ctx, id, r.InvocationSecret, r.GetForwarded(),
		func(ctx context.Context, c *adminapi.LanceMasterServiceClient) (*wire.TStatus, error) {
			fwd := *r
			fwd.Forwarded = thrift.BoolPtr(true)
			return c.ReportLanceIndexJobProgress(ctx, &fwd)
		})
	if st != nil {
		return st
	}
	uuid, ok := indexUUID(r.IndexUUID)
	if !ok {
		return h.drop(id.jobID, ReasonInvalidField, invalid(id.jobID, "the index uuid is not a uuid"))
	}
	phase := r.GetPhase()
	if len(phase) > maxPhaseBytes || !utf8.ValidString(phase) {
		return h.drop(id.jobID, ReasonInvalidField, invalid(id.jobID, "the phase is longer than 64 bytes or not valid UTF-8"))
	}
	if rec.MutationState != job.Running {
		h.acknowledged(id.jobID, ReasonDuplicate, "progress for a job no longer running")
		return statusOK()
	}
	if (uuid == "" || uuid == rec.IndexUUID) && (!r.IsSetPhase() || phase == rec.BuildPhase) {
		h.acknowledged(id.jobID, ReasonDuplicate, "progress already recorded")
		return statusOK()
	}
	p := &journal.TProgress{JobID: id.jobID, DispatchRevision: id.dispatchRevision, InvocationID: id.invocationID,
		ProcessEpoch: id.epoch}
	if e := r.GetElapsedMs(); r.IsSetElapsedMs() && e >= 0 {
		p.ElapsedMs = thrift.Int64Ptr(e) // the worker's time so far; a negative one is left out
	}
	if uuid != "" {
		p.IndexUUID = thrift.StringPtr(uuid)
	}
	if r.IsSetPhase() {
		p.Phase = thrift.StringPtr(phase)
	}
	o := h.reports.Do(ctx, &journal.TReportItem{Progress: p})
	if o.Err != nil {
		return h.unavailable(id.jobID, o.Err)
	}
	return h.progressAnswer(id, o.Item)
}

// progressAnswer reads the FSM's answer to a progress item.
func (h *Handler) progressAnswer(id identity, it *journal.TItemResult_) *wire.TStatus {
	switch it.Code {
	case journal.TApplyCode_OK:
		h.counts.add(ReasonAppliedProgress)
		h.log.Debug("report: progress recorded", zap.Int64("job_id", id.jobID))
		return statusOK()
	case journal.TApplyCode_NOOP:
		h.acknowledged(id.jobID, ReasonDuplicate, "progress already recorded")
		return statusOK()
	case journal.TApplyCode_NOT_FOUND:
		return h.drop(id.jobID, ReasonUnknownJob, status(wire.TStatusCode_STALE_REPORT, id.jobID, "no such job"))
	case journal.TApplyCode_INVALID:
		return h.drop(id.jobID, ReasonInvalidField, invalid(id.jobID, "the job already announced another index uuid"))
	case journal.TApplyCode_CAS_FAILED:
		// The job left RUNNING since rec was read, or the identity moved on;
		// the entry has been applied here, so re-read.
		cur, ok := h.d.Reader.State().Job(id.jobID)
		switch {
		case !ok:
			return h.drop(id.jobID, ReasonUnknownJob, status(wire.TStatusCode_STALE_REPORT, id.jobID, "no such job"))
		case !cur.MatchesIdentity(id.dispatchRevision, id.invocationID, id.epoch):
			return h.drop(id.jobID, ReasonStaleIdentity, status(wire.TStatusCode_STALE_REPORT, id.jobID, "the report names another dispatch"))
		}
		h.acknowledged(id.jobID, ReasonDuplicate, "progress for a job no longer running")
		return statusOK()
	}
	return h.internal(id.jobID, it)
}
