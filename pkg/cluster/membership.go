package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// Membership changes (`operator raft add-voter | remove-peer`; non-voters
// and promote are in health.go).
//
// Raft's configuration holds each member's id and raft address, nothing
// else. A master finds another master's RPC address (to forward writes to
// the leader, to answer NOT_LEADER with the leader's address) in its own
// address book: the static `peers` list of its node config, plus the RPC
// addresses given to add-voter on this node since it started. So after
// adding a master, add it to the `peers` list of every master's config and
// restart them one at a time (docs/operations.md): until then a master that
// does not know the new member's RPC address answers NOT_LEADER without an
// address while the new member leads. The `peers` list is read at every
// start but bootstraps only a brand-new data dir, so editing it is safe.

// maxPeerIDLen bounds a peer id (config validation allows 64).
const maxPeerIDLen = 64

// AddVoter adds a master to the raft configuration as a voter and returns
// once the new configuration is committed (the new member may still be
// catching up). This node must lead (else an error wrapping
// raftfsm.ErrNotLeader). Adding a member that is already a voter at the
// same address is a no-op. rpcAddr, when set, is remembered in this node's
// address book. Typed refusals are *job.Error (INVALID, ALREADY_EXISTS,
// CONFLICT).
func (n *Node) AddVoter(ctx context.Context, id, raftAddr, rpcAddr string) error {
	return n.addMember(ctx, id, raftAddr, rpcAddr, raft.Voter)
}

// addMember adds a voter or a non-voter (health.go's AddNonvoter).
func (n *Node) addMember(ctx context.Context, id, raftAddr, rpcAddr string, suffrage raft.ServerSuffrage) error {
	what := "add voter"
	if suffrage == raft.Nonvoter {
		what = "add non-voter"
	}
	r, f, err := n.membershipPreamble(what, id)
	if err != nil {
		return err
	}
	if err := checkHostPort("raft address", raftAddr); err != nil {
		return err
	}
	if rpcAddr != "" {
		if err := checkHostPort("rpc address", rpcAddr); err != nil {
			return err
		}
	}
	for _, s := range f.Configuration().Servers {
		switch {
		case string(s.ID) == id && string(s.Address) != raftAddr:
			return job.Errorf(job.CodeAlreadyExists,
				"%q is already a member at raft address %s; remove it first to move it", id, s.Address)
		case string(s.ID) == id && s.Suffrage == suffrage:
			n.learnRPCAddress(id, rpcAddr)
			return nil // already there
		case string(s.ID) == id && suffrage == raft.Voter:
			// AddVoter would promote it past promote's catch-up check.
			return job.Errorf(job.CodeAlreadyExists,
				"%q is a non-voter: promote it once it has caught up (operator raft promote %s)", id, id)
		case string(s.ID) == id:
			return job.Errorf(job.CodeAlreadyExists, "%q is already a voter; a voter is not made a non-voter", id)
		case string(s.Address) == raftAddr:
			return job.Errorf(job.CodeAlreadyExists, "raft address %s belongs to member %q", raftAddr, s.ID)
		}
	}
	// prevIndex: refused if the configuration changed since it was read, so
	// the checks above cannot race with another change.
	var fut raft.IndexFuture
	if suffrage == raft.Nonvoter {
		fut = r.AddNonvoter(raft.ServerID(id), raft.ServerAddress(raftAddr), f.Index(), n.timeoutFor(ctx))
	} else {
		fut = r.AddVoter(raft.ServerID(id), raft.ServerAddress(raftAddr), f.Index(), n.timeoutFor(ctx))
	}
	if err := waitFuture(ctx, fut); err != nil {
		return n.membershipError(what+" "+id, err)
	}
	n.learnRPCAddress(id, rpcAddr)
	n.log.Info("added a member", zap.String("peer_id", id), zap.String("suffrage", suffrage.String()),
		zap.String("raft_address", raftAddr), zap.String("rpc_address", rpcAddr), zap.Uint64("configuration_index", fut.Index()))
	return nil
}

