package dispatch

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/options"
	"github.com/lancemaster/lancemaster/pkg/testkit"
)

// waitFor polls cond until it holds; the test fails after 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testkit.Eventually(t, 5*time.Second, what, cond)
}

// Run: a new leader heartbeats, reconciles RUNNING jobs, then dispatches;
// a wake-up runs a round at once; the end of the term stops it.
func TestRunReconcilesThenDispatchesOnWake(t *testing.T) {
	e := newEnv(t)
	b1 := e.addBackend("b1:9060", 1)
	old := e.markRunning(e.admit(1)[0], b1, 1, e.nowMs()+3_600_000, 3)
	e.be.setQuery(queryAnswer(map[string]*wire.TInvocationStatus{
		old.InvocationID: finished(old, wire.TLanceIndexJobResultCode_NATIVE_OK, nil)}))

	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	poolDone, runDone := make(chan error, 1), make(chan error, 1)
	go func() { poolDone <- e.pool.Run(ctx) }()
	go func() { runDone <- e.d.Run(ctx) }()

	waitFor(t, "reconcile at start", func() bool { return e.job(old.JobID).MutationState == job.Committed })
	if len(e.be.queried()) != 1 {
		t.Fatal("reconcile should query once")
	}

	// The interval is 10 s: only the wake-up can dispatch this in time.
	id := e.admit(1)[0]
	e.waker.Wake()
	waitFor(t, "dispatch after a wake-up", func() bool { return len(e.be.submitted()) == 1 })
	e.wantState(id, job.Running)

	cancel()
	for _, ch := range []chan error{poolDone, runDone} {
		select {
		case err := <-ch:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a service did not stop with its term")
		}
	}
}

func TestRunRoundNeedsATerm(t *testing.T) {
	e := newEnv(t)
	if err := e.d.RunRound(context.Background()); err != ErrNoLeaderTerm {
		t.Fatalf("err = %v", err)
	}
}

// A new leader's reconcile does not hold its first round: a backend whose
// query hangs delays nothing else.
func TestRunReconcileDoesNotHoldTheFirstRound(t *testing.T) {
	e := newEnv(t)
	b1 := e.addBackend("b1:9060", 1)
	e.markRunning(e.admit(1)[0], b1, 1, e.nowMs()+3_600_000, 3)
	queried, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	e.be.setQuery(func(a string, _ *wire.TQueryInvocationsRequest) (*wire.TQueryInvocationsResponse, error) {
		once.Do(func() { close(queried) })
		<-release
		return nil, bytesLeftErr(a)
	})
	id := e.admit(1)[0]

	ctx, cancel := context.WithCancel(e.ctx)
	poolDone, runDone := make(chan error, 1), make(chan error, 1)
	go func() { poolDone <- e.pool.Run(ctx) }()
	go func() { runDone <- e.d.Run(ctx) }()
	<-queried
	waitFor(t, "the first round's dispatch while reconcile hangs", func() bool { return len(e.be.submitted()) == 1 })
	e.wantState(id, job.Running)
	close(release)
	cancel()
	for _, ch := range []chan error{poolDone, runDone} {
		select {
		case <-ch:
		case <-time.After(5 * time.Second):
			t.Fatal("a service did not stop with its term")
		}
	}
}

// The end of the term cancels the sends in flight, and Run returns only
// once they have returned.
func TestRunEndCancelsAndWaitsForSends(t *testing.T) {
	e := newEnv(t)
	e.addBackend("b1:9060", 1)
	var returned atomic.Bool
	started := make(chan struct{})
	e.be.setSubmitCtx(func(ctx context.Context, a string, _ *wire.TLanceIndexJobDispatch) (*wire.TStatus, error) {
		close(started)
		<-ctx.Done() // hung until the term ends
		time.Sleep(20 * time.Millisecond)
		returned.Store(true)
		return nil, bytesLeftErr(a)
	})
	e.admit(1)
	ctx, cancel := context.WithCancel(e.ctx)
	poolDone, runDone := make(chan error, 1), make(chan error, 1)
	go func() { poolDone <- e.pool.Run(ctx) }()
	go func() { runDone <- e.d.Run(ctx) }()
	<-started
	cancel()
	select {
	case <-runDone:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after its term ended")
	}
	if !returned.Load() {
		t.Fatal("Run returned before its send did")
	}
	<-poolDone
}

// A backlog larger than the sends one backend may have in flight
// (SendConcurrency) drains without waiting for the interval: every send
// that ends makes room, and the round that room allows runs at once. The
// interval is 10 s and the fake clock never moves, so only wake-ups can
// dispatch the backlog here.
func TestRunDrainsABacklogBeyondTheSendBound(t *testing.T) {
	e := newEnv(t, func(d *Deps) { d.SendConcurrency = 2 })
	e.addBackend("b1:9060", 1)
	e.setOption(options.OptMaxDispatchPerRound, "1000")
	e.setOption(options.OptMaxInflightPerBackend, "1000")
	ids := e.admit(50)

	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	go e.pool.Run(ctx)
	go e.d.Run(ctx)
	deadline := time.Now().Add(5 * time.Second)
	for len(e.be.submitted()) != len(ids) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d jobs sent\n%s", len(e.be.submitted()), len(ids), e.logText())
		}
		time.Sleep(time.Millisecond)
	}
	for _, id := range ids {
		e.wantState(id, job.Running)
	}
}
