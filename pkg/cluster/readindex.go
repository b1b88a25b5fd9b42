package cluster

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// Current state for decisions (DESIGN.md §13.5, §13.8): a master refuses
// for good, or validates a client write, only on a replica known to hold
// everything committed when the request arrived. The leader confirms its
// leadership (VerifyLeader) and names its commit index (ReadIndex); a
// replica is current for that index once its FSM reflects every entry
// through it (CaughtUp).

// VerifyLeader returns nil once a quorum has confirmed, after the call
// began, that this node leads in term: the term the caller read
// (LeaderTerm) before the state its decision rests on. A confirmation in a
// later term would prove nothing about that state — this node may have
// been deposed without knowing it when it read it, and won a later term
// since — so the term must be the node's current one from the call to the
// end of the confirmation. On a follower, when term is not (or no longer)
// the current term, or when the confirmation fails (a newer term, a
// partition), it returns an error wrapping raftfsm.ErrNotLeader. It costs
// one heartbeat round trip to a majority.
func (n *Node) VerifyLeader(ctx context.Context, term uint64) error {
	r, err := n.running()
	if err != nil {
		return err
	}
	if r.State() != raft.Leader {
		return fmt.Errorf("cluster: verify leadership on %s: %w", n.cfg.NodeID, raftfsm.ErrNotLeader)
	}
	return n.confirmLeadership(ctx, r, term)
}

// confirmLeadership returns nil once a quorum of voters has acknowledged
// this leader in answer to requests sent after the call began, and term is
// still raft's current term once they have: terms only grow, so a caller
// that read term before its view, and finds it again at the end, led in
// term throughout, and every one of those requests carried it. (The check
// at the start only saves a round that cannot succeed.)
//
// raft's VerifyLeader alone does not prove that: it counts the answer to
// any AppendEntries that returns after the call, including one sent before
// it (hashicorp/raft 1.8 replication.go, notifyAll), so a heartbeat in
// flight when the followers elected another leader could still confirm a
// call; and it confirms whatever term raft is in when it runs. VerifyLeader
// is kept (it also sends a heartbeat to every follower at once and fails
// when raft steps down); then the contact book must show a quorum of
// acknowledgements numbered after mark, which the heartbeats that
// VerifyLeader started provide one round trip later at most.
func (n *Node) confirmLeadership(ctx context.Context, r *raft.Raft, term uint64) error {
	if r.CurrentTerm() != term {
		return readError("verify leadership", fmt.Errorf("%w: term %d is not the current term", raft.ErrLeadershipLost, term))
	}
	mark := n.contacts.mark()
	if err := waitFuture(ctx, r.VerifyLeader()); err != nil {
		return readError("verify leadership", err)
	}
	cf := r.GetConfiguration()
	if err := cf.Error(); err != nil {
		return readError("verify leadership", err)
	}
	var peers []raft.ServerID // the other voters
	voters := 0
	for _, s := range cf.Configuration().Servers {
		if s.Suffrage != raft.Voter {
			continue
		}
		voters++
		if s.ID != raft.ServerID(n.cfg.NodeID) {
			peers = append(peers, s.ID)
		}
	}
	need := voters/2 + 1 - (voters - len(peers)) // a quorum, less this node's own vote
	for {
		acked, changed := n.contacts.acked.Wait(), n.leaderChange.Wait()
		if n.contacts.ackedSince(peers, mark) >= need {
			if r.CurrentTerm() != term || r.State() != raft.Leader {
				return readError("verify leadership", fmt.Errorf("%w: term %d ended during the confirmation", raft.ErrLeadershipLost, term))
			}
			return nil
		}
		if r.State() != raft.Leader {
			return readError("verify leadership", raft.ErrNotLeader)
		}
		select {
		case <-acked:
		case <-changed:
		case <-ctx.Done():
			return readError("verify leadership", fmt.Errorf("%w: %w", errAbandoned, ctx.Err()))
		}
	}
}

// ReadIndex returns this leader's read index: its commit index at a moment
// after the call began, confirmed by a quorum in the term it was read in
// (confirmLeadership). A replica whose FSM
// reflects every entry through the read index (CaughtUp) holds every write
// any client saw complete before the call. A leader that has not finished
// its term's barrier yet (its commit index may still trail its
// predecessor's) runs the barrier first. On a follower it returns an error
// wrapping raftfsm.ErrNotLeader: ask the leader.
//
// Calls that arrive together share one confirmation (readBatches), as etcd
// batches its read indexes: every admission asks for one, and each
// VerifyLeader is a future, a trip through raft's leader loop and a wait.
func (n *Node) ReadIndex(ctx context.Context) (uint64, error) {
	r, err := n.running()
	if err != nil {
		return 0, err
	}
	if r.State() != raft.Leader {
		return 0, fmt.Errorf("cluster: read index on %s: %w", n.cfg.NodeID, raftfsm.ErrNotLeader)
	}
	b, start := n.reads.join()
	if start {
		go n.runReadRounds()
	}
	select {
	case <-b.done:
		return b.idx, b.err
	case <-ctx.Done():
		return 0, readError("read index", fmt.Errorf("%w: %w", errAbandoned, ctx.Err()))
	}
}

