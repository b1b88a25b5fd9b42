package cluster

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"
)

// Backoffs of the leadership monitor.
const (
	// readyRetryMin/Max pace retries of the barrier and the OnLeaderReady hook.
	readyRetryMin = 50 * time.Millisecond
	readyRetryMax = 5 * time.Second
	// serviceRetryMin/Max pace restarts of a leader service that failed.
	serviceRetryMin = 100 * time.Millisecond
	serviceRetryMax = 10 * time.Second
	// serviceHealthyRun: a run at least this long resets the restart backoff.
	serviceHealthyRun = time.Minute
	// stopWarnEvery: how often the monitor complains about services that
	// have not returned after their context was cancelled.
	stopWarnEvery = 5 * time.Second
)

// pump is the only reader of raft's NotifyCh and of the leader observer. It
// never blocks on anything but those channels, so raft never waits for us;
// it turns every event into a coalesced wake-up of the monitor and a
// broadcast to WaitForLeader/Propose waiters. It stops after raft.Shutdown.
func (n *Node) pump() {
	defer n.pumpDone.Done()
	for {
		select {
		case <-n.notifyCh:
		case <-n.obsCh:
		case <-n.pumpStop:
			return
		}
		select {
		case n.wake <- struct{}{}:
		default: // a wake-up is already pending; the monitor reads fresh state
		}
		n.leaderChange.Broadcast()
	}
}

// leaderRun is one leadership term's lifetime: barrier, hook, services.
type leaderRun struct {
	term    uint64
	started time.Time
	cancel  context.CancelFunc
	done    chan struct{} // closed when the barrier/hook/services have all returned

	mu      sync.Mutex
	running map[string]bool // services inside Run, for the stop warning
}

// monitor reconciles the leader services with raft's state. It is the only
// goroutine that starts or stops them. On every wake-up (and on a safety
// tick) it reads raft's state and term: if services run for a term that is
// no longer this node's leadership it cancels them and waits for all of them
// to return before it looks at anything else; if the node leads and nothing
// runs, it starts a run for the current term.
func (n *Node) monitor() {
	defer n.bg.Done()
	r := n.r.Load()
	tick := time.NewTicker(n.cfg.Timeouts.Heartbeat)
	defer tick.Stop()
	var cur *leaderRun
	for {
		select {
		case <-n.stopCh:
			if cur != nil {
				n.endRun(cur, "shutdown")
			}
			return
		case <-n.wake:
		case <-tick.C:
		}
		leader := r.State() == raft.Leader
		term := r.CurrentTerm()
		if cur != nil && (!leader || term != cur.term) {
			n.endRun(cur, "leadership lost")
			cur = nil
		}
		if cur == nil && leader {
			cur = n.beginRun(term)
		}
	}
}

// leaderTermKey marks the context of a leadership term (hook and services).
type leaderTermKey struct{}

// LeaderTermFromContext returns the Raft term of the leadership whose leader
// service (or OnLeaderReady hook) ctx belongs to: the fencing token that
// service stamps into what it dispatches.
func LeaderTermFromContext(ctx context.Context) (uint64, bool) {
	t, ok := ctx.Value(leaderTermKey{}).(uint64)
	return t, ok
}

func (n *Node) beginRun(term uint64) *leaderRun {
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), leaderTermKey{}, term))
	run := &leaderRun{term: term, started: time.Now(), cancel: cancel,
		done: make(chan struct{}), running: map[string]bool{}}
	n.log.Info("gained leadership", zap.Uint64("term", term))
	go n.lead(ctx, run)
	return run
}

// endRun cancels the run's context and waits for its services to return.
func (n *Node) endRun(run *leaderRun, reason string) {
	run.cancel()
	t0 := time.Now()
	warn := time.NewTicker(stopWarnEvery)
	defer warn.Stop()
	for waiting := true; waiting; {
		select {
		case <-run.done:
			waiting = false
		case <-warn.C:
			n.log.Warn("leader services have not stopped yet; the next leadership waits for them",
				zap.Uint64("term", run.term), zap.Strings("services", run.runningNames()),
				zap.Duration("waited", time.Since(t0)))
		}
	}
	n.term.CompareAndSwap(run.term, 0)
	n.log.Info("leader services stopped", zap.String("reason", reason), zap.Uint64("term", run.term),
		zap.Duration("led_for", time.Since(run.started)), zap.Duration("stop_took", time.Since(t0)))
}

