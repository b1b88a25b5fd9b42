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
	b.record(id, 0, nil, false)
	if st, last, _ := b.health(id, w); st != PeerHealthy || !last.Equal(now) {
		t.Fatalf("answered: %s %v", st, last)
	}
	answered := now
	now = now.Add(time.Second)
	b.record(id, 0, errors.New("i/o timeout"), false)
	if st, _, _ := b.health(id, w); st != PeerHealthy {
		t.Fatalf("one failure inside the window: %s", st)
	}
	now = now.Add(2500 * time.Millisecond)
	b.record(id, 0, errors.New("i/o timeout"), false)
	if st, _, _ := b.health(id, w); st != PeerUnknown {
		// The last answer is older than the window, the failures are not yet a window long.
		t.Fatalf("failing for less than a window: %s", st)
	}
	now = now.Add(time.Second)
	b.record(id, 0, errors.New("connection refused"), false)
	st, last, msg := b.health(id, w)
	if st != PeerUnreachable || !last.Equal(answered) || msg != "connection refused" {
		t.Fatalf("failing for a window: %s %v %q", st, last, msg)
	}
	now = now.Add(w + time.Millisecond)
	if st, _, _ := b.health(id, w); st != PeerUnknown {
		t.Fatalf("no attempt for a window (not leading): %s", st)
	}
	b.record(id, 0, nil, false)
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

// A leadership confirmation counts only acknowledgements of requests sent
// after its mark: an answer that arrives later to a request sent before it
// proves nothing about the time since, nor does a refusal (a follower of a
// newer term answers without success) or a failed call.
func TestContactBookCountsOnlyAcksOfLaterSends(t *testing.T) {
	b := newContactBook(nil)
	m2, m3 := raft.ServerID("m2"), raft.ServerID("m3")
	peers := []raft.ServerID{m2, m3}
	inFlight := b.send() // a heartbeat to m2 under way
	mark := b.mark()
	b.record(m2, inFlight, nil, true) // its answer arrives after the mark
	if n := b.ackedSince(peers, mark); n != 0 {
		t.Fatalf("an answer to a request sent before the mark counted: %d", n)
	}
	refused, failed := b.send(), b.send()
	b.record(m2, refused, nil, false)
	b.record(m3, failed, errors.New("connection refused"), true)
	if n := b.ackedSince(peers, mark); n != 0 {
		t.Fatalf("a refusal or a failed call counted: %d", n)
	}
	changed := b.acked.Wait()
	fresh := b.send()
	b.record(m3, fresh, nil, true)
	select {
	case <-changed:
	default:
		t.Fatal("a new acknowledgement did not wake the waiters")
	}
	if n := b.ackedSince(peers, mark); n != 1 {
		t.Fatalf("m3 acknowledged a request sent after the mark: %d peers, want 1", n)
	}
	b.record(m3, inFlight, nil, true) // an older answer never lowers the record
	if n := b.ackedSince(peers, mark); n != 1 {
		t.Fatalf("after an older answer: %d peers, want 1", n)
	}
}
