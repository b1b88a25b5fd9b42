package admin

import (
	"context"

	"github.com/apache/thrift/lib/go/thrift"
	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// backends show and backends drain / undrain (docs/cli.md).

// BackendState is what the leader's heartbeats of this term say of a
// backend beyond BackendView and BackendHeard (dispatch.Pool.Status).
type BackendState struct {
	Accepting          bool
	NotAcceptingReason string
	Capacity           int32 // workers it says it runs at once (0: not said)
	Dispatchable       bool  // alive, accepting, of this cluster, not refused since
}

// BackendStatus answers the leader's BackendState of a backend; ok is false
// until its epoch has been heard this term.
type BackendStatus func(backendID int64) (BackendState, bool)

// ShowBackend is everything the leader knows of one backend: the journaled
// record (address, drained), its heartbeat view (epoch, version, accepting,
// capacity, last heard) and the jobs holding its possible-live slots. A
// follower asks the leader, and answers from its own journal (without the
// heartbeat view) when it cannot.
func (s *Server) ShowBackend(ctx context.Context, ref string) (*adminapi.TBackend, error) {
	if !s.d.Proposer.IsLeader() && s.d.LeaderCall != nil {
		if _, addr := s.d.Cluster.Leader(); addr != "" {
			var out *adminapi.TBackend
			err := s.d.LeaderCall(ctx, addr, func(ctx context.Context, c *adminapi.LanceMasterServiceClient) (err error) {
				out, err = c.ShowBackend(ctx, ref)
				return err
			})
			if err == nil || answered(err) {
				return out, err
			}
			s.d.Logger.Debug("show backend: the leader could not be asked; answering locally", zap.Error(err))
		}
	}
	st := s.d.Reader.State()
	b, err := resolveBackend(st, ref)
	if err != nil {
		return nil, err
	}
	return s.backendDetail(st, b), nil
}

func (s *Server) backendDetail(st *raftfsm.State, b *raftfsm.Backend) *adminapi.TBackend {
	v := s.backendView(st, b)
	if s.d.BackendStatus != nil {
		if bs, known := s.d.BackendStatus(b.ID); known {
			v.Accepting = &bs.Accepting
			v.NotAcceptingReason = nonEmpty(bs.NotAcceptingReason)
			v.Capacity = nonZero32(bs.Capacity)
			v.Dispatchable = thrift.BoolPtr(bs.Dispatchable && !b.Drained)
		}
	}
	v.Invocations = []*adminapi.TBackendInvocation{}
	for _, r := range st.SlotHolders(b.ID) {
		inv := &adminapi.TBackendInvocation{JobID: r.JobID, MutationState: nonEmpty(r.MutationState.String()),
			InvocationID: nonEmpty(r.InvocationID), ProcessEpoch: nonZero(r.ProcessEpoch),
			IndexName: nonEmpty(r.DisplayIndexName), MutationType: nonEmpty(r.MutationType.String()),
			DispatchTimeMs: nonZero(r.DispatchTimeMs), BuildPhase: nonEmpty(r.BuildPhase)}
		target := r.DB + "." + r.Table
		if c, ok := st.CatalogByID(r.CatalogID); ok {
			target = c.Name + "." + target
		}
		inv.Target = &target
		v.Invocations = append(v.Invocations, inv)
	}
	return v
}

func nonZero32(v int32) *int32 {
	if v == 0 {
		return nil
	}
	return &v
}

// DrainBackend drains (no new dispatches go to it; its running jobs
// finish, report and reconcile as before) or undrains a backend. The flag
// is journaled, so a new leader keeps it. Already so: unchanged.
func (s *Server) DrainBackend(ctx context.Context, r *adminapi.TDrainBackendRequest) (*adminapi.TDrainBackendResponse, error) {
	if r == nil {
		return nil, adminError(adminapi.TErrorCode_INVALID, "missing request")
	}
	if err := s.current(ctx); err != nil {
		return nil, err
	}
	b, err := resolveBackend(s.d.Reader.State(), r.Backend)
	if err != nil {
		return nil, err
	}
	actor := actorOf(ctx, r.GetActor())
	resp, err := s.propose(ctx, raftfsm.CmdDrainBackend, &journal.TDrainBackendCommand{
		NowMs: s.nowMs(), BackendID: b.ID, Drained: r.Drained, Actor: &actor, Audit: auditActor(ctx, r.GetActor())}, journal.TApplyCode_NOOP)
	if err != nil {
		return nil, err
	}
	unchanged := resp.Code == journal.TApplyCode_NOOP
	if !unchanged {
		s.d.Logger.Info("backend drain changed", zap.Int64("backend_id", b.ID), zap.Bool("drained", r.Drained), zap.String("actor", actor))
	}
	v, err := s.ShowBackend(ctx, r.Backend)
	if err != nil {
		return nil, err
	}
	return &adminapi.TDrainBackendResponse{Backend: v, Unchanged: &unchanged}, nil
}
