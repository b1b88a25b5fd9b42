package cluster

import (
	"context"
	"fmt"

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
// began, that this node still leads: no other leader can have committed an
// entry this node has not seen. On a follower, or when the confirmation
// fails (a newer term, a partition), it returns an error wrapping
// raftfsm.ErrNotLeader. It costs one heartbeat round trip to a majority.
func (n *Node) VerifyLeader(ctx context.Context) error {
	r, err := n.running()
	if err != nil {
		return err
	}
	if r.State() != raft.Leader {
		return fmt.Errorf("cluster: verify leadership on %s: %w", n.cfg.NodeID, raftfsm.ErrNotLeader)
	}
	if err := waitFuture(ctx, r.VerifyLeader()); err != nil {
		return readError("verify leadership", err)
	}
	return nil
}

// ReadIndex returns this leader's read index: its commit index when the
// call began, confirmed by VerifyLeader. A replica whose FSM reflects every
// entry through the read index (CaughtUp) holds every write any client saw
// complete before the call. A leader that has not finished its term's
// barrier yet (its commit index may still trail its predecessor's) runs the
// barrier first. On a follower it returns an error wrapping
// raftfsm.ErrNotLeader: ask the leader.
func (n *Node) ReadIndex(ctx context.Context) (uint64, error) {
	r, err := n.running()
	if err != nil {
		return 0, err
	}
	if r.State() != raft.Leader {
		return 0, fmt.Errorf("cluster: read index on %s: %w", n.cfg.NodeID, raftfsm.ErrNotLeader)
	}
	if n.LeaderTerm() == 0 {
		// The term's first entry may not be committed yet, and with it the
		// predecessor's last entries: the barrier commits and applies them.
		if err := waitFuture(ctx, r.Barrier(n.timeoutFor(ctx))); err != nil {
			return 0, readError("barrier", err)
		}
	}
	idx := r.CommitIndex()
	if err := waitFuture(ctx, r.VerifyLeader()); err != nil {
		return 0, readError("verify leadership", err)
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
