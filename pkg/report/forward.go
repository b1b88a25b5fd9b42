package report

import (
	"context"
	"errors"

	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/gen-go/wire"
)

// forward passes a follower's envelope, unchanged, to the leader and returns
// the leader's status. The follower judges nothing itself: its replica may
// lag, and only the leader's view may refuse a report for good.
//
// Every failure answers NOT_LEADER ("a master that cannot forward the
// request"): the backend retries, with this master or another.
func (h *Handler) forward(ctx context.Context, jobID int64,
	call func(ctx context.Context, c *adminapi.LanceMasterServiceClient) (*wire.TStatus, error)) *wire.TStatus {
	if h.d.Forward == nil || h.d.Leader == nil {
		return h.drop(jobID, ReasonNoLeader, status(wire.TStatusCode_NOT_LEADER, jobID,
			"this master is not the leader and does not forward reports; send the report to the leader"))
	}
	_, addr := h.d.Leader()
	if addr == "" {
		return h.drop(jobID, ReasonNoLeader, status(wire.TStatusCode_NOT_LEADER, jobID,
			"this master is not the leader and no leader is known; retry shortly"))
	}
	fctx, cancel := context.WithTimeout(ctx, h.d.ForwardTimeout)
	defer cancel()
	var out *wire.TStatus
	err := h.d.Forward(fctx, addr, func(ctx context.Context, c *adminapi.LanceMasterServiceClient) error {
		st, err := call(ctx, c)
		out = st
		return err
	})
	if err == nil && out == nil {
		err = errors.New("the leader answered no status")
	}
	if err != nil {
		h.counts.add(ReasonForwardFailed)
		// The error is the transport's: addresses and causes, never the
		// report's fields.
		h.log.Warn("report: forwarding to the leader failed", zap.Int64("job_id", jobID),
			zap.String("reason", ReasonForwardFailed.String()), zap.String("leader", addr), zap.Error(err))
		return status(wire.TStatusCode_NOT_LEADER, jobID, "this master is not the leader and could not reach it at %s; retry", addr)
	}
	h.counts.add(ReasonForwarded)
	h.log.Debug("report: forwarded to the leader", zap.Int64("job_id", jobID), zap.String("leader", addr),
		zap.Stringer("code", out.StatusCode))
	return out
}

// notLeaderAfterHop answers a report another master forwarded here although
// this master does not lead (leadership moved, or two followers each think
// the other leads): forwarding is one hop only, so it can never loop; the
// backend retries.
func (h *Handler) notLeaderAfterHop(jobID int64) *wire.TStatus {
	return h.drop(jobID, ReasonNoLeader, status(wire.TStatusCode_NOT_LEADER, jobID,
		"this master was forwarded the report but is not the leader; retry"))
}
