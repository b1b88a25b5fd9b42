package admin

import (
	"testing"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
)

// judgeHealth: what makes a member healthy, and the voters' tolerance.
func TestJudgeHealth(t *testing.T) {
	status := func(id, state string, term, commit, applied int64, leader string, hears bool) *adminapi.TRaftMemberStatus {
		return &adminapi.TRaftMemberStatus{NodeID: id, State: &state, Term: &term, CommitIndex: &commit, AppliedIndex: &applied,
			LeaderID: &leader, HearsLeader: &hears}
	}
	voter, nonvoter := thrift.StringPtr("Voter"), thrift.StringPtr("Nonvoter")
	members := []*adminapi.TRaftMemberHealth{
		{ID: "m1", Suffrage: voter, Reachable: true, Status: status("m1", "Leader", 5, 1000, 1000, "m1", true)},
		{ID: "m2", Suffrage: voter, Reachable: true, Status: status("m2", "Follower", 5, 1000, 750, "m1", true)},   // lag 250: healthy
		{ID: "m3", Suffrage: voter, Reachable: true, Status: status("m3", "Follower", 5, 1000, 749, "m1", true)},   // lag 251
		{ID: "m4", Suffrage: voter, Reachable: true, Status: status("m4", "Follower", 4, 1000, 1000, "m1", true)},  // old term
		{ID: "m5", Suffrage: voter, Reachable: true, Status: status("m5", "Follower", 5, 1000, 1000, "m1", false)}, // does not hear it
		{ID: "m6", Suffrage: voter, Reachable: true, Status: status("m6", "Follower", 5, 1000, 1000, "m1", true),
			LeaderContact: thrift.StringPtr("unreachable")}, // answers us, not the leader
		{ID: "m7", Suffrage: voter, Reachable: false, Error: thrift.StringPtr("no answer")},
		{ID: "m8", Suffrage: nonvoter, Reachable: true, Status: status("m8", "Follower", 5, 1000, 1000, "m1", true)},
		{ID: "m9", Suffrage: voter, Reachable: true, Status: status("m9", "Leader", 3, 900, 900, "m9", true)}, // deposed
	}
	s := &Server{d: Deps{NodeID: "m2"}}
	resp := s.judgeHealth(members)
	want := map[string]bool{"m1": true, "m2": true, "m3": false, "m4": false, "m5": false, "m6": false, "m7": false, "m8": true, "m9": false}
	for _, m := range resp.Members {
		if m.GetHealthy() != want[m.ID] {
			t.Errorf("%s healthy = %v, want %v", m.ID, m.GetHealthy(), want[m.ID])
		}
	}
	if resp.GetLeaderID() != "m1" || resp.GetLeaderCommitIndex() != 1000 || resp.GetAnsweredBy() != "m2" ||
		!members[0].GetIsLeader() || members[8].GetIsLeader() || members[2].GetLag() != 251 || members[6].IsSetLag() {
		t.Errorf("response %+v", resp)
	}
	// 8 voters, quorum 5, 2 healthy: quorum lost, the tolerance is 0, not negative.
	if resp.GetVoters() != 8 || resp.GetQuorum() != 5 || resp.GetHealthyVoters() != 2 || resp.GetFailureTolerance() != 0 || resp.GetHealthy() {
		t.Errorf("tolerance: voters %d quorum %d healthy %d tolerance %d healthy %v", resp.GetVoters(), resp.GetQuorum(),
			resp.GetHealthyVoters(), resp.GetFailureTolerance(), resp.GetHealthy())
	}
}
