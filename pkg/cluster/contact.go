package cluster

import (
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Peer health as the leader sees it (operator raft list-peers, the
// lancemaster_raft_peer_healthy gauge). Raft exposes no per-follower
// contact time, so the transport records it: every AppendEntries call the
// leader makes — a heartbeat at least every tenth of the heartbeat timeout,
// or a replication — is an attempt, and one answered without error is a
// contact. A follower is healthy while its last contact is at most
// contactWindows heartbeat timeouts old. Nothing is inferred from silence
// before that window has passed since the first attempt.
const (
	PeerHealthy     = "healthy"
	PeerUnreachable = "unreachable" // attempts for a whole window, no answer in it
	PeerUnknown     = "unknown"     // this node does not lead, or has not tried long enough
)

// contactWindows: a follower is healthy while it answered within this many
// heartbeat timeouts (thirty heartbeats when idle).
const contactWindows = 3

// contactBook is the per-peer record. Safe for concurrent use: raft's
// replication goroutines write it, admin and metric reads read it.
type contactBook struct {
	now func() time.Time

	mu    sync.Mutex
	peers map[raft.ServerID]*peerContact
}

type peerContact struct {
	firstAttempt time.Time // of the current streak without an answer (zero once answered)
	lastAttempt  time.Time
	lastContact  time.Time
	lastErr      string
}

func newContactBook(now func() time.Time) *contactBook {
	if now == nil {
		now = time.Now
	}
	return &contactBook{now: now, peers: map[raft.ServerID]*peerContact{}}
}

func (b *contactBook) record(id raft.ServerID, err error) {
	t := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.peers[id]
	if p == nil {
		p = &peerContact{}
		b.peers[id] = p
	}
	p.lastAttempt = t
	if err == nil {
		p.lastContact, p.firstAttempt, p.lastErr = t, time.Time{}, ""
		return
	}
	if p.firstAttempt.IsZero() {
		p.firstAttempt = t
	}
	p.lastErr = err.Error()
}

// health judges one peer. window is contactWindows heartbeat timeouts.
// Attempts older than the window mean this node stopped contacting the
// peer (it no longer leads): nothing is said then.
func (b *contactBook) health(id raft.ServerID, window time.Duration) (state string, lastContact time.Time, lastErr string) {
	t := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.peers[id]
	if p == nil || t.Sub(p.lastAttempt) > window {
		if p != nil {
			lastContact = p.lastContact
		}
		return PeerUnknown, lastContact, ""
	}
	switch {
	case !p.lastContact.IsZero() && t.Sub(p.lastContact) <= window:
		return PeerHealthy, p.lastContact, ""
	case !p.firstAttempt.IsZero() && t.Sub(p.firstAttempt) >= window:
		return PeerUnreachable, p.lastContact, p.lastErr
	}
	return PeerUnknown, p.lastContact, p.lastErr
}

// contactTransport is the raft transport with AppendEntries recorded in a
// contactBook. Every other method (pipelining, votes, snapshots, Close,
// RequestPreVote) is the NetworkTransport's own.
type contactTransport struct {
	*raft.NetworkTransport
	book *contactBook
}

func (t *contactTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress,
	args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	err := t.NetworkTransport.AppendEntries(id, target, args, resp)
	t.book.record(id, err)
	return err
}
