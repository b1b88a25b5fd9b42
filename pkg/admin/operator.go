package admin

import (
	"context"
	"errors"

	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// ListPeers lists the raft configuration as this master sees it.
func (s *Server) ListPeers(ctx context.Context) (*adminapi.TRaftPeersResponse, error) {
	peers, err := s.d.Cluster.Peers()
	if err != nil {
		return nil, s.internal("list peers", err)
	}
	out := &adminapi.TRaftPeersResponse{Peers: []*adminapi.TRaftPeer{}}
	for _, p := range peers {
		p := p
		tp := &adminapi.TRaftPeer{ID: p.ID, RaftAddress: p.RaftAddress, IsLeader: &p.Leader}
		if p.RPCAddress != "" {
			tp.RPCAddress = &p.RPCAddress
		}
		if p.Suffrage != "" {
			tp.Suffrage = &p.Suffrage
		}
		if p.Health != "" {
			tp.Health = &p.Health
		}
		if !p.LastContact.IsZero() {
			ms := p.LastContact.UnixMilli()
			tp.LastContactMs = &ms
		}
		if p.LastError != "" {
			tp.LastError = &p.LastError
		}
		out.Peers = append(out.Peers, tp)
	}
	if s.d.NodeID != "" {
		out.AnsweredBy = &s.d.NodeID
	}
	if id, _ := s.d.Cluster.Leader(); id != "" {
		out.LeaderID = &id
	}
	term, commit, applied := s.d.Cluster.RaftStats()
	t, c, a := int64(term), int64(commit), int64(applied)
	out.Term, out.AppliedIndex = &t, &a
	if s.d.ReadIndex != nil && s.d.Proposer.IsLeader() {
		// A leader answers its read index: the commit index confirmed by a
		// quorum, which a follower waits for before it decides a write
		// (current.go). Unconfirmed, it is left unset: this master may no
		// longer lead.
		if ri, err := s.d.ReadIndex(ctx); err == nil {
			c = int64(ri)
			out.CommitIndex = &c
		} else {
			s.d.Logger.Info("list peers: leadership not confirmed; no commit index given", zap.Error(err))
		}
		return out, nil
	}
	if s.d.ReadIndex != nil && s.d.NodeID != "" && out.GetLeaderID() == s.d.NodeID {
		// Raft still names this master while it steps down: it leads no
		// more and cannot confirm anything, so it gives no commit index a
		// follower could take for a read index.
		return out, nil
	}
	out.CommitIndex = &c
	return out, nil
}

// TransferLeader hands leadership to target ("" = any voter); it must run on
// the leader.
func (s *Server) TransferLeader(ctx context.Context, target, claimed string) (string, error) {
	if err := s.requireLeader(); err != nil {
		return "", err
	}
	if len(target) > 256 {
		return "", adminError(adminapi.TErrorCode_INVALID, "target id is too long")
	}
	who, err := claimOf(ctx, claimed)
	if err != nil {
		return "", err
	}
	if target != "" {
		peers, err := s.d.Cluster.Peers()
		if err != nil {
			return "", s.internal("list peers", err)
		}
		found := false
		for _, p := range peers {
			found = found || p.ID == target
		}
		if !found {
			return "", adminError(adminapi.TErrorCode_NOT_FOUND, "no peer %q in the raft configuration", target)
		}
		if target == s.d.NodeID {
			// Raft would do nothing and the answer would read as a transfer.
			return "", adminError(adminapi.TErrorCode_ALREADY_EXISTS, "%s is already the leader; nothing was transferred", target)
		}
	}
	leader, err := s.d.Cluster.TransferLeadership(ctx, target)
	if err != nil {
		if errors.Is(err, raftfsm.ErrNotLeader) {
			return "", s.notLeader()
		}
		return "", s.internal("leadership transfer", err)
	}
	s.d.Logger.Info("leadership transferred", zap.String("new_leader", leader))
	_ = s.recordAudit(ctx, who, raftfsm.AuditRaftTransferLeader, leader, "leader: "+s.d.NodeID+" → "+leader)
	return leader, nil
}
