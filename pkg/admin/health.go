package admin

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
	"github.com/lancemaster/lancemaster/pkg/version"
)

// The cluster's health view (`operator raft health`) and non-voter joins
// (`add-voter --non-voter`, `promote`).
//
// Any master answers raftHealth: it asks every member of the raft
// configuration for its own status (raftMemberStatus, a short timeout
// each, in parallel) and combines the answers with the leader's contact
// view (the leader's own, or asked of it with listPeers). A member that does
// not answer is listed as unreachable, never left out.

// HealthCluster is the part of the raft node behind the health view and
// non-voters. Optional: a Cluster that does not implement it answers
// UNAVAILABLE to raftMemberStatus and promote, and add-voter --non-voter.
// Implemented by pkg/cluster's Node through the adapter in pkg/master.
type HealthCluster interface {
	// LocalStatus is this node's raft state.
	LocalStatus() MemberStatus
	// AddNonvoter adds a non-voter (errors as MembershipCluster.AddVoter).
	AddNonvoter(ctx context.Context, id, raftAddr, rpcAddr string) error
	// Promote makes the non-voter id a voter, refusing (a *job.Error,
	// UNAVAILABLE) while the leader's commit index minus memberApplied
	// exceeds maxLag or the leader does not reach it; NOT_FOUND for an
	// unknown id; a voter is a no-op.
	Promote(ctx context.Context, id string, memberApplied, maxLag uint64) error
}

// MemberStatus is what a master says about itself (pkg/cluster's
// LocalStatus).
type MemberStatus struct {
	NodeID, State, LeaderID                       string
	Term, CommitIndex, AppliedIndex, LastLogIndex uint64
	LastContact                                   time.Time // it last heard the leader (zero: never)
	HearsLeader                                   bool
}

// MaxMemberLag is the lag (the leader's commit index minus a member's
// applied index, in entries) up to which a member is healthy and a
// non-voter may be promoted: pkg/cluster's PromoteMaxLag (Consul's and
// Nomad's autopilot default, max_trailing_logs 250).
const MaxMemberLag = 250

// memberCallTimeout bounds the question to one member: a stopped or frozen
// master must not hold the whole view.
const memberCallTimeout = 2 * time.Second

func (s *Server) healthCluster() (HealthCluster, error) {
	hc, ok := s.d.Cluster.(HealthCluster)
	if !ok {
		return nil, adminError(adminapi.TErrorCode_UNAVAILABLE, "raft health and non-voters are not available on this master")
	}
	return hc, nil
}

// RaftMemberStatus answers what this master says about itself.
func (s *Server) RaftMemberStatus(context.Context) (*adminapi.TRaftMemberStatus, error) {
	hc, err := s.healthCluster()
	if err != nil {
		return nil, err
	}
	return s.memberStatusOf(hc.LocalStatus()), nil
}

func (s *Server) memberStatusOf(st MemberStatus) *adminapi.TRaftMemberStatus {
	i64 := func(v uint64) *int64 { x := int64(v); return &x }
	out := &adminapi.TRaftMemberStatus{NodeID: st.NodeID, State: &st.State, Term: i64(st.Term), LeaderID: &st.LeaderID,
		CommitIndex: i64(st.CommitIndex), AppliedIndex: i64(st.AppliedIndex), LastLogIndex: i64(st.LastLogIndex),
		HearsLeader: &st.HearsLeader}
	if !st.LastContact.IsZero() {
		// raft's clock, not the injectable one: LastContact is raft's.
		age := max(int64(0), time.Since(st.LastContact).Milliseconds())
		out.LastContactAgeMs = &age
	}
	v := version.Get().Short()
	out.Version = &v
	return out
}

