package cluster

import "context"

// Runnable is a leader service (dispatcher, refresh driver, GC, ...), in the
// style of controller-runtime's manager.Runnable.
//
// Concurrency: the leadership monitor calls Run on a goroutine of its own,
// once per leadership term (and again after an error, see below), only after
// the term's Raft barrier and the OnLeaderReady hook have succeeded. All
// services of a term share one context; it is cancelled when the node loses
// leadership or shuts down, and the monitor waits for every Run to return
// before it acts on anything else. Run must therefore return promptly once
// ctx is done; a Run that ignores ctx blocks failover of this node's
// services (not raft itself, which never waits for services).
//
// Return values: after ctx is done the value is ignored. A nil return while
// still leader means "done for this term": the service is not restarted
// until the next term. A non-nil return (or a panic) is logged and Run is
// called again after a backoff (100 ms doubling to 10 s; the backoff resets
// after a run that lasted a minute) for as long as the node leads.
type Runnable interface {
	Run(ctx context.Context) error
}

// RunnableFunc adapts a function to Runnable.
type RunnableFunc func(ctx context.Context) error

// Run calls f(ctx).
func (f RunnableFunc) Run(ctx context.Context) error { return f(ctx) }
