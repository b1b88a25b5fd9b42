package cluster

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/config"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

func mustPropose(t *testing.T, n *Node, i int) *journal.TApplyResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := n.Propose(ctx, testCmd(i))
	if err != nil {
		t.Fatalf("Propose(%d) on %s: %v", i, n.ID(), err)
	}
	if resp.GetCode() != journal.TApplyCode_OK {
		t.Fatalf("Propose(%d) on %s: code %s, want OK", i, n.ID(), resp.GetCode())
	}
	return resp
}

// proposeMany sends commands [from, to) through n with `workers` in flight.
func proposeMany(t *testing.T, n *Node, from, to, workers int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	next := make(chan int)
	errs := make(chan error, to-from)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				resp, err := n.Propose(ctx, testCmd(i))
				switch {
				case err != nil:
					errs <- err
				case resp.GetCode() != journal.TApplyCode_OK:
					errs <- errors.New("command " + strconv.Itoa(i) + ": code " + resp.GetCode().String())
				}
			}
		}()
	}
	for i := from; i < to; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("proposal through %s failed: %v", n.ID(), err)
	}
}

func TestElectionAndProposeOnLeader(t *testing.T) {
	c := newTestCluster(t, 3)
	c.startAll()
	ld := c.leader()
	n := ld.node()

	if n.LeaderTerm() == 0 {
		eventually(t, 5*time.Second, "LeaderTerm set on the leader", func() bool { return n.LeaderTerm() > 0 })
	}
	for _, f := range c.followers(ld) {
		if f.node().LeaderTerm() != 0 {
			t.Errorf("%s: LeaderTerm %d on a follower, want 0", f.cfg.NodeID, f.node().LeaderTerm())
		}
		eventually(t, 5*time.Second, "followers learn the leader", func() bool {
			id, rpc := f.node().Leader()
			return id == ld.cfg.NodeID && rpc == "rpc-"+ld.cfg.NodeID
		})
	}

	resp := mustPropose(t, n, 1)
	if !resp.IsSetID() || resp.GetID() == 0 {
		t.Errorf("response carries no id: %v", resp)
	}
	c.awaitCount(1)
	if c.fwd.forwards.Load() != 0 {
		t.Errorf("a proposal on the leader was forwarded")
	}

	ctx := context.Background()
	if err := n.ConsistentRead(ctx); err != nil {
		t.Errorf("ConsistentRead on the leader: %v", err)
	}
	for _, f := range c.followers(ld) {
		if err := f.node().ConsistentRead(ctx); !errors.Is(err, raftfsm.ErrNotLeader) {
			t.Errorf("ConsistentRead on follower %s: %v, want ErrNotLeader", f.cfg.NodeID, err)
		}
		if err := f.node().WaitForLeader(ctx); err != nil {
			t.Errorf("WaitForLeader on %s: %v", f.cfg.NodeID, err)
		}
	}

	peers, err := n.Peers()
	if err != nil {
		t.Fatalf("Peers: %v", err)
	}
	leaders := 0
	for i, p := range peers {
		want := c.peers[i]
		if p.ID != want.ID || p.RaftAddress != want.RaftAddress || p.RPCAddress != want.RPCAddress || p.Suffrage != "Voter" {
			t.Errorf("peer %d = %+v, want %+v as a voter", i, p, want)
		}
		if p.Self != (p.ID == ld.cfg.NodeID) {
			t.Errorf("peer %s: Self = %v", p.ID, p.Self)
		}
		if p.Leader {
			leaders++
		}
	}
	if leaders != 1 {
		t.Errorf("%d peers marked leader, want 1", leaders)
	}
	if s := n.Stats(); s["state"] != "Leader" || s["node_id"] != ld.cfg.NodeID {
		t.Errorf("Stats: state %q node_id %q", s["state"], s["node_id"])
	}

	// Operator transfers: checked on the wrong node, to itself, to a stranger,
	// then to whichever voter raft picks.
	if err := c.followers(ld)[0].node().TransferLeadership(""); !errors.Is(err, raftfsm.ErrNotLeader) {
		t.Errorf("TransferLeadership on a follower: %v, want ErrNotLeader", err)
	}
	if err := n.TransferLeadership(ld.cfg.NodeID); err != nil || !n.IsLeader() {
		t.Errorf("TransferLeadership to itself: %v (leader %v), want a no-op", err, n.IsLeader())
	}
	if err := n.TransferLeadership("stranger"); err == nil {
		t.Errorf("TransferLeadership to a non-member succeeded")
	}
	if err := n.TransferLeadership(""); err != nil {
		t.Fatalf("TransferLeadership to any: %v", err)
	}
	if id, _ := n.Leader(); id == "" || id == ld.cfg.NodeID {
		t.Errorf("after the transfer the old leader names %q as leader", id)
	}
	if nl := c.leader(); nl == ld {
		t.Errorf("%s still leads after the transfer", ld.cfg.NodeID)
	}
}

func TestProposeOnFollowerForwards(t *testing.T) {
	c := newTestCluster(t, 3)
	c.startAll()
	ld := c.leader()
	f := c.followers(ld)[0]
	eventually(t, 5*time.Second, "follower learns the leader", func() bool {
		id, _ := f.node().Leader()
		return id == ld.cfg.NodeID
	})

	mustPropose(t, f.node(), 1)
	if got := c.fwd.forwards.Load(); got != 1 {
		t.Errorf("forwards = %d, want 1", got)
	}
	c.awaitCount(1)

	// A repeated command reaches the FSM and its guard answer comes back as
	// a response, not an error.
	resp, err := f.node().Propose(context.Background(), testCmd(1))
	if err != nil || resp.GetCode() != journal.TApplyCode_ALREADY_EXISTS {
		t.Errorf("duplicate through follower: resp %v err %v, want ALREADY_EXISTS", resp, err)
	}

	if _, err := f.node().ApplyLocal(context.Background(), testCmd(2)); !errors.Is(err, raftfsm.ErrNotLeader) {
		t.Errorf("ApplyLocal on a follower: %v, want ErrNotLeader", err)
	}
}

