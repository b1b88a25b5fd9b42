package admin

import (
	"context"
	"errors"
	"strings"

	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// MembershipCluster is the part of the raft node behind `operator raft
// add-voter | remove-peer`. It is optional: a Cluster that does not
// implement it answers UNAVAILABLE. Implemented by pkg/cluster's Node
// through the adapter in pkg/master.
//
// Errors: raftfsm.ErrNotLeader (nothing changed); a *job.Error for a
// refusal (INVALID, NOT_FOUND, ALREADY_EXISTS, CONFLICT); ErrNotApplied;
// ErrOutcomeUnknown.
type MembershipCluster interface {
	// AddVoter adds a voter and returns once the configuration is
	// committed. rpcAddr ("" = unknown) is remembered by this master.
	AddVoter(ctx context.Context, id, raftAddr, rpcAddr string) error
	// RemovePeer removes a member; removing the leader itself needs force.
	RemovePeer(ctx context.Context, id string, force bool) error
}

// maxAddressLen bounds host:port arguments.
const maxAddressLen = 512

func (s *Server) membershipCluster() (MembershipCluster, error) {
	mc, ok := s.d.Cluster.(MembershipCluster)
	if !ok {
		return nil, adminError(adminapi.TErrorCode_UNAVAILABLE, "raft membership changes are not available on this master")
	}
	return mc, nil
}

// AddVoter adds a master to the raft configuration, as a voter or (with
// non_voter) a non-voter to promote later; it must run on the leader. The
// answer is the configuration afterwards.
func (s *Server) AddVoter(ctx context.Context, req *adminapi.TAddVoterRequest) (*adminapi.TRaftPeersResponse, error) {
	if req == nil {
		return nil, adminError(adminapi.TErrorCode_INVALID, "no request")
	}
	id, raftAddr, rpcAddr := strings.TrimSpace(req.ID), strings.TrimSpace(req.RaftAddress), strings.TrimSpace(req.GetRPCAddress())
	if len(id) > 256 || len(raftAddr) > maxAddressLen || len(rpcAddr) > maxAddressLen {
		return nil, adminError(adminapi.TErrorCode_INVALID, "the id or an address is too long")
	}
	if !job.ValidNodeID(id) {
		// A master's node_id must match it too (docs/configuration.md).
		return nil, adminError(adminapi.TErrorCode_INVALID, "the id is not 1 to 64 letters, digits, '.', '_' or '-'")
	}
	who, err := claimOf(ctx, req.GetActor())
	if err != nil {
		return nil, err
	}
	if err := s.requireLeader(); err != nil {
		return nil, err
	}
	if err := s.addMember(ctx, id, raftAddr, rpcAddr, req.GetNonVoter()); err != nil {
		return nil, err
	}
	s.d.Logger.Info("raft member added", zap.String("peer_id", id), zap.String("raft_address", raftAddr),
		zap.String("rpc_address", rpcAddr), zap.Bool("non_voter", req.GetNonVoter()))
	s.auditAddMember(ctx, who, id, raftAddr, rpcAddr, req.GetNonVoter()) // audit.go: the member is added, whatever follows
	if rpcAddr != "" {
		// The address book: every master can now name and forward to the
		// new member, whatever its own peers list says.
		if _, err := s.propose(ctx, raftfsm.CmdSetMemberAddress,
			&journal.TMemberAddressCommand{NowMs: s.nowMs(), NodeID: id, RPCAddress: rpcAddr}); err != nil {
			var ae *adminapi.TAdminError
			if errors.As(err, &ae) {
				ae.Message = "the voter was added, but its RPC address was not recorded (run add-voter again): " + ae.Message
				return nil, ae
			}
			return nil, err
		}
	}
	return s.peersAfterChange(ctx), nil
}

// RemovePeer removes a member from the raft configuration; it must run on
// the leader. The answer is the configuration afterwards (empty when this
// master removed itself and no longer knows it).
func (s *Server) RemovePeer(ctx context.Context, req *adminapi.TRemovePeerRequest) (*adminapi.TRaftPeersResponse, error) {
	if req == nil {
		return nil, adminError(adminapi.TErrorCode_INVALID, "no request")
	}
	id := strings.TrimSpace(req.ID)
	if len(id) > 256 {
		return nil, adminError(adminapi.TErrorCode_INVALID, "the id is too long")
	}
	who, err := claimOf(ctx, req.GetActor())
	if err != nil {
		return nil, err
	}
	if err := s.requireLeader(); err != nil {
		return nil, err
	}
	mc, err := s.membershipCluster()
	if err != nil {
		return nil, err
	}
	if err := mc.RemovePeer(ctx, id, req.GetForce()); err != nil {
		return nil, s.operatorError("remove peer", err)
	}
	s.d.Logger.Info("raft peer removed", zap.String("peer_id", id), zap.Bool("force", req.GetForce()))
	if _, ok := s.d.Reader.State().MemberAddress(id); ok {
		// Best effort: a stale entry only names a master that is gone.
		if _, err := s.propose(ctx, raftfsm.CmdSetMemberAddress,
			&journal.TMemberAddressCommand{NowMs: s.nowMs(), NodeID: id}); err != nil {
			s.d.Logger.Warn("removed peer's RPC address not forgotten", zap.String("peer_id", id), zap.Error(err))
		}
	}
	s.auditRemovePeer(ctx, who, id, req.GetForce())
	return s.peersAfterChange(ctx), nil
}

// addMember adds a voter, or with nonVoter a non-voter (health.go).
func (s *Server) addMember(ctx context.Context, id, raftAddr, rpcAddr string, nonVoter bool) error {
	if nonVoter {
		hc, err := s.healthCluster()
		if err != nil {
			return err
		}
		if err := hc.AddNonvoter(ctx, id, raftAddr, rpcAddr); err != nil {
			return s.operatorError("add non-voter", err)
		}
		return nil
	}
	mc, err := s.membershipCluster()
	if err != nil {
		return err
	}
	if err := mc.AddVoter(ctx, id, raftAddr, rpcAddr); err != nil {
		return s.operatorError("add voter", err)
	}
	return nil
}

// peersAfterChange lists the peers; a master that removed itself may no
// longer be able to, and answers an empty list: the change did happen.
func (s *Server) peersAfterChange(ctx context.Context) *adminapi.TRaftPeersResponse {
	out, err := s.ListPeers(ctx)
	if err != nil {
		return &adminapi.TRaftPeersResponse{Peers: []*adminapi.TRaftPeer{}}
	}
	return out
}
