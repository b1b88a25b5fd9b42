package cluster

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// suffrages maps each member of n's configuration to its suffrage.
func suffrages(t *testing.T, n *Node) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, p := range peersOf(t, n) {
		out[p.ID] = p.Suffrage
	}
	return out
}

func TestLocalStatusOfLeaderAndFollower(t *testing.T) {
	c := newTestCluster(t, 3)
	c.startAll()
	ld := c.leader()
	proposeMany(t, ld.node(), 0, 5, 2)
	c.awaitCount(5)
	ls := ld.node().LocalStatus()
	if ls.State != "Leader" || !ls.HearsLeader || ls.LeaderID != ld.cfg.NodeID || ls.Term == 0 ||
		ls.CommitIndex == 0 || ls.AppliedIndex == 0 || ls.LastLogIndex < ls.CommitIndex {
		t.Fatalf("leader status %+v", ls)
	}
	f := c.followers(ld)[0]
	eventually(t, 10*time.Second, "the follower hears the leader", func() bool {
		fs := f.node().LocalStatus()
		return fs.State == "Follower" && fs.HearsLeader && fs.LeaderID == ld.cfg.NodeID && fs.Term == ls.Term
	})
	f.stop(false)
	if st := (&Node{}).LocalStatus(); st.State != "Shutdown" {
		t.Fatalf("a node not started says %+v", st)
	}
}

// A fourth master joins as a non-voter (not in the quorum), catches up and
// is promoted; promote refuses a lagging, an unreachable and an unknown
// member, and add-voter refuses to promote past that check.
func TestNonvoterJoinsThenIsPromoted(t *testing.T) {
	c := newTestCluster(t, 3)
	c.startAll()
	ld := c.leader()
	n := ld.node()
	proposeMany(t, n, 0, 20, 4)
	c.awaitCount(20)

	m4 := c.addNode("m4")
	m4.cfg.Join = true // waits for the leader instead of bootstrapping
	m4.start()
	if err := c.followers(ld)[0].node().AddNonvoter(opCtx(t), "m4", m4.cfg.RaftBind, "rpc-m4:9090"); !errors.Is(err, raftfsm.ErrNotLeader) {
		t.Fatalf("AddNonvoter on a follower: %v", err)
	}
	if err := n.AddNonvoter(opCtx(t), "m4", m4.cfg.RaftBind, "rpc-m4:9090"); err != nil {
		t.Fatalf("AddNonvoter: %v", err)
	}
	if s := suffrages(t, n); len(s) != 4 || s["m4"] != "Nonvoter" {
		t.Fatalf("configuration after add: %v", s)
	}
	if v := voters(t, n); len(v) != 3 {
		t.Fatalf("a non-voter counts as a voter: %v", v)
	}
	c.awaitCount(20) // replicated to m4 too
	if err := n.AddNonvoter(opCtx(t), "m4", m4.cfg.RaftBind, ""); err != nil {
		t.Fatalf("AddNonvoter again: %v", err)
	}
	wantCode(t, n.AddNonvoter(opCtx(t), c.followers(ld)[0].cfg.NodeID, c.followers(ld)[0].cfg.RaftBind, ""), job.CodeAlreadyExists)
	wantCode(t, n.AddNonvoter(opCtx(t), "m5", m4.cfg.RaftBind, ""), job.CodeAlreadyExists)
	wantCode(t, n.AddNonvoter(opCtx(t), "m5", "no-port", ""), job.CodeInvalid)
	wantCode(t, n.AddVoter(opCtx(t), "m4", m4.cfg.RaftBind, ""), job.CodeAlreadyExists) // promote is the way

	// m4 has the entries (awaitCount); it hears the leader once an
	// AppendEntries succeeds after its catch-up, which may be a moment later.
	eventually(t, 10*time.Second, "m4 hears the leader as a follower", func() bool {
		st := m4.node().LocalStatus()
		return st.State == "Follower" && st.HearsLeader
	})

	wantCode(t, n.Promote(opCtx(t), "m9", 0, 5), job.CodeNotFound)
	if err := c.followers(ld)[0].node().Promote(opCtx(t), "m4", 0, 5); !errors.Is(err, raftfsm.ErrNotLeader) {
		t.Fatalf("Promote on a follower: %v", err)
	}
	// Lagging: the member says it applied nothing, 20+ entries are committed.
	err := n.Promote(opCtx(t), "m4", 0, 5)
	wantCode(t, err, job.CodeUnavailable)
	if !strings.Contains(err.Error(), "entries behind") {
		t.Fatalf("lag refusal: %v", err)
	}
	if s := suffrages(t, n); s["m4"] != "Nonvoter" {
		t.Fatalf("a refused promote changed the configuration: %v", s)
	}

	// Unreachable: stopped, the leader's contact turns unreachable.
	applied := m4.node().AppliedIndex()
	m4.stop(false)
	eventually(t, 10*time.Second, "m4 unreachable from the leader", func() bool {
		for _, p := range peersOf(t, n) {
			if p.ID == "m4" {
				return p.Health == PeerUnreachable
			}
		}
		return false
	})
	err = n.Promote(opCtx(t), "m4", applied, PromoteMaxLag)
	wantCode(t, err, job.CodeUnavailable)
	if !strings.Contains(err.Error(), "unreachable") {
		t.Fatalf("unreachable refusal: %v", err)
	}
	proposeMany(t, n, 20, 30, 4) // commits with m4 down: it is not in the quorum

	m4.start()
	c.awaitCount(30)
	if err := n.Promote(opCtx(t), "m4", m4.node().AppliedIndex(), 5); err != nil {
		t.Fatalf("Promote once caught up: %v", err)
	}
	if v := voters(t, n); len(v) != 4 {
		t.Fatalf("voters after promote: %v", v)
	}
	if err := n.Promote(opCtx(t), "m4", 0, 5); err != nil {
		t.Fatalf("Promote of a voter is a no-op: %v", err)
	}
	proposeMany(t, n, 30, 35, 2)
	c.awaitCount(35)
}