// LeaderIndex is this leader's commit index as it stands, unconfirmed: ok
// only while this node leads in a term whose barrier it has applied
// (LeaderTerm), so the index covers every entry its predecessors
// committed. Nothing proves it current — this node may have been deposed
// without knowing it — so it serves only a decision that the FSM takes
// again when the decision's own entry applies (admin: an admission it
// journals); an answer given on the view itself needs ReadIndex.
func (n *Node) LeaderIndex() (uint64, bool) {
	r, err := n.running()
	if err != nil || n.LeaderTerm() == 0 {
		return 0, false
	}
	return r.CommitIndex(), true
}

// readRoundTimeout bounds one shared confirmation (its barrier, if any, and
// its VerifyLeader); each caller still waits only as long as its own ctx.
const readRoundTimeout = 10 * time.Second

// readBatch is the callers of one shared confirmation; done is closed once
// idx and err are set.
type readBatch struct {
	done    chan struct{}
	callers int // joined so far (tests)
	idx     uint64
	err     error
}

// readBatches runs one confirmation at a time for the callers waiting for
// one. A caller joins the batch that has not started yet (next), never the
// one in flight: the round that serves it reads the commit index and
// confirms it after it took that batch, so after every one of its callers
// arrived — the guarantee each caller would have had with a round of its
// own.
type readBatches struct {
	mu      sync.Mutex
	next    *readBatch // callers waiting for the next round; nil when none
	running bool       // a runner goroutine is serving rounds
}

// join returns the batch the caller waits for, and start when no runner is
// serving rounds: the caller must then start one (runReadRounds).
func (q *readBatches) join() (b *readBatch, start bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.next == nil {
		q.next = &readBatch{done: make(chan struct{})}
	}
	q.next.callers++
	start = !q.running
	q.running = true
	return q.next, start
}

// take hands the runner the waiting batch, or nil, and then it must stop.
func (q *readBatches) take() *readBatch {
	q.mu.Lock()
	defer q.mu.Unlock()
	b := q.next
	q.next = nil
	if b == nil {
		q.running = false
	}
	return b
}

// runReadRounds serves batches until none waits.
func (n *Node) runReadRounds() {
	for b := n.reads.take(); b != nil; b = n.reads.take() {
		b.idx, b.err = n.readIndexRound()
		close(b.done)
	}
}

// readIndexRound is one confirmation: the term, the barrier a new leader
// owes, the commit index, then the confirmation in that term.
func (n *Node) readIndexRound() (uint64, error) {
	r, err := n.running()
	if err != nil {
		return 0, err
	}
	n.readRounds.Add(1)
	ctx, cancel := context.WithTimeout(context.Background(), readRoundTimeout)
	defer cancel()
	// The index is read in term, and only a confirmation in that same term
	// proves it current (confirmLeadership).
	term := r.CurrentTerm()
	if n.LeaderTerm() != term {
		// The term's first entry may not be committed yet, and with it the
		// predecessor's last entries: the barrier commits and applies them.
		if err := waitFuture(ctx, r.Barrier(n.timeoutFor(ctx))); err != nil {
			return 0, readError("barrier", err)
		}
	}
	idx := r.CommitIndex()
	if h := n.readRoundHook; h != nil {
		h()
	}
	if err := n.confirmLeadership(ctx, r, term); err != nil {
		return 0, err
	}
	return idx, nil
}

// maxCaughtUpScan bounds how many log entries CaughtUp reads to tell a
// trailing no-op from a command: past it, the replica counts as behind.
const maxCaughtUpScan = 256

// CaughtUp reports whether a local FSM whose last applied command entry is
// fsmApplied (raftfsm.State.AppliedIndex) reflects every entry through
// index: raft has handed every entry through index to the FSM, and none of
// the entries after fsmApplied up to index is a command (raft's own entries,
// such as a new term's no-op or a configuration change, never reach the
// FSM, so fsmApplied may stay below index for good). Entries already
// compacted into a snapshot count as applied: the FSM restored them.
// False before Start and after Shutdown.
func (n *Node) CaughtUp(index, fsmApplied uint64) bool {
	r, err := n.running()
	if err != nil {
		return false
	}
	if fsmApplied >= index {
		return true
	}
	if r.AppliedIndex() < index || index-fsmApplied > maxCaughtUpScan {
		return false
	}
	var l raft.Log
	for i := index; i > fsmApplied; i-- {
		if err := n.st.logs.GetLog(i, &l); err != nil {
			// Compacted (raft.ErrLogNotFound): the snapshot holding it was
			// restored into the FSM. Any other error: be conservative.
			return err == raft.ErrLogNotFound
		}
		if l.Type == raft.LogCommand {
			return false
		}
	}
	return true
}

// leaderOnlyKey marks a context whose writes must not be forwarded.
type leaderOnlyKey struct{}

// LeaderOnly returns a context with which Propose writes only on this node
// as the leader, exactly as ApplyLocal: on a follower (or a node that has
// just lost leadership) it fails with an error wrapping raftfsm.ErrNotLeader
// and never forwards the command. The report handler proposes with it: a
// report judged on this node's view must be written by this node's
// leadership, and the backend retries elsewhere when it cannot be
// (DESIGN.md §13.5).
func LeaderOnly(ctx context.Context) context.Context {
	return context.WithValue(ctx, leaderOnlyKey{}, true)
}

// IsLeaderOnly reports whether ctx was made by LeaderOnly.
func IsLeaderOnly(ctx context.Context) bool {
	v, _ := ctx.Value(leaderOnlyKey{}).(bool)
	return v
}
