package masterkit_test

import (
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/pkg/config"
	"github.com/lancemaster/lancemaster/pkg/master"
	"github.com/lancemaster/lancemaster/pkg/master/masterkit"
)

// A peer list that does not name three members is refused before anything
// starts.
func TestNewRefusesAPeerListOfTwo(t *testing.T) {
	peers := []config.Peer{{ID: "a", RaftAddress: "127.0.0.1:1", RPCAddress: "127.0.0.1:2"},
		{ID: "b", RaftAddress: "127.0.0.1:3", RPCAddress: "127.0.0.1:4"}}
	if c, err := masterkit.New(masterkit.Config{Dir: t.TempDir(), Peers: peers}); err == nil {
		c.Close()
		t.Fatal("two peers accepted")
	}
	if _, err := masterkit.New(masterkit.Config{}); err == nil {
		t.Fatal("no Dir accepted")
	}
}

// The kit's whole life without a testing.T in it: three masters named from
// FirstID with their stores under Dir, a leader, a kill, another leader, a
// restart from the data dir (options taken again), and Close stopping all.
func TestStartKillRestartClose(t *testing.T) {
	dir := t.TempDir()
	var starts atomic.Int64
	c, err := masterkit.Start(masterkit.Config{Dir: dir, FirstID: 7, FakeBackend: true,
		Tweak: func(i int, n *config.Node) { n.SnapshotThreshold = 100 + uint64(i) },
		Options: func(int) master.Options {
			starts.Add(1)
			return master.Options{}
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i, n := range c.Nodes {
		if want := "m" + string(rune('7'+i)); n.NodeID != want || n.DataDir != filepath.Join(dir, want) ||
			n.SnapshotThreshold != 100+uint64(i) || n.Timeouts != config.RaftProfileFast {
			t.Fatalf("node %d: id %s dir %s threshold %d timeouts %s", i, n.NodeID, n.DataDir, n.SnapshotThreshold, n.Timeouts)
		}
	}
	if c.Backend == nil || c.Backend.Addr() == "" {
		t.Fatal("no fake backend")
	}
	l, lm, err := c.AwaitLeader(-1, 15*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if c.Term() == 0 || lm != c.Master(l) {
		t.Fatalf("term %d, leader %d", c.Term(), l)
	}
	if err := c.Stop(l, false); err != nil {
		t.Fatal(err)
	}
	if c.Master(l) != nil {
		t.Fatal("a stopped master is still listed")
	}
	nl, _, err := c.AwaitLeader(l, 15*time.Second)
	if err != nil || nl == l {
		t.Fatalf("no other leader: %d %v", nl, err)
	}
	if err := c.StartMaster(l); err != nil {
		t.Fatal(err)
	}
	if starts.Load() != 4 || c.Master(l) == nil {
		t.Fatalf("%d starts", starts.Load())
	}
	c.Close()
	for i, m := range c.LiveMasters() {
		if m != nil {
			t.Fatalf("master %d still running after Close", i)
		}
	}
}