// askMember asks the member at addr for its status; the answer must name id.
func (s *Server) askMember(ctx context.Context, id, addr string) (*adminapi.TRaftMemberStatus, error) {
	if s.d.NodeID != "" && id == s.d.NodeID {
		hc, err := s.healthCluster()
		if err != nil {
			return nil, err
		}
		return s.memberStatusOf(hc.LocalStatus()), nil
	}
	if addr == "" {
		return nil, fmt.Errorf("this master does not know its RPC address (add it to the peers lists, or add-voter --rpc-address)")
	}
	if s.d.LeaderCall == nil {
		return nil, fmt.Errorf("this master cannot call other masters")
	}
	ctx, cancel := context.WithTimeout(ctx, memberCallTimeout)
	defer cancel()
	var st *adminapi.TRaftMemberStatus
	err := s.d.LeaderCall(ctx, addr, func(ctx context.Context, c *adminapi.LanceMasterServiceClient) (err error) {
		st, err = c.RaftMemberStatus(ctx)
		return err
	})
	switch {
	case err != nil:
		return nil, fmt.Errorf("no answer from %s within %s: %s", addr, memberCallTimeout, oneLineErr(err))
	case st.GetNodeID() != id:
		return nil, fmt.Errorf("%s answers as %q, not %q", addr, clip(st.GetNodeID(), 64), id)
	}
	return st, nil
}

func oneLineErr(err error) string {
	return clip(strings.Join(strings.Fields(err.Error()), " "), 200)
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// leaderContacts is the leader's contact view of each member: this
// master's own when it leads, else asked of the leader (nil when unknown).
func (s *Server) leaderContacts(ctx context.Context, local []PeerStatus) map[string]string {
	if s.d.Proposer.IsLeader() {
		out := map[string]string{}
		for _, p := range local {
			out[p.ID] = p.Health
		}
		return out
	}
	id, addr := s.d.Cluster.Leader()
	if id == "" || addr == "" || s.d.LeaderCall == nil || id == s.d.NodeID {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, memberCallTimeout)
	defer cancel()
	var resp *adminapi.TRaftPeersResponse
	if err := s.d.LeaderCall(ctx, addr, func(ctx context.Context, c *adminapi.LanceMasterServiceClient) (err error) {
		resp, err = c.ListPeers(ctx)
		return err
	}); err != nil || resp.GetAnsweredBy() != id {
		return nil
	}
	out := map[string]string{}
	for _, p := range resp.GetPeers() {
		out[p.ID] = p.GetHealth()
	}
	return out
}

// RaftHealth answers the health view: every member, and the failure
// tolerance of the voters.
func (s *Server) RaftHealth(ctx context.Context) (*adminapi.TRaftHealthResponse, error) {
	peers, err := s.d.Cluster.Peers()
	if err != nil {
		return nil, s.internal("list peers", err)
	}
	contacts := s.leaderContacts(ctx, peers)
	members := make([]*adminapi.TRaftMemberHealth, len(peers))
	var wg sync.WaitGroup
	for i, p := range peers {
		m := &adminapi.TRaftMemberHealth{ID: p.ID, RaftAddress: &p.RaftAddress}
		if p.RPCAddress != "" {
			m.RPCAddress = &p.RPCAddress
		}
		if p.Suffrage != "" {
			m.Suffrage = &p.Suffrage
		}
		if h, ok := contacts[p.ID]; ok && h != "" {
			m.LeaderContact = &h
		}
		members[i] = m
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := s.askMember(ctx, p.ID, p.RPCAddress)
			if err != nil {
				msg := err.Error()
				m.Error = &msg
				return
			}
			m.Reachable, m.Status = true, st
		}()
	}
	wg.Wait()
	return s.judgeHealth(members), nil
}

