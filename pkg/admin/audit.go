package admin

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/apache/thrift/lib/go/thrift"
	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// The audit trail (pkg/raftfsm/audit.go). Every admin write stamps its
// command with the caller (auditActor): under mutual TLS the verified
// certificate identity, with the name the client claimed (--as) kept apart;
// without a certificate, the claim. The FSM records the event in the entry
// that makes the change. Raft membership changes and snapshot restores are
// not FSM commands: once the change has succeeded, the leader proposes a
// CmdAudit entry (recordAudit). If that proposal fails, the change stands
// and the master logs that its audit event is missing; the answer to the
// operator is the change's own.

// auditActor is who a change records: the verified caller, else the claim
// ("operator" when the client claimed nothing: an older client, or one
// without --as).
func auditActor(ctx context.Context, claimed string) *journal.TAuditActor {
	claimed = strings.TrimSpace(claimed)
	cn := verifiedCaller(ctx)
	if cn == "" {
		return &journal.TAuditActor{Actor: actorOr(claimed)}
	}
	a := &journal.TAuditActor{Actor: cn, Verified: thrift.BoolPtr(true)}
	if claimed != "" && claimed != cn && claimed != "operator" {
		a.Claimed = &claimed
	}
	return a
}

// claimOf is auditActor of a request's claim, checked first: a claim no
// replica would store is INVALID before anything is changed (the FSM
// refuses it in a command, but a membership change or a restore records
// its event only after the change).
func claimOf(ctx context.Context, claimed string) (*journal.TAuditActor, error) {
	if err := job.ValidateActor("actor", strings.TrimSpace(claimed)); err != nil {
		return nil, toAdminError(err)
	}
	return auditActor(ctx, claimed), nil
}

// recordAudit journals the event of a change made outside the FSM, after
// it succeeded. It returns the error (already logged, saying that the
// audit event is missing) for callers that report it.
func (s *Server) recordAudit(ctx context.Context, actor *journal.TAuditActor, kind, subject, summary string) error {
	cmd := &journal.TAuditCommand{NowMs: s.nowMs(), Kind: kind, Subject: subject, Actor: actor}
	if summary != "" {
		cmd.Summary = &summary
	}
	_, err := s.propose(ctx, raftfsm.CmdAudit, cmd)
	if err != nil {
		s.d.Logger.Error("the change was made, but its audit event is missing from the journal",
			zap.String("kind", kind), zap.String("subject", subject), zap.Error(err))
	}
	return err
}

// ListEvents lists the audit trail, newest first, filtered and paged.
func (s *Server) ListEvents(ctx context.Context, r *adminapi.TListEventsRequest) (*adminapi.TListEventsResponse, error) {
	if r == nil {
		r = &adminapi.TListEventsRequest{}
	}
	for _, f := range []struct{ name, v string }{{"kind", r.GetKind()}, {"subject", r.GetSubject()}, {"actor", r.GetActor()}} {
		if err := job.CheckBytes(f.name, f.v, job.MaxNameBytes); err != nil {
			return nil, toAdminError(err)
		}
	}
	limit := int(r.GetLimit())
	if limit <= 0 {
		limit = defaultListLimit
	}
	if limit > maxListLimit {
		return nil, adminError(adminapi.TErrorCode_INVALID, "limit %d is above %d", limit, maxListLimit)
	}
	if r.GetBeforeSeq() < 0 || r.GetSinceMs() < 0 {
		return nil, adminError(adminapi.TErrorCode_INVALID, "before_seq and since_ms must not be negative")
	}
	st, err := s.readState(ctx, r.GetConsistent())
	if err != nil {
		return nil, err
	}
	f := raftfsm.AuditFilter{Kind: strings.ToLower(strings.TrimSpace(r.GetKind())), Subject: r.GetSubject(),
		Actor: strings.TrimSpace(r.GetActor()), SinceMs: r.GetSinceMs()}
	evs, more := st.AuditEvents(f, r.GetBeforeSeq(), limit)
	out := &adminapi.TListEventsResponse{Events: make([]*adminapi.TAuditEvent, 0, len(evs))}
	if w := s.staleWarning(r.GetConsistent()); w != "" {
		out.StaleWarning = &w
	}
	for _, e := range evs {
		out.Events = append(out.Events, eventView(e))
	}
	if more && len(evs) > 0 {
		next := evs[len(evs)-1].Seq
		out.NextBeforeSeq = &next
	}
	return out, nil
}

