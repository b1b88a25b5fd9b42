package cluster

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/pkg/config"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

func opCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// wantCode fails unless err is a *job.Error with code.
func wantCode(t *testing.T, err error, code job.Code) {
	t.Helper()
	var je *job.Error
	if !errors.As(err, &je) || je.Code != code {
		t.Fatalf("err = %v, want %s", err, code)
	}
}

// voters returns the voter ids of n's configuration and their RPC addresses.
func voters(t *testing.T, n *Node) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, p := range peersOf(t, n) {
		if p.Suffrage == "Voter" {
			out[p.ID] = p.RPCAddress
		}
	}
	return out
}

func peersOf(t *testing.T, n *Node) []PeerStatus {
	t.Helper()
	ps, err := n.Peers()
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

// addNode adds a node to the harness that is not in the others' static
// lists: its own list is theirs plus itself (docs/operations.md).
func (c *testCluster) addNode(id string) *testNode {
	c.t.Helper()
	port := freePorts(c.t, 1)[0]
	p := config.Peer{ID: id, RaftAddress: fmt.Sprintf("127.0.0.1:%d", port), RPCAddress: "rpc-" + id}
	cfg := c.nodes[0].cfg
	cfg.NodeID, cfg.RaftBind, cfg.RaftAdvertise, cfg.DataDir = id, p.RaftAddress, "", c.t.TempDir()
	cfg.Peers = append(append([]config.Peer(nil), c.peers...), p)
	tn := &testNode{c: c, cfg: cfg}
	c.nodes = append(c.nodes, tn)
	return tn
}

// On both raft log stores (the new voter has the cluster's store).
func TestAddVoterThenRemovePeer(t *testing.T) { eachLogStore(t, addVoterThenRemovePeer) }

func addVoterThenRemovePeer(t *testing.T, store clusterOpt) {
	c := newTestCluster(t, 3, store)
	c.startAll()
	ld := c.leader()
	proposeMany(t, ld.node(), 0, 20, 4)
	c.awaitCount(20)

	m4 := c.addNode("m4")
	m4.start()
	n := ld.node()
	if err := c.followers(ld)[0].node().AddVoter(opCtx(t), "m4", m4.cfg.RaftBind, "rpc-m4:9090"); !errors.Is(err, raftfsm.ErrNotLeader) {
		t.Fatalf("AddVoter on a follower: %v, want ErrNotLeader", err)
	}
	if err := n.AddVoter(opCtx(t), "m4", m4.cfg.RaftBind, "rpc-m4:9090"); err != nil {
		t.Fatalf("AddVoter: %v", err)
	}
	if v := voters(t, n); len(v) != 4 || v["m4"] != "rpc-m4:9090" {
		t.Fatalf("voters after add: %v", v)
	}
	c.awaitCount(20) // m4 caught up
	proposeMany(t, n, 20, 30, 4)
	c.awaitCount(30)
	if v := voters(t, m4.node()); len(v) != 4 {
		t.Fatalf("m4 sees voters %v", v)
	}

	// Idempotent; refusals.
	if err := n.AddVoter(opCtx(t), "m4", m4.cfg.RaftBind, ""); err != nil {
		t.Fatalf("AddVoter again: %v", err)
	}
	wantCode(t, n.AddVoter(opCtx(t), "m4", "127.0.0.1:1", ""), job.CodeAlreadyExists)
	wantCode(t, n.AddVoter(opCtx(t), "m5", m4.cfg.RaftBind, ""), job.CodeAlreadyExists)
	wantCode(t, n.AddVoter(opCtx(t), "m5", "no-port", ""), job.CodeInvalid)
	wantCode(t, n.AddVoter(opCtx(t), "", "127.0.0.1:2", ""), job.CodeInvalid)
	wantCode(t, n.RemovePeer(opCtx(t), "m9", false), job.CodeNotFound)
	wantCode(t, n.RemovePeer(opCtx(t), ld.cfg.NodeID, false), job.CodeInvalid)

	if err := n.RemovePeer(opCtx(t), "m4", false); err != nil {
		t.Fatalf("RemovePeer: %v", err)
	}
	if v := voters(t, n); len(v) != 3 || v["m4"] != "" {
		t.Fatalf("voters after remove: %v", v)
	}
	m4.stop(false)
	proposeMany(t, n, 30, 35, 2)
	c.awaitCount(35)
}

// The leader removes itself only with force; the others go on.
func TestLeaderRemovesItselfWithForce(t *testing.T) {
	c := newTestCluster(t, 3)
	c.startAll()
	ld := c.leader()
	proposeMany(t, ld.node(), 0, 5, 2)
	if err := ld.node().RemovePeer(opCtx(t), ld.cfg.NodeID, true); err != nil {
		t.Fatalf("RemovePeer(self, force): %v", err)
	}
	eventually(t, 10*time.Second, "the old leader to step down", func() bool { return !ld.node().IsLeader() })
	ld.stop(false)
	nl := c.leader()
	if v := voters(t, nl.node()); len(v) != 2 || v[ld.cfg.NodeID] != "" {
		t.Fatalf("voters: %v", v)
	}
	proposeMany(t, nl.node(), 5, 10, 2)
	c.awaitCount(10)
}

func TestLastVoterCannotBeRemoved(t *testing.T) {
	c := newTestCluster(t, 1)
	c.startAll()
	n := c.leader().node()
	wantCode(t, n.RemovePeer(opCtx(t), "m1", true), job.CodeInvalid)
}