// judgeHealth fills lag, healthy and the tolerance.
func (s *Server) judgeHealth(members []*adminapi.TRaftMemberHealth) *adminapi.TRaftHealthResponse {
	out := &adminapi.TRaftHealthResponse{Members: members}
	if s.d.NodeID != "" {
		out.AnsweredBy = &s.d.NodeID
	}
	// The leader is the member that says it leads, with the highest term.
	var leader *adminapi.TRaftMemberStatus
	for _, m := range members {
		if st := m.Status; st != nil && st.GetState() == "Leader" && (leader == nil || st.GetTerm() > leader.GetTerm()) {
			leader = st
		}
	}
	if leader != nil {
		id, commit := leader.NodeID, leader.GetCommitIndex()
		out.LeaderID, out.LeaderCommitIndex = &id, &commit
	} else if id, _ := s.d.Cluster.Leader(); id != "" {
		out.LeaderID = &id
	}
	maxLag := int64(MaxMemberLag)
	out.MaxLag = &maxLag
	var voters, healthyVoters int32
	for _, m := range members {
		isLeader := leader != nil && m.ID == leader.NodeID
		m.IsLeader = &isLeader
		healthy := false
		if st := m.Status; st != nil && leader != nil {
			lag := max(int64(0), leader.GetCommitIndex()-st.GetAppliedIndex())
			m.Lag = &lag
			healthy = st.GetTerm() == leader.GetTerm() && st.GetHearsLeader() && lag <= maxLag &&
				(isLeader || st.GetLeaderID() == leader.NodeID) && m.GetLeaderContact() != "unreachable"
		}
		m.Healthy = &healthy
		if m.GetSuffrage() == "Voter" {
			voters++
			if healthy {
				healthyVoters++
			}
		}
	}
	quorum := voters/2 + 1
	tolerance := max(int32(0), healthyVoters-quorum)
	ok := voters > 0 && healthyVoters >= quorum
	out.Voters, out.Quorum, out.HealthyVoters, out.FailureTolerance, out.Healthy = &voters, &quorum, &healthyVoters, &tolerance, &ok
	return out
}

// Promote makes a caught-up non-voter a voter; it must run on the leader.
// The member is asked for its applied index, and refused (UNAVAILABLE,
// nothing changed) when it does not answer or lags by more than
// MaxMemberLag entries. The answer is the configuration afterwards.
func (s *Server) Promote(ctx context.Context, req *adminapi.TPromoteRequest) (*adminapi.TRaftPeersResponse, error) {
	if req == nil {
		return nil, adminError(adminapi.TErrorCode_INVALID, "no request")
	}
	id := strings.TrimSpace(req.ID)
	if len(id) > 256 || !job.ValidNodeID(id) {
		return nil, adminError(adminapi.TErrorCode_INVALID, "the id is not 1 to 64 letters, digits, '.', '_' or '-'")
	}
	who, err := claimOf(ctx, req.GetActor())
	if err != nil {
		return nil, err
	}
	if err := s.requireLeader(); err != nil {
		return nil, err
	}
	hc, err := s.healthCluster()
	if err != nil {
		return nil, err
	}
	peers, err := s.d.Cluster.Peers()
	if err != nil {
		return nil, s.internal("list peers", err)
	}
	var target *PeerStatus
	for i := range peers {
		if peers[i].ID == id {
			target = &peers[i]
		}
	}
	switch {
	case target == nil:
		return nil, adminError(adminapi.TErrorCode_NOT_FOUND, "no member %q in the raft configuration", id)
	case target.Suffrage == "Voter":
		return s.peersAfterChange(ctx), nil // already promoted: a retry
	}
	st, err := s.askMember(ctx, id, target.RPCAddress)
	if err != nil {
		return nil, adminError(adminapi.TErrorCode_UNAVAILABLE,
			"%q is not promoted: its applied index could not be read: %s", id, err.Error())
	}
	if err := hc.Promote(ctx, id, uint64(max(0, st.GetAppliedIndex())), MaxMemberLag); err != nil {
		return nil, s.operatorError("promote", err)
	}
	s.d.Logger.Info("raft non-voter promoted", zap.String("peer_id", id), zap.Int64("member_applied_index", st.GetAppliedIndex()))
	_ = s.recordAudit(ctx, who, raftfsm.AuditRaftPromote, id, "suffrage: nonvoter → voter")
	return s.peersAfterChange(ctx), nil
}
