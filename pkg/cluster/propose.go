package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
	"github.com/lancemaster/lancemaster/gen-go/journal"

	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

const (
	// maxProposeAttempts bounds how often Propose chases a moving leader.
	// Every retried attempt failed provably before the command was applied.
	maxProposeAttempts = 5
	// leaderPoll re-checks raft's leader in case a change notification was
	// dropped (the observer never blocks raft, so it may drop).
	leaderPoll = 50 * time.Millisecond
)

// Propose implements raftfsm.Proposer. On the leader it applies cmd through
// raft and returns the FSM's response; on a follower it forwards cmd to the
// leader's RPC address. With no leader known it waits up to two election
// rounds (bounded by ctx) and then fails with raftfsm.ErrNoLeader.
//
// Errors: raftfsm.ErrNotLeader / raftfsm.ErrNoLeader / ErrNotApplied mean the
// command was not applied; ErrFateUnknown means it may or may not have been
// (leadership lost during the apply, ctx ended while waiting, forwarding
// failed after sending). Propose retries by itself only when the leader it
// tried turned out not to lead (up to maxProposeAttempts, bounded by ctx).
//
// With the context of a leader service or of the OnLeaderReady hook,
// Propose is ApplyLocal: it writes only as the leader of that term. With a
// LeaderOnly context it is ApplyLocal too: never forwarded, never retried.
func (n *Node) Propose(ctx context.Context, cmd []byte) (*journal.TApplyResponse, error) {
	r, err := n.running()
	if err != nil {
		return nil, err
	}
	if _, ok := LeaderTermFromContext(ctx); ok {
		// A leader service writes only as the leader of its own term: never
		// forwarded, never retried elsewhere (see ApplyLocal).
		return n.ApplyLocal(ctx, cmd)
	}
	if IsLeaderOnly(ctx) {
		// The caller judged the command on this node's view: written by this
		// leadership or not at all (see LeaderOnly).
		return n.ApplyLocal(ctx, cmd)
	}
	var lastErr error
	for attempt := 0; attempt < maxProposeAttempts; attempt++ {
		changed := n.leaderChange.Wait() // taken before reading the state
		if r.State() == raft.Leader {
			resp, err := n.ApplyLocal(ctx, cmd)
			if !errors.Is(err, raftfsm.ErrNotLeader) {
				return resp, err
			}
			lastErr = err
		} else {
			id, addr := n.Leader()
			switch {
			case id == "":
				if err := n.awaitLeader(ctx); err != nil {
					return nil, err
				}
				continue
			case id == n.cfg.NodeID: // raft still names us while stepping down
				lastErr = fmt.Errorf("cluster: %w: this node is stepping down", raftfsm.ErrNotLeader)
			case n.fwd == nil:
				return nil, fmt.Errorf("cluster: leader is %s and this node has no forwarder: %w", id, raftfsm.ErrNotLeader)
			case addr == "":
				return nil, fmt.Errorf("cluster: leader %s is not in the static peer list, cannot forward: %w", id, raftfsm.ErrNotLeader)
			default:
				resp, err := n.forward(ctx, id, addr, cmd)
				if !errors.Is(err, raftfsm.ErrNotLeader) {
					return resp, err
				}
				lastErr = err
			}
		}
		// The leader we tried no longer leads: wait for raft to learn the next.
		if err := n.waitChange(ctx, changed, n.cfg.Timeouts.Election); err != nil {
			return nil, fmt.Errorf("%w (last attempt: %w)", err, lastErr)
		}
	}
	return nil, fmt.Errorf("cluster: leader kept moving, gave up after %d attempts: %w", maxProposeAttempts, lastErr)
}

// forward sends cmd to the leader through the Forwarder.
func (n *Node) forward(ctx context.Context, id, addr string, cmd []byte) (*journal.TApplyResponse, error) {
	b, err := n.fwd.ForwardApply(ctx, addr, cmd)
	if err != nil {
		return nil, fmt.Errorf("cluster: forward to leader %s at %s: %w", id, addr, err)
	}
	resp, err := raftfsm.DecodeResponse(b)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w: undecodable response forwarded by leader %s: %w", ErrFateUnknown, id, err)
	}
	return resp, nil
}

// ApplyLocal applies cmd through raft on this node, which must be the leader
// (the forwardApply RPC handler calls it). On a follower it returns an error
// wrapping raftfsm.ErrNotLeader and never forwards, so forwarding cannot
// loop. Errors are classified as for Propose.
//
// When ctx belongs to a leader service or the OnLeaderReady hook (see
// LeaderTermFromContext), this node must still lead in that very term: a
// service that outlived its leadership gets raftfsm.ErrNotLeader instead of
// writing in a later term or, through Propose, via the next leader.
func (n *Node) ApplyLocal(ctx context.Context, cmd []byte) (*journal.TApplyResponse, error) {
	r, err := n.running()
	if err != nil {
		return nil, err
	}
	if r.State() != raft.Leader {
		return nil, fmt.Errorf("cluster: apply on %s: %w", n.cfg.NodeID, raftfsm.ErrNotLeader)
	}
	if term, ok := LeaderTermFromContext(ctx); ok && r.CurrentTerm() != term {
		return nil, fmt.Errorf("cluster: apply on %s: the leadership of term %d is over: %w",
			n.cfg.NodeID, term, raftfsm.ErrNotLeader)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("cluster: %w: %w", ErrNotApplied, err)
	}
	timeout := n.timeoutFor(ctx)
	f := r.Apply(cmd, timeout)
	if err := waitFuture(ctx, f); err != nil {
		return nil, n.applyError(err, timeout)
	}
	switch resp := f.Response().(type) {
	case *journal.TApplyResponse:
		if resp == nil {
			return nil, fmt.Errorf("cluster: %w: nil response at index %d", ErrBadResponse, f.Index())
		}
		// The log index lets a forwarding follower's caller wait until its own
		// replica has applied the entry (read-your-writes).
		idx := int64(f.Index())
		resp.Index = &idx
		return resp, nil
	case error:
		return nil, fmt.Errorf("cluster: FSM failed the entry at index %d: %w", f.Index(), resp)
	default:
		return nil, fmt.Errorf("cluster: %w %T at index %d", ErrBadResponse, resp, f.Index())
	}
}

