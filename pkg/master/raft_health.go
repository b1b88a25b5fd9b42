package master

import (
	"context"

	"github.com/lancemaster/lancemaster/pkg/admin"
	"github.com/lancemaster/lancemaster/pkg/cluster"
)

// The health view and non-voters (admin.HealthCluster) on the raft node.

var _ admin.HealthCluster = clusterAdapter{}

// The admin API's bound is the cluster's (a compile-time check).
var _ = [1]struct{}{}[admin.MaxMemberLag-cluster.PromoteMaxLag]

func (c clusterAdapter) LocalStatus() admin.MemberStatus {
	s := c.n.LocalStatus()
	return admin.MemberStatus{NodeID: s.NodeID, State: s.State, LeaderID: s.LeaderID, Term: s.Term,
		CommitIndex: s.CommitIndex, AppliedIndex: s.AppliedIndex, LastLogIndex: s.LastLogIndex,
		LastContact: s.LastContact, HearsLeader: s.HearsLeader}
}

func (c clusterAdapter) AddNonvoter(ctx context.Context, id, raftAddr, rpcAddr string) error {
	return operatorErr(c.n.AddNonvoter(ctx, id, raftAddr, rpcAddr))
}

func (c clusterAdapter) Promote(ctx context.Context, id string, memberApplied, maxLag uint64) error {
	return operatorErr(c.n.Promote(ctx, id, memberApplied, maxLag))
}
