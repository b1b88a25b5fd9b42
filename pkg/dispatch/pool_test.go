package dispatch

import (
	"context"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

func woken(w *Waker) bool {
	select {
	case <-w.C():
		return true
	default:
		return false
	}
}

func TestPoolHeartbeatCarriesTermAndMasters(t *testing.T) {
	e := newEnv(t)
	e.addBackend("b1:9060", 1)
	e.addBackend("b2:9060", 5)
	e.heartbeat()
	hb := e.be.heartbeats
	if len(hb) != 2 {
		t.Fatalf("%d heartbeats, want one per backend", len(hb))
	}
	for _, r := range hb {
		if r.MasterID != "m1" || r.GetLeaderTerm() != testTerm || len(r.MasterAddresses) != 2 || r.MasterAddresses[1] != "10.0.0.2:9020" {
			t.Fatalf("heartbeat %+v", r)
		}
	}
}

func TestPoolViewAliveAndEpoch(t *testing.T) {
	e := newEnv(t)
	b1 := e.addBackend("b1:9060", 11)
	if _, _, known := e.pool.View(b1); known {
		t.Fatal("known before any heartbeat")
	}
	woken(e.waker)
	e.heartbeat()
	if !woken(e.waker) {
		t.Fatal("a backend turning alive must wake the dispatcher")
	}
	alive, epoch, known := e.pool.View(b1)
	if !alive || epoch != 11 || !known {
		t.Fatalf("view %v %d %v", alive, epoch, known)
	}
	if s, _ := e.pool.Status(b1); s.Capacity != 4 || s.Version != "v1.2.3 (abcdef012345)" {
		t.Fatalf("capacity %d, version %q", s.Capacity, s.Version)
	}
	if last, version, leading := e.pool.Heard(b1); last.IsZero() || version != "v1.2.3 (abcdef012345)" || !leading {
		t.Fatalf("heard %v %q %v", last, version, leading)
	}
	e.heartbeat()
	if woken(e.waker) {
		t.Fatal("nothing changed, yet the dispatcher was woken")
	}
	e.be.setEpoch("b1:9060", 12)
	e.heartbeat()
	if _, epoch, _ := e.pool.View(b1); epoch != 12 || !woken(e.waker) {
		t.Fatalf("epoch %d: an epoch change must be seen and wake the dispatcher", epoch)
	}

	// Lost heartbeats: alive for 3 intervals after the last OK answer.
	e.be.setEpoch("b1:9060", 0)
	e.clock.Advance(3 * DefaultHeartbeatInterval)
	e.heartbeat()
	if alive, _, _ := e.pool.View(b1); !alive {
		t.Fatal("dead too early")
	}
	e.clock.Advance(time.Millisecond)
	e.heartbeat()
	alive, epoch, known = e.pool.View(b1)
	if alive || epoch != 12 || !known {
		t.Fatalf("after 3 intervals without an answer: %v %d %v", alive, epoch, known)
	}
	if !woken(e.waker) {
		t.Fatal("an alive flip must wake the dispatcher")
	}
}

// What a pool run hears belongs to its term only.
func TestPoolEpochHeardOnlyWithinTerm(t *testing.T) {
	e := newEnv(t)
	b1 := e.addBackend("b1:9060", 1)
	e.heartbeat()
	if _, ok := e.pool.heardInTerm(b1, testTerm); !ok {
		t.Fatal("not heard in this term")
	}
	oldGen := e.poolGen
	e.pool.beginTerm(testTerm + 1)
	if _, ok := e.pool.heardInTerm(b1, testTerm+1); ok {
		t.Fatal("a new term starts knowing nothing")
	}
	if _, _, known := e.pool.View(b1); known {
		t.Fatal("View must forget the old term")
	}
	// A late pass of the old run is dropped.
	e.pool.heartbeatPass(e.ctx, oldGen, testTerm)
	if _, _, known := e.pool.View(b1); known {
		t.Fatal("an answer of an older run was kept")
	}
	if _, ok := e.pool.heardInTerm(b1, testTerm); ok {
		t.Fatal("the old term's view survived")
	}
}

func TestPoolForgetsRemovedBackends(t *testing.T) {
	e := newEnv(t)
	b1 := e.addBackend("b1:9060", 1)
	e.heartbeat()
	e.propose(raftfsm.CmdRemoveBackend, &journal.TRemoveBackendCommand{NowMs: e.nowMs(), BackendID: b1})
	e.heartbeat()
	if _, _, known := e.pool.View(b1); known {
		t.Fatal("a removed backend is still known")
	}
}

// Run heartbeats at once and then every interval, and forgets everything
// when its term ends.
func TestPoolRun(t *testing.T) {
	e := newEnv(t)
	b1 := e.addBackend("b1:9060", 1)
	p := NewPool(PoolDeps{Reader: e.fsm, Backends: e.be, Clock: e.clock.Now, Term: termFromContext,
		MasterID: "m1", HeartbeatInterval: 5 * time.Millisecond})
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
	defer wcancel()
	if err := p.WaitFirstPass(wctx, testTerm); err != nil {
		t.Fatalf("first pass: %v", err)
	}
	if _, epoch, known := p.View(b1); !known || epoch != 1 {
		t.Fatal("not heard after the first pass")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		e.be.mu.Lock()
		n := len(e.be.heartbeats)
		e.be.mu.Unlock()
		if n >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d heartbeats", n)
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	if _, _, known := p.View(b1); known {
		t.Fatal("a stopped pool still reports what it heard")
	}
}

// A backend saying it has delivered its outbox is evidence the epoch path
// waits for (§13.3): the flip wakes the dispatcher, so a RUNNING job of the
// gone process does not wait for the dispatch interval.
func TestPoolOutboxDeliveredWakes(t *testing.T) {
	e := newEnv(t)
	e.addBackend("b1:9060", 11)
	e.be.setHeartbeat("b1:9060", func(r *wire.THeartbeatResponse) { r.OutboxDelivered = boolPtr(false) })
	e.heartbeat()
	woken(e.waker)
	e.heartbeat()
	if woken(e.waker) {
		t.Fatal("nothing changed, yet the dispatcher was woken")
	}
	e.be.setHeartbeat("b1:9060", func(r *wire.THeartbeatResponse) { r.OutboxDelivered = boolPtr(true) })
	e.heartbeat()
	if !woken(e.waker) {
		t.Fatal("the outbox turning delivered must wake the dispatcher")
	}
	e.heartbeat()
	if woken(e.waker) {
		t.Fatal("an outbox still delivered woke the dispatcher again")
	}
}