// applyError classifies a failed raft.Apply by what it proves.
func (n *Node) applyError(err error, timeout time.Duration) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return fmt.Errorf("cluster: %w (not applied): %w", raftfsm.ErrNotLeader, err)
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return fmt.Errorf("cluster: %w: raft did not accept it within %s: %w", ErrNotApplied, timeout, err)
	case errors.Is(err, raft.ErrLeadershipLost):
		n.log.Warn("leadership lost while applying; command fate unknown")
		return fmt.Errorf("cluster: %w: leadership lost before the entry was known to commit; "+
			"the next leader may still apply it: %w", ErrFateUnknown, err)
	case errors.Is(err, raft.ErrRaftShutdown):
		return fmt.Errorf("cluster: %w: %w: %w", ErrShutdown, ErrFateUnknown, err)
	case errors.Is(err, errAbandoned):
		return fmt.Errorf("cluster: %w: stopped waiting for the entry: %w", ErrFateUnknown, err)
	default:
		return fmt.Errorf("cluster: %w: %w", ErrFateUnknown, err)
	}
}

// timeoutFor is ApplyTimeout, shortened to ctx's deadline.
func (n *Node) timeoutFor(ctx context.Context) time.Duration {
	t := n.cfg.ApplyTimeout
	if dl, ok := ctx.Deadline(); ok {
		if until := time.Until(dl); until < t {
			t = max(until, time.Millisecond)
		}
	}
	return t
}

// errAbandoned marks a future the caller stopped waiting for.
var errAbandoned = errors.New("context ended while waiting for raft")

// waitFuture waits for f or ctx. Raft futures cannot be cancelled: when ctx
// wins, a goroutine keeps waiting for f, which raft resolves within the
// timeout it was given.
func waitFuture(ctx context.Context, f raft.Future) error {
	if ctx.Done() == nil {
		return f.Error()
	}
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", errAbandoned, ctx.Err())
	}
}

// WaitForLeader returns once a leader is known (possibly this node), or
// with an error wrapping raftfsm.ErrNoLeader when ctx ends first.
func (n *Node) WaitForLeader(ctx context.Context) error {
	r, err := n.running()
	if err != nil {
		return err
	}
	for {
		changed := n.leaderChange.Wait()
		if _, id := r.LeaderWithID(); id != "" {
			return nil
		}
		if err := n.waitChange(ctx, changed, leaderPoll); err != nil {
			return fmt.Errorf("%w: %w", raftfsm.ErrNoLeader, err)
		}
	}
}

// awaitLeader waits up to two election rounds (bounded by ctx) for a leader.
func (n *Node) awaitLeader(ctx context.Context) error {
	wait := 2 * (n.cfg.Timeouts.Heartbeat + n.cfg.Timeouts.Election)
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	if err := n.WaitForLeader(wctx); err != nil {
		if ctx.Err() == nil {
			return fmt.Errorf("cluster: none elected within %s: %w", wait, raftfsm.ErrNoLeader)
		}
		return fmt.Errorf("cluster: %w", err)
	}
	return nil
}

// waitChange waits for a leader-change broadcast, d, ctx or shutdown.
func (n *Node) waitChange(ctx context.Context, changed <-chan struct{}, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-changed:
	case <-t.C:
	case <-ctx.Done():
		return fmt.Errorf("cluster: waiting for a leader: %w", ctx.Err())
	case <-n.stopCh:
		return ErrShutdown
	}
	return nil
}

// ConsistentRead makes a following read of the local FSM linearizable: it
// confirms this node still leads (VerifyLeader) and that the FSM has applied
// everything committed before the call (Barrier). On a follower it returns
// an error wrapping raftfsm.ErrNotLeader; the caller then reads through the
// leader.
func (n *Node) ConsistentRead(ctx context.Context) error {
	r, err := n.running()
	if err != nil {
		return err
	}
	if r.State() != raft.Leader {
		return fmt.Errorf("cluster: consistent read on %s: %w", n.cfg.NodeID, raftfsm.ErrNotLeader)
	}
	if err := n.confirmLeadership(ctx, r, r.CurrentTerm()); err != nil {
		return err
	}
	if err := waitFuture(ctx, r.Barrier(n.timeoutFor(ctx))); err != nil {
		return readError("barrier", err)
	}
	return nil
}

func readError(step string, err error) error {
	if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) {
		return fmt.Errorf("cluster: consistent read %s: %w: %w", step, raftfsm.ErrNotLeader, err)
	}
	return fmt.Errorf("cluster: consistent read %s: %w", step, err)
}