func eventView(e *raftfsm.AuditEvent) *adminapi.TAuditEvent {
	v := &adminapi.TAuditEvent{Seq: e.Seq, Index: int64(e.Index), TimeMs: e.TimeMs, Kind: e.Kind, Subject: e.Subject,
		Actor: nonEmpty(e.Actor.Name), Claimed: nonEmpty(e.Actor.Claimed), Summary: nonEmpty(e.Summary)}
	if e.Actor.Verified {
		v.Verified = thrift.BoolPtr(true)
	}
	return v
}

// withOptionChange adds who set an option last, and when, to its view.
func withOptionChange(st *raftfsm.State, o *adminapi.TOption) *adminapi.TOption {
	if c, ok := st.OptionChange(o.Key); ok {
		o.ChangedBy, o.ChangedByClaimed = nonEmpty(c.Actor.Name), nonEmpty(c.Actor.Claimed)
		o.ChangedTimeMs = nonZero(c.TimeMs)
	}
	return o
}

// auditAddMember records add-voter (or add-voter --non-voter).
func (s *Server) auditAddMember(ctx context.Context, who *journal.TAuditActor, id, raftAddr, rpcAddr string, nonVoter bool) {
	kind, to := raftfsm.AuditRaftAddVoter, "voter"
	if nonVoter {
		kind, to = raftfsm.AuditRaftAddNonvoter, "nonvoter"
	}
	summary := "suffrage: - → " + to + "; raft_address: " + raftAddr
	if rpcAddr != "" {
		summary += "; rpc_address: " + rpcAddr
	}
	_ = s.recordAudit(ctx, who, kind, id, summary)
}

// auditRemovePeer records remove-peer.
func (s *Server) auditRemovePeer(ctx context.Context, who *journal.TAuditActor, id string, force bool) {
	summary := "removed from the raft configuration"
	if force {
		summary += " (--force)"
	}
	_ = s.recordAudit(ctx, who, raftfsm.AuditRaftRemovePeer, id, summary)
}

// restoreAuditCommand is the audit event of a snapshot restore, applied
// after the restored state.
func restoreAuditCommand(nowMs int64, who *journal.TAuditActor, res *RestoreResult) *journal.TAuditCommand {
	summary := fmt.Sprintf("journal replaced by a snapshot of index %d (term %d): %d jobs, %d catalogs, %d backends; "+
		"it continues from index %d", res.SnapshotIndex, res.SnapshotTerm, res.Jobs, res.Catalogs, res.Backends, res.Index)
	if len(res.CarriedForward) > 0 || len(res.Held) > 0 {
		summary += fmt.Sprintf("; %d jobs kept their newer record (%s), %d held (%s)",
			len(res.CarriedForward), idList(res.CarriedForward), len(res.Held), idList(res.Held))
	}
	return &journal.TAuditCommand{NowMs: nowMs, Kind: raftfsm.AuditSnapshotRestore,
		Subject: fmt.Sprintf("snapshot of index %d", res.SnapshotIndex), Actor: who, Summary: &summary}
}

// idList is ids as the audit trail shows them: the first 20, then a count.
func idList(ids []int64) string {
	const shown = 20
	if len(ids) == 0 {
		return "none"
	}
	parts := make([]string, 0, min(len(ids), shown))
	for _, id := range ids[:min(len(ids), shown)] {
		parts = append(parts, strconv.FormatInt(id, 10))
	}
	out := "jobs " + strings.Join(parts, ", ")
	if len(ids) > shown {
		out += fmt.Sprintf(" and %d more", len(ids)-shown)
	}
	return out
}
