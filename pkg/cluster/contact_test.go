package cluster

import (
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// The contact book's rules, on an injected clock: healthy while the last
// answer is within the window, unreachable only after a whole window of
// unanswered attempts, and nothing said once this node stopped trying (it
// no longer leads).
func TestContactBookJudgesOnlyWhatItSaw(t *testing.T) {
	now := time.Unix(1000, 0)
	b := newContactBook(func() time.Time { return now })
	const w = 3 * time.Second
	id := raft.ServerID("m2")
	if st, _, _ := b.health(id, w); st != PeerUnknown {
		t.Fatalf("never tried: %s", st)
	}
	b.record(id, nil)
	if st, last, _ := b.health(id, w); st != PeerHealthy || !last.Equal(now) {
		t.Fatalf("answered: %s %v", st, last)
	}
	answered := now
	now = now.Add(time.Second)
	b.record(id, errors.New("i/o timeout"))
	if st, _, _ := b.health(id, w); st != PeerHealthy {
		t.Fatalf("one failure inside the window: %s", st)
	}
	now = now.Add(2500 * time.Millisecond)
	b.record(id, errors.New("i/o timeout"))
	if st, _, _ := b.health(id, w); st != PeerUnknown {
		// The last answer is older than the window, the failures are not yet a window long.
		t.Fatalf("failing for less than a window: %s", st)
	}
	now = now.Add(time.Second)
	b.record(id, errors.New("connection refused"))
	st, last, msg := b.health(id, w)
	if st != PeerUnreachable || !last.Equal(answered) || msg != "connection refused" {
		t.Fatalf("failing for a window: %s %v %q", st, last, msg)
	}
	now = now.Add(w + time.Millisecond)
	if st, _, _ := b.health(id, w); st != PeerUnknown {
		t.Fatalf("no attempt for a window (not leading): %s", st)
	}
	b.record(id, nil)
	if st, _, _ := b.health(id, w); st != PeerHealthy {
		t.Fatalf("answered again: %s", st)
	}
}

// A stopped follower is unreachable in the leader's Peers, and healthy
// again once it answers; a follower's own view says nothing of the others.
func TestPeersShowAStoppedFollowerUnreachable(t *testing.T) {
	c := newTestCluster(t, 3)
	c.startAll()
	ld := c.leader()
	fs := c.followers(ld)
	health := func(n *testNode, id string) string {
		ps, err := n.node().Peers()
		if err != nil {
			return "error: " + err.Error()
		}
		for _, p := range ps {
			if p.ID == id {
				return p.Health
			}
		}
		return "absent"
	}
	eventually(t, 20*time.Second, "both followers healthy on the leader", func() bool {
		return health(ld, fs[0].cfg.NodeID) == PeerHealthy && health(ld, fs[1].cfg.NodeID) == PeerHealthy
	})
	if got := health(fs[1], fs[0].cfg.NodeID); got != PeerUnknown {
		t.Fatalf("a follower judged another follower: %s", got)
	}
	if got := health(fs[1], fs[1].cfg.NodeID); got != PeerHealthy {
		t.Fatalf("a follower hearing the leader says of itself: %s", got)
	}
	fs[0].stop(false)
	eventually(t, 30*time.Second, "the stopped follower unreachable on the leader", func() bool {
		return health(ld, fs[0].cfg.NodeID) == PeerUnreachable
	})
	if got := health(ld, fs[1].cfg.NodeID); got != PeerHealthy {
		t.Fatalf("the running follower: %s", got)
	}
	fs[0].start()
	eventually(t, 30*time.Second, "the restarted follower healthy again", func() bool {
		return health(ld, fs[0].cfg.NodeID) == PeerHealthy
	})
}
