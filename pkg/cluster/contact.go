package cluster

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/lancemaster/lancemaster/pkg/broadcast"
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
//
// It also keeps the evidence a leadership confirmation needs
// (confirmLeadership): every AppendEntries takes a sequence number when it
// is sent, and each peer's highest number answered with success is kept,
// so "this peer acknowledged this leader in answer to a request sent after
// mark" is a comparison of two integers.
type contactBook struct {
	now func() time.Time

	sends atomic.Uint64    // AppendEntries sent so far: the next one's number is sends+1
	acked broadcast.Signal // broadcast on every new acknowledgement

	mu    sync.Mutex
	peers map[raft.ServerID]*peerContact
}

type peerContact struct {
	firstAttempt time.Time // of the current streak without an answer (zero once answered)
	lastAttempt  time.Time
	lastContact  time.Time
	lastErr      string
	ackedSend    uint64 // the highest send number the peer answered with success
}

func newContactBook(now func() time.Time) *contactBook {
	if now == nil {
		now = time.Now
	}
	return &contactBook{now: now, peers: map[raft.ServerID]*peerContact{}}
}

// mark is the number of the last AppendEntries sent: any send numbered
// above it began after this call.
func (b *contactBook) mark() uint64 { return b.sends.Load() }

// send numbers an AppendEntries about to be sent.
func (b *contactBook) send() uint64 { return b.sends.Add(1) }

// ackedSince counts the peers among ids that answered with success an
// AppendEntries sent after mark.
func (b *contactBook) ackedSince(ids []raft.ServerID, mark uint64) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, id := range ids {
		if p := b.peers[id]; p != nil && p.ackedSend > mark {
			n++
		}
	}
	return n
}

// record notes the outcome of the AppendEntries numbered seq to id; ok says
// the peer answered it with success (it holds this leader's term).
func (b *contactBook) record(id raft.ServerID, seq uint64, err error, ok bool) {
	t := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.peers[id]
	if p == nil {
		p = &peerContact{}
		b.peers[id] = p
	}
	if err == nil && ok && seq > p.ackedSend {
		p.ackedSend = seq
		defer b.acked.Broadcast()
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
	seq := t.book.send()
	err := t.NetworkTransport.AppendEntries(id, target, args, resp)
	t.book.record(id, seq, err, resp.Success)
	return err
}
