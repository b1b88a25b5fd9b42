package cluster

import "errors"

// Sentinel errors. Propose and ApplyLocal also return errors wrapping
// raftfsm.ErrNotLeader (not the leader; the command was not applied) and
// raftfsm.ErrNoLeader (no leader known; not applied).
var (
	// ErrFateUnknown: the command may or may not have been committed (the
	// leader lost its leadership, the node shut down or the caller's context
	// ended after the command was handed to raft). Read the state before
	// retrying a command that is not idempotent.
	ErrFateUnknown = errors.New("command fate unknown")
	// ErrNotApplied: the command provably never entered the log (raft could
	// not enqueue it in time); it is safe to retry.
	ErrNotApplied = errors.New("command not applied")
	// ErrShutdown: the node is shut down, or was never started.
	ErrShutdown = errors.New("cluster node is shut down")
	// ErrBadResponse: the FSM returned something other than a
	// *journal.TApplyResponse; a programming error in the FSM.
	ErrBadResponse = errors.New("unexpected FSM response")
)