// lead runs one term: barrier, hook, then every service until ctx ends.
func (n *Node) lead(ctx context.Context, run *leaderRun) {
	defer close(run.done)
	r := n.r.Load()
	barrier := func(ctx context.Context) error {
		if err := waitFuture(ctx, r.Barrier(n.cfg.ApplyTimeout)); err != nil {
			return err
		}
		if t := r.CurrentTerm(); t != run.term {
			return fmt.Errorf("term moved from %d to %d during the barrier", run.term, t)
		}
		return nil
	}
	t0 := time.Now()
	if !n.retryWhileLeading(ctx, run.term, "raft barrier", barrier) {
		return
	}
	// From here LeaderTerm reports the term: the FSM reflects every entry
	// of earlier terms, so reads and term-stamped writes are safe.
	n.term.Store(run.term)
	n.log.Info("leader barrier done: the FSM has applied the whole log",
		zap.Uint64("term", run.term), zap.Uint64("applied_index", r.AppliedIndex()),
		zap.Duration("took", time.Since(t0)))
	// Immutable since Start (AddLeaderService/OnLeaderReady refuse later
	// calls), and Start happens-before this goroutine: no lock, which also
	// keeps Shutdown (holding mu while it waits for us) deadlock-free.
	hook, services := n.onReady, n.services
	if hook != nil && !n.retryWhileLeading(ctx, run.term, "leader-ready hook", func(ctx context.Context) error {
		return runService(ctx, RunnableFunc(hook)) // a panic is retried like an error
	}) {
		return
	}
	var wg sync.WaitGroup
	for _, s := range services {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n.supervise(ctx, run, s)
		}()
	}
	n.log.Info("leader services started", zap.Uint64("term", run.term), zap.Int("services", len(services)))
	<-ctx.Done()
	wg.Wait()
}

// retryWhileLeading calls fn until it succeeds or ctx (the term) ends.
func (n *Node) retryWhileLeading(ctx context.Context, term uint64, what string, fn func(context.Context) error) bool {
	backoff := readyRetryMin
	for attempt := 1; ; attempt++ {
		err := fn(ctx)
		if err == nil {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		n.log.Warn("leadership preparation failed; retrying while still leader",
			zap.String("step", what), zap.Uint64("term", term), zap.Int("attempt", attempt),
			zap.Duration("backoff", backoff), zap.Error(err))
		if !sleepCtx(ctx, backoff) {
			return false
		}
		backoff = min(2*backoff, readyRetryMax)
	}
}

// supervise runs one service for the term, restarting it after errors.
func (n *Node) supervise(ctx context.Context, run *leaderRun, s namedService) {
	log := n.log.With(zap.String("service", s.name), zap.Uint64("term", run.term))
	backoff := serviceRetryMin
	for {
		t0 := time.Now()
		run.setRunning(s.name, true)
		n.activeSvcs.Add(1)
		err := runService(ctx, s.r)
		n.activeSvcs.Add(-1)
		run.setRunning(s.name, false)
		switch {
		case ctx.Err() != nil:
			log.Debug("leader service stopped", zap.NamedError("last_error", err))
			return
		case err == nil:
			log.Info("leader service finished; not restarted until the next leadership")
			return
		}
		if time.Since(t0) >= serviceHealthyRun {
			backoff = serviceRetryMin
		}
		fields := []zap.Field{zap.Error(err), zap.Duration("restart_in", backoff), zap.Duration("ran_for", time.Since(t0))}
		var p *panicError
		if errors.As(err, &p) {
			fields = append(fields, zap.ByteString("stack", p.stack))
		}
		log.Error("leader service failed; restarting", fields...)
		if !sleepCtx(ctx, backoff) {
			return
		}
		backoff = min(2*backoff, serviceRetryMax)
	}
}

// panicError is a recovered panic of a leader service.
type panicError struct {
	value any
	stack []byte
}

func (p *panicError) Error() string { return fmt.Sprintf("panic: %v", p.value) }

// runService calls r.Run, turning a panic into an error so one broken
// service does not take the whole master (and its raft membership) down.
func runService(ctx context.Context, r Runnable) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &panicError{value: v, stack: debug.Stack()}
		}
	}()
	return r.Run(ctx)
}

func (run *leaderRun) setRunning(name string, on bool) {
	run.mu.Lock()
	defer run.mu.Unlock()
	if on {
		run.running[name] = true
	} else {
		delete(run.running, name)
	}
}

func (run *leaderRun) runningNames() []string {
	run.mu.Lock()
	defer run.mu.Unlock()
	names := make([]string, 0, len(run.running))
	for name := range run.running {
		names = append(names, name)
	}
	return names
}

// sleepCtx sleeps d or until ctx ends; it reports whether ctx is still live.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