// RemovePeer removes a member from the raft configuration and returns once
// the new configuration is committed. This node must lead. It refuses
// (INVALID) to remove the last voter, and to remove this node itself unless
// force is set: transfer leadership first and remove it from the new
// leader. With force the leader removes itself: raft commits the smaller
// configuration, then this node steps down and stops its raft (the others
// elect a leader after an election timeout); stop the process afterwards.
// An unknown id is NOT_FOUND.
func (n *Node) RemovePeer(ctx context.Context, id string, force bool) error {
	r, err := n.running()
	if err != nil {
		return err
	}
	if r.State() != raft.Leader {
		return fmt.Errorf("cluster: remove peer on %s: %w", n.cfg.NodeID, raftfsm.ErrNotLeader)
	}
	if err := checkPeerID(id); err != nil {
		return err
	}
	f := r.GetConfiguration()
	if err := f.Error(); err != nil {
		return fmt.Errorf("cluster: read raft configuration: %w", err)
	}
	target, voters := member(f.Configuration(), id)
	switch {
	case target == nil:
		return job.Errorf(job.CodeNotFound, "no member %q in the raft configuration", id)
	case target.Suffrage == raft.Voter && voters == 1:
		return job.Errorf(job.CodeInvalid, "%q is the last voter; a cluster cannot remove its last voter", id)
	case id == n.cfg.NodeID && !force:
		return job.Errorf(job.CodeInvalid, "%q is this master, the leader: transfer leadership first "+
			"(operator raft transfer-leader) and run remove-peer again, or pass --force", id)
	}
	fut := r.RemoveServer(raft.ServerID(id), f.Index(), n.timeoutFor(ctx))
	if err := waitFuture(ctx, fut); err != nil {
		return n.membershipError("remove peer "+id, err)
	}
	n.forgetRPCAddress(id)
	n.log.Info("removed a peer", zap.String("peer_id", id), zap.Bool("self", id == n.cfg.NodeID),
		zap.Uint64("configuration_index", fut.Index()))
	return nil
}

// membershipError classifies a failed configuration change.
func (n *Node) membershipError(what string, err error) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return fmt.Errorf("cluster: %s (not applied): %w: %w", what, raftfsm.ErrNotLeader, err)
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return fmt.Errorf("cluster: %s: %w: %w", what, ErrNotApplied, err)
	case strings.Contains(err.Error(), "configuration changed since"):
		return job.Errorf(job.CodeConflict, "the raft configuration changed meanwhile; look again and retry")
	default:
		return fmt.Errorf("cluster: %s: %w: %w", what, ErrFateUnknown, err)
	}
}

func checkPeerID(id string) error {
	if id == "" || len(id) > maxPeerIDLen || strings.ContainsFunc(id, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return job.Errorf(job.CodeInvalid, "a peer id is 1 to %d printable characters without spaces", maxPeerIDLen)
	}
	return nil
}

func checkHostPort(what, addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err == nil && host != "" {
		if p, perr := strconv.Atoi(port); perr == nil && p > 0 && p < 65536 {
			return nil
		}
	}
	return job.Errorf(job.CodeInvalid, "%s %q is not HOST:PORT", what, clipString(addr, 80))
}

// rpcAddress is id's RPC address: learnt from add-voter on this node, else
// the journal's address book (Config.AddressBook: what add-voter recorded on
// whichever master ran it), else the static peer list; "" when unknown.
func (n *Node) rpcAddress(id string) string {
	if v, ok := n.learnedRPC.Load(id); ok {
		return v.(string)
	}
	if n.cfg.AddressBook != nil {
		if a, ok := n.cfg.AddressBook(id); ok {
			return a
		}
	}
	return n.rpcAddrs[id]
}

func (n *Node) learnRPCAddress(id, addr string) {
	if addr != "" {
		n.learnedRPC.Store(id, addr)
	}
}

func (n *Node) forgetRPCAddress(id string) { n.learnedRPC.Delete(id) }
