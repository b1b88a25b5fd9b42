package backend

import (
	"testing"

	"github.com/lancemaster/lancemaster/gen-go/wire"
)

// A heartbeat says whether a dispatch would be accepted now, and why not.
func TestHeartbeatSaysWhetherItAccepts(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.QueueSize = 1 })
	resp := h.heartbeatCluster("A", 1)
	if !resp.GetAccepting() || resp.NotAcceptingReason != nil {
		t.Fatalf("idle backend: %+v", resp)
	}

	// Queue full: one running, one waiting.
	h.runner.hold()
	h.submit(h.clusterDispatch("run", "A", 1))
	h.runner.waitStarted(t, "run")
	h.submit(h.clusterDispatch("wait", "A", 1))
	if resp := h.heartbeatCluster("A", 1); resp.GetAccepting() || resp.GetNotAcceptingReason() != "the queue is full" {
		t.Fatalf("queue full: %+v", resp)
	}
	if got := h.submit(h.clusterDispatch("more", "A", 1)); got != wire.TStatusCode_QUEUE_FULL {
		t.Fatalf("the heartbeat said so; submit: %s", got)
	}
	h.runner.release()
	h.waitState(1, "wait", wire.TLanceInvocationState_FINISHED)
	if resp := h.heartbeatCluster("A", 1); !resp.GetAccepting() {
		t.Fatalf("queue drained: %+v", resp)
	}

	// Isolation not verified.
	h.runner.verified.Store(false)
	if resp := h.heartbeatCluster("A", 2); resp.GetAccepting() || resp.GetNotAcceptingReason() == "" {
		t.Fatalf("isolation unverified: %+v", resp)
	}
	h.runner.verified.Store(true)

	// A deposed leader (a term below the fence).
	h.heartbeatCluster("A", 2)
	if resp := h.heartbeatCluster("A", 1); resp.Status.StatusCode != wire.TStatusCode_OK || resp.GetAccepting() || resp.GetNotAcceptingReason() == "" {
		t.Fatalf("a lower term: %+v", resp)
	}
	if resp := h.heartbeatCluster("A", 2); !resp.GetAccepting() {
		t.Fatalf("the current leader: %+v", resp)
	}

	// Another cluster.
	if resp := h.heartbeatCluster("B", 1); resp.GetAccepting() || resp.GetNotAcceptingReason() == "" {
		t.Fatalf("another cluster: %+v", resp)
	}

	// Shutting down (the server still answers heartbeats meanwhile).
	h.a.mu.Lock()
	h.a.shutting = true
	h.a.mu.Unlock()
	resp = h.heartbeatCluster("A", 2)
	h.a.mu.Lock()
	h.a.shutting = false
	h.a.mu.Unlock()
	if resp.GetAccepting() || resp.GetNotAcceptingReason() != "the backend is shutting down" {
		t.Fatalf("shutting down: %+v", resp)
	}
}

// outbox_delivered: at once for a fresh process with an empty outbox; for a
// restarted one, only once every entry it found at start has been delivered
// (or dropped).
func TestHeartbeatSaysWhetherTheOutboxIsDelivered(t *testing.T) {
	if resp := newHarness(t, nil).heartbeat(1); !resp.GetOutboxDelivered() {
		t.Fatalf("a fresh process with an empty outbox: %+v", resp)
	}

	dir := t.TempDir()
	cfg := testConfig(t)
	cfg.DataDir, cfg.Masters = dir, []string{closedAddr(t)}
	h1 := startHarness(t, cfg, newFakeRunner(), nil)
	h1.ready(1)
	h1.submit(h1.dispatch("inv", 1))
	h1.waitState(1, "inv", wire.TLanceInvocationState_FINISHED)
	if err := h1.a.Close(); err != nil {
		t.Fatal(err)
	}

	m := newFakeMaster(t, wire.TStatusCode_SERVICE_UNAVAILABLE)
	cfg2 := testConfig(t)
	cfg2.DataDir, cfg2.Masters = dir, []string{m.Addr()}
	h2 := startHarness(t, cfg2, newFakeRunner(), nil)
	eventually(t, func() bool { return m.callCount() >= 2 }, "no delivery attempts")
	if resp := h2.heartbeat(1); resp.GetOutboxDelivered() {
		t.Fatalf("outbox_delivered while the stored report is undelivered: %+v", resp)
	}
	// A report of this process pending does not count: only the start's.
	m.mu.Lock()
	m.answers = []wire.TStatusCode{wire.TStatusCode_OK}
	m.mu.Unlock()
	eventually(t, func() bool { return h2.heartbeat(1).GetOutboxDelivered() }, "outbox_delivered never became true")
	if ids := outboxIDs(t, h2.a); len(ids) != 0 {
		t.Fatalf("outbox %v", ids)
	}
}

// An unreadable outbox at start is never reported delivered.
func TestOutboxDeliveredStaysFalseWhenUnreadable(t *testing.T) {
	h := newHarness(t, nil)
	h.a.dlv.mu.Lock()
	h.a.dlv.startDone = false
	h.a.dlv.mu.Unlock()
	if err := h.a.outbox.Close(); err != nil {
		t.Fatal(err)
	}
	h.a.dlv.resume() // fails to read: logged, and the flag stays false
	if h.heartbeat(1).GetOutboxDelivered() {
		t.Fatal("outbox_delivered after an unreadable outbox")
	}
	if h.logs.FilterMessageSnippet("outbox unreadable").Len() == 0 {
		t.Fatal("not logged")
	}
}