func TestProposeWithoutQuorumFailsWithNoLeader(t *testing.T) {
	c := newTestCluster(t, 3)
	c.nodes[0].start() // alone: can never win an election
	n := c.nodes[0].node()

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := n.Propose(ctx, testCmd(1)); !errors.Is(err, raftfsm.ErrNoLeader) {
		t.Errorf("Propose without quorum: %v, want ErrNoLeader", err)
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel2()
	if err := n.WaitForLeader(ctx2); !errors.Is(err, raftfsm.ErrNoLeader) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitForLeader without quorum: %v, want ErrNoLeader and DeadlineExceeded", err)
	}
	if n.IsLeader() || n.LeaderTerm() != 0 {
		t.Errorf("a lone node claims leadership")
	}
	if err := n.Shutdown(false); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if _, err := n.Propose(context.Background(), testCmd(1)); !errors.Is(err, ErrShutdown) {
		t.Errorf("Propose after Shutdown: %v, want ErrShutdown", err)
	}
}

// 1,000 proposals through a follower, then the leader dies: the new leader
// has every acknowledged write and accepts new ones; the dead node, started
// again from its data dir, catches up.
// It runs on both raft log stores.
func TestFailoverKeepsAcknowledgedWritesAndRestartCatchesUp(t *testing.T) {
	eachLogStore(t, failoverKeepsAcknowledgedWritesAndRestartCatchesUp)
}

func failoverKeepsAcknowledgedWritesAndRestartCatchesUp(t *testing.T, store clusterOpt) {
	const total = 1000
	c := newTestCluster(t, 3, store)
	c.startAll()
	ld := c.leader()
	via := c.followers(ld)[0]
	eventually(t, 5*time.Second, "follower learns the leader", func() bool {
		id, _ := via.node().Leader()
		return id == ld.cfg.NodeID
	})

	t0 := time.Now()
	proposeMany(t, via.node(), 0, total, 32)
	t.Logf("%d proposals through a follower in %s", total, time.Since(t0))
	if got := c.fwd.forwards.Load(); got < total {
		t.Errorf("forwards = %d, want >= %d", got, total)
	}

	oldTerm := ld.node().LeaderTerm()
	t0 = time.Now()
	ld.stop(false) // an unplanned loss: no transfer
	nl := c.leader()
	if err := nl.node().ConsistentRead(context.Background()); err != nil {
		t.Fatalf("ConsistentRead on the new leader: %v", err)
	}
	if got := nl.currentFSM().Count(); got != total {
		t.Fatalf("new leader %s has %d commands, want %d", nl.cfg.NodeID, got, total)
	}
	if term := nl.node().LeaderTerm(); term <= oldTerm {
		eventually(t, 5*time.Second, "new leader's term recorded", func() bool { return nl.node().LeaderTerm() > oldTerm })
	}
	for _, tn := range c.followers(nil) {
		mustPropose(t, tn.node(), total) // on the new leader or forwarded to it
		break
	}
	t.Logf("failover to %s and first write in %s", nl.cfg.NodeID, time.Since(t0))
	c.awaitCount(total + 1)

	ld.start() // same data dir, fresh FSM: replays its log, then catches up
	c.awaitCount(total + 1)
	mustPropose(t, ld.node(), total+1)
	c.awaitCount(total + 2)
}

// A node that was down while the others snapshotted and truncated their log
// can only come back through InstallSnapshot. boltdb only: raft-wal
// truncates its head logically and keeps serving the entries still in its
// open segment (64 MiB), so a lagging wal follower of a wal leader catches
// up from the log (TestFailoverKeepsAcknowledgedWritesAndRestartCatchesUp).
func TestLaggingNodeCatchesUpBySnapshotInstall(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) {
		cfg.LogStore = config.RaftLogStoreBoltDB // named: the default (auto) gives a new data dir wal
		cfg.TrailingLogs = 10
		cfg.SnapshotThreshold = 1 << 30 // only explicit snapshots
	})
	c.startAll()
	ld := c.leader()
	lag := c.followers(ld)[0]
	proposeMany(t, ld.node(), 0, 20, 4)
	c.awaitCount(20)
	lagLast := lag.node().r.Load().LastIndex()
	lag.stop(false)

	proposeMany(t, ld.node(), 20, 320, 16)
	if err := ld.node().Snapshot(); err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	first, err := ld.node().st.store.FirstIndex()
	if err != nil {
		t.Fatal(err)
	}
	if first <= lagLast+1 {
		t.Fatalf("leader log starts at %d; want it truncated past the lagging node's last index %d", first, lagLast)
	}
	snapIndex, _ := strconv.ParseUint(ld.node().Stats()["last_snapshot_index"], 10, 64)

	lag.start()
	c.awaitCount(320)
	if got := lag.currentFSM().Restores(); got != 1 {
		t.Errorf("lagging node restored %d snapshots, want exactly 1 (the installed one)", got)
	}
	// Raft records the installed snapshot just after the FSM restored it.
	eventually(t, 10*time.Second, "the lagging node records the installed snapshot", func() bool {
		got, _ := strconv.ParseUint(lag.node().Stats()["last_snapshot_index"], 10, 64)
		return got >= snapIndex
	})
	mustPropose(t, lag.node(), 320)
	c.awaitCount(321)
}
