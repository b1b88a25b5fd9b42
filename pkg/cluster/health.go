package cluster

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// The health view's local half (`operator raft health`) and non-voter
// membership (`add-voter --non-voter`, `promote`).
//
// A new master joins as a non-voter: raft replicates to it but does not
// count it in the quorum (nor let it stand for election), so a master that
// replays a long log or a big snapshot does not make the cluster need one
// more answer per commit. Once it has caught up, promote makes it a voter.

// PromoteMaxLag is the bound of promote and of a healthy member: the
// leader's commit index minus the member's applied index, in entries.
// Consul's and Nomad's autopilot use the same default (max_trailing_logs
// 250) to call a server healthy.
const PromoteMaxLag = 250

// LocalStatus is what this node says about itself.
type LocalStatus struct {
	NodeID   string
	State    string // raft's: Leader, Follower, Candidate, Shutdown
	Term     uint64
	LeaderID string
	// LastContact is when it last heard a leader (now, for the leader;
	// zero: never).
	LastContact time.Time
	// HearsLeader: it leads, or heard the leader within the contact window
	// (contactWindows heartbeat timeouts).
	HearsLeader                             bool
	CommitIndex, AppliedIndex, LastLogIndex uint64
}

// LocalStatus reports this node's raft state; before Start and after
// Shutdown State is "Shutdown" and the numbers are zero.
func (n *Node) LocalStatus() LocalStatus {
	st := LocalStatus{NodeID: n.cfg.NodeID, State: raft.Shutdown.String()}
	r, err := n.running()
	if err != nil {
		return st
	}
	_, lid := r.LeaderWithID()
	st.State, st.Term, st.LeaderID = r.State().String(), r.CurrentTerm(), string(lid)
	st.CommitIndex, st.AppliedIndex, st.LastLogIndex = r.CommitIndex(), r.AppliedIndex(), r.LastIndex()
	now := time.Now()
	if r.State() == raft.Leader {
		st.LastContact, st.HearsLeader = now, true
		return st
	}
	st.LastContact = r.LastContact()
	window := contactWindows * n.raftConf.HeartbeatTimeout
	st.HearsLeader = lid != "" && !st.LastContact.IsZero() && now.Sub(st.LastContact) <= window
	return st
}

// AddNonvoter adds a master as a non-voter and returns once the new
// configuration is committed. The same checks as AddVoter apply; adding a
// member that is already a non-voter at the same address is a no-op, and
// one that is a voter is refused (ALREADY_EXISTS: it would not be demoted).
func (n *Node) AddNonvoter(ctx context.Context, id, raftAddr, rpcAddr string) error {
	return n.addMember(ctx, id, raftAddr, rpcAddr, raft.Nonvoter)
}

// Promote makes the non-voter id a voter. memberApplied is the member's
// own applied index, as it answered just now (the caller asks it: raft
// does not expose a follower's progress). It refuses — UNAVAILABLE, nothing
// changed — unless the leader's contact with the member is healthy and the
// leader's commit index minus memberApplied is at most maxLag. An unknown
// id is NOT_FOUND; a voter is a no-op. This node must lead.
func (n *Node) Promote(ctx context.Context, id string, memberApplied, maxLag uint64) error {
	r, f, err := n.membershipPreamble("promote", id)
	if err != nil {
		return err
	}
	target, _ := member(f.Configuration(), id)
	switch {
	case target == nil:
		return job.Errorf(job.CodeNotFound, "no member %q in the raft configuration", id)
	case target.Suffrage == raft.Voter:
		return nil
	}
	window := contactWindows * n.raftConf.HeartbeatTimeout
	if h, _, lastErr := n.contacts.health(target.ID, window); h != PeerHealthy {
		msg := fmt.Sprintf("%q is not promoted: the leader's replication to it is %s", id, h)
		if lastErr != "" {
			msg += " (" + clipString(lastErr, 200) + ")"
		}
		return job.Errorf(job.CodeUnavailable, "%s; retry once operator raft health shows it healthy", msg)
	}
	commit := r.CommitIndex()
	if memberApplied < commit && commit-memberApplied > maxLag {
		return job.Errorf(job.CodeUnavailable,
			"%q is not promoted: it is %d entries behind the leader's commit index %d (at most %d allowed); "+
				"retry once it has caught up (operator raft health, LAG)", id, commit-memberApplied, commit, maxLag)
	}
	// AddVoter on a non-voter promotes it; prevIndex refuses it if the
	// configuration changed since it was read.
	fut := r.AddVoter(target.ID, target.Address, f.Index(), n.timeoutFor(ctx))
	if err := waitFuture(ctx, fut); err != nil {
		return n.membershipError("promote "+id, err)
	}
	n.log.Info("promoted a non-voter", zap.String("peer_id", id), zap.Uint64("member_applied_index", memberApplied),
		zap.Uint64("commit_index", commit), zap.Uint64("configuration_index", fut.Index()))
	return nil
}

// membershipPreamble: running, leading, a valid id, the configuration.
func (n *Node) membershipPreamble(what, id string) (*raft.Raft, raft.ConfigurationFuture, error) {
	r, err := n.running()
	if err != nil {
		return nil, nil, err
	}
	if r.State() != raft.Leader {
		return nil, nil, fmt.Errorf("cluster: %s on %s: %w", what, n.cfg.NodeID, raftfsm.ErrNotLeader)
	}
	if err := checkPeerID(id); err != nil {
		return nil, nil, err
	}
	f := r.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, nil, fmt.Errorf("cluster: read raft configuration: %w", err)
	}
	return r, f, nil
}

// member finds id in c (nil when absent) and counts the voters.
func member(c raft.Configuration, id string) (target *raft.Server, voters int) {
	for _, s := range c.Servers {
		if s.Suffrage == raft.Voter {
			voters++
		}
		if string(s.ID) == id {
			s := s
			target = &s
		}
	}
	return target, voters
}
