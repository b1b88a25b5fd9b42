package master_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/pkg/master/mastertest"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/pkg/config"
	"github.com/lancemaster/lancemaster/pkg/rpc"
)

// health asks cl for the health view (nil when the call failed).
func health(t *testing.T, cl *rpc.MasterClient) *adminapi.TRaftHealthResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var resp *adminapi.TRaftHealthResponse
	if err := cl.Call(ctx, func(ctx context.Context, a *adminapi.LanceMasterServiceClient) (err error) {
		resp, err = a.RaftHealth(ctx)
		return err
	}); err != nil {
		t.Logf("raftHealth: %v", err)
		return nil
	}
	return resp
}

func memberOf(resp *adminapi.TRaftHealthResponse, id string) *adminapi.TRaftMemberHealth {
	for _, m := range resp.GetMembers() {
		if m.ID == id {
			return m
		}
	}
	return nil
}

// tolerance is "voters quorum healthy_voters failure_tolerance".
func tolerance(resp *adminapi.TRaftHealthResponse) [4]int32 {
	return [4]int32{resp.GetVoters(), resp.GetQuorum(), resp.GetHealthyVoters(), resp.GetFailureTolerance()}
}

// All three healthy, tolerance 1, asked of a follower; with a member
// stopped it is listed unreachable and the tolerance is 0.
func TestRaftHealthShowsAStoppedMember(t *testing.T) {
	c := mastertest.New(t, nil)
	ld := c.Leader()
	f := c.Follower()
	eventually(t, 20*time.Second, "three healthy voters, tolerance 1", func() bool {
		resp := health(t, c.Client(f))
		if resp == nil || tolerance(resp) != [4]int32{3, 2, 3, 1} || !resp.GetHealthy() || resp.GetAnsweredBy() != c.Nodes[f].NodeID {
			return false
		}
		for _, m := range resp.Members {
			if !m.Reachable || !m.GetHealthy() || m.Status.GetVersion() == "" || m.GetLag() > 5 {
				return false
			}
		}
		return resp.GetLeaderID() == c.Nodes[ld].NodeID && memberOf(resp, c.Nodes[ld].NodeID).GetIsLeader()
	})

	var down int
	for i := range c.Masters {
		if i != ld && i != f {
			down = i
		}
	}
	c.Kill(down)
	id := c.Nodes[down].NodeID
	for _, via := range []int{ld, f} {
		eventually(t, 20*time.Second, "the stopped member unreachable, tolerance 0", func() bool {
			resp := health(t, c.Client(via))
			m := memberOf(resp, id)
			return resp != nil && len(resp.Members) == 3 && m != nil && !m.Reachable && !m.GetHealthy() &&
				m.GetError() != "" && m.Status == nil && tolerance(resp) == [4]int32{3, 2, 2, 0} && resp.GetHealthy()
		})
	}
}

// A fourth master joins as a non-voter: it is not in the quorum; promote is
// refused for an unknown or an unreachable member and succeeds once m4 has
// caught up.
func TestNonvoterJoinAndPromoteOverThrift(t *testing.T) {
	c := mastertest.New(t, nil)
	ld := c.Leader()
	c.Setup(ld)
	c.Admit(ld, "a", 3)
	p4, m4 := startFourthMaster(t, c, true) // audit_test.go
	ports := freePorts(t, 2)

	call := func(fn func(ctx context.Context, cl *adminapi.LanceMasterServiceClient) error) error {
		return c.Client(c.Leader()).Call(opsCtx(t), fn)
	}
	add := func(p config.Peer) error {
		return call(func(ctx context.Context, cl *adminapi.LanceMasterServiceClient) error {
			nv := true
			_, err := cl.AddVoter(ctx, &adminapi.TAddVoterRequest{ID: p.ID, RaftAddress: p.RaftAddress, RPCAddress: &p.RPCAddress, NonVoter: &nv})
			return err
		})
	}
	promote := func(id string) (*adminapi.TRaftPeersResponse, error) {
		var resp *adminapi.TRaftPeersResponse
		err := call(func(ctx context.Context, cl *adminapi.LanceMasterServiceClient) (err error) {
			resp, err = cl.Promote(ctx, &adminapi.TPromoteRequest{ID: id})
			return err
		})
		return resp, err
	}
	if err := add(p4); err != nil {
		t.Fatalf("add-voter --non-voter: %v", err)
	}
	eventually(t, 20*time.Second, "m4 a healthy non-voter outside the quorum", func() bool {
		resp := health(t, c.Client(ld))
		m := memberOf(resp, "m4")
		return m != nil && m.GetSuffrage() == "Nonvoter" && m.GetHealthy() && tolerance(resp) == [4]int32{3, 2, 3, 1}
	})
	eventually(t, 15*time.Second, "m4 catches up", func() bool { return mastertest.JobCount(m4) == 3 })

	_, err := promote("m9")
	wantAdminError(t, err, adminapi.TErrorCode_NOT_FOUND, "no member")
	// A non-voter nobody runs: its status cannot be read, nothing changes.
	p5 := config.Peer{ID: "m5", RaftAddress: "127.0.0.1:" + strconv.Itoa(ports[0]), RPCAddress: "127.0.0.1:" + strconv.Itoa(ports[1])}
	if err := add(p5); err != nil {
		t.Fatalf("add-voter --non-voter m5: %v", err)
	}
	_, err = promote("m5")
	wantAdminError(t, err, adminapi.TErrorCode_UNAVAILABLE, "is not promoted")
	resp := health(t, c.Client(ld))
	if m := memberOf(resp, "m5"); m == nil || m.Reachable || m.GetSuffrage() != "Nonvoter" || tolerance(resp) != [4]int32{3, 2, 3, 1} {
		t.Fatalf("health with m5 down: %+v", resp)
	}

	peers, err := promote("m4")
	if err != nil {
		t.Fatalf("promote m4: %v", err)
	}
	voter := false
	for _, p := range peers.Peers {
		voter = voter || p.ID == "m4" && p.GetSuffrage() == "Voter"
	}
	if !voter {
		t.Fatalf("peers after promote: %+v", peers.Peers)
	}
	eventually(t, 20*time.Second, "four healthy voters, quorum 3", func() bool {
		return tolerance(health(t, c.Client(ld))) == [4]int32{4, 3, 4, 1}
	})
}
