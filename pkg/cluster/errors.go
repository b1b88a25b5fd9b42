package cluster

import "errors"

// Sentinel errors. Propose and ApplyLocal also return errors wrapping
// raftfsm.ErrNotLeader (not the leader; the command was not applied) and
// raftfsm.ErrNoLeader (no leader known; not applied).
var (
	// ErrFateUnknown: the command may or may not have been committed (the
	// leader lost its leadership, the node shut down or the caller's context
	// ended after the command was handed to raft, or a forward failed after
	// sending). Read the state before retrying a command that is not
	// idempotent. It answers OutcomeUnknown() == true, so that packages
	// that do not import this one (pkg/admin) can classify it.
	ErrFateUnknown error = &fateError{msg: "command fate unknown", unknown: true}
	// ErrNotApplied: the command provably never entered the log (raft could
	// not enqueue it in time, or a forward was refused before sending); it is
	// safe to retry. It answers NotApplied() == true.
	ErrNotApplied error = &fateError{msg: "command not applied"}
	// ErrShutdown: the node is shut down, or was never started.
	ErrShutdown = errors.New("cluster node is shut down")
	// ErrBadResponse: the FSM returned something other than a
	// *journal.TApplyResponse; a programming error in the FSM.
	ErrBadResponse = errors.New("unexpected FSM response")
)

// fateError is the type of ErrFateUnknown and ErrNotApplied. Its methods
// let a caller classify a wrapped error with errors.As against an interface
// of its own (interface{ OutcomeUnknown() bool }), without importing this
// package; errors.Is against the sentinels works as before.
type fateError struct {
	msg     string
	unknown bool
}

func (e *fateError) Error() string { return e.msg }

// OutcomeUnknown reports whether the command may or may not have been applied.
func (e *fateError) OutcomeUnknown() bool { return e.unknown }

// NotApplied reports whether the command provably was not applied.
func (e *fateError) NotApplied() bool { return !e.unknown }
