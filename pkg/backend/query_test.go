package backend

import (
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/clocktest"
)

func TestQueryThroughTheLifecycle(t *testing.T) {
	clk := clocktest.New(time.Now())
	m := newFakeMaster(t)
	h := newHarness(t, func(c *Config) { c.Clock, c.Grace, c.Masters = clk.Now, time.Hour, []string{m.Addr()} })
	h.ready(4)
	h.runner.hold()
	h.submit(h.dispatch("run", 4))
	h.runner.waitStarted(t, "run")
	h.submit(h.dispatch("wait", 4))

	resp := h.query(4, h.a.Epoch(), "run", "wait", "never")
	if resp.Status.StatusCode != wire.TStatusCode_OK || len(resp.Invocations) != 3 {
		t.Fatalf("query: %+v", resp)
	}
	for i, want := range []wire.TLanceInvocationState{
		wire.TLanceInvocationState_RUNNING, wire.TLanceInvocationState_QUEUED, wire.TLanceInvocationState_UNKNOWN_INVOCATION,
	} {
		if st := resp.Invocations[i]; st.State != want || st.Result_ != nil {
			t.Fatalf("invocation %d: %+v, want %s without a result", i, st, want)
		}
	}

	h.runner.release()
	st := h.waitState(4, "run", wire.TLanceInvocationState_FINISHED)
	r := st.Result_
	if r == nil || r.GetResultCode() != wire.TLanceIndexJobResultCode_NATIVE_OK || r.GetInvocationSecret() != testSecret ||
		r.JobID != 11 || r.DispatchRevision != 2 || r.InvocationID != "run" || r.BeProcessEpoch != h.a.Epoch() ||
		r.GetSanitizedMessage() != "index built" || r.GetExternalMetadataAdvanced() {
		t.Fatalf("finished result: %+v", r)
	}
	if st.GetTerminationProof() != wire.TLanceIndexTerminationProof_CHILD_REAPED || r.GetTerminationProof() != wire.TLanceIndexTerminationProof_CHILD_REAPED {
		t.Fatalf("finished proof: %+v", st)
	}

	// Kept until deadline + Grace (and delivered), then forgotten: FORGOTTEN.
	h.waitState(4, "wait", wire.TLanceInvocationState_FINISHED)
	eventually(t, func() bool { return len(outboxIDs(t, h.a)) == 0 }, "reports not delivered")
	if n := h.a.sweep(); n != 0 {
		t.Fatalf("swept %d before the deadline", n)
	}
	clk.Advance(2*time.Hour - time.Minute) // deadline (1 h) + grace (1 h), not yet
	if n := h.a.sweep(); n != 0 {
		t.Fatalf("swept %d before deadline + grace", n)
	}
	clk.Advance(2 * time.Minute)
	if n := h.a.sweep(); n != 2 {
		t.Fatalf("swept %d, want 2", n)
	}
	if st := h.state(4, "run"); st.State != wire.TLanceInvocationState_FORGOTTEN || st.Result_ != nil {
		t.Fatalf("after retention: %+v", st)
	}
}

// An id this process accepted is never UNKNOWN_INVOCATION (the master would
// read "never accepted" and end a committed build NOT_COMMITTED): once its
// entry is forgotten it answers FORGOTTEN, and a redelivery of it answers
// OK without running again.
func TestForgottenInvocationIsNeverUnknown(t *testing.T) {
	clk := clocktest.New(time.Now())
	m := newFakeMaster(t)
	h := newHarness(t, func(c *Config) { c.Clock, c.Masters = clk.Now, []string{m.Addr()} })
	h.ready(1)
	d := h.dispatch("inv", 1)
	h.submit(d)
	h.waitState(1, "inv", wire.TLanceInvocationState_FINISHED)
	eventually(t, func() bool { return m.callCount() == 1 && len(outboxIDs(t, h.a)) == 0 }, "not delivered")
	clk.Advance(3 * time.Hour) // deadline (1 h) + grace (1 h) passed
	if n := h.a.sweep(); n != 1 {
		t.Fatalf("swept %d, want 1", n)
	}
	resp := h.query(1, h.a.Epoch(), "inv", "never")
	if got := resp.Invocations[0].State; got != wire.TLanceInvocationState_FORGOTTEN {
		t.Fatalf("a forgotten accepted id answers %s, want FORGOTTEN", got)
	}
	if got := resp.Invocations[1].State; got != wire.TLanceInvocationState_UNKNOWN_INVOCATION {
		t.Fatalf("a never accepted id answers %s, want UNKNOWN_INVOCATION", got)
	}
	if got := h.submit(d); got != wire.TStatusCode_OK {
		t.Fatalf("redelivery of a forgotten id: %s, want OK", got)
	}
	if n := h.runner.runCount("inv"); n != 1 {
		t.Fatalf("a forgotten id ran %d times", n)
	}
	if st := h.state(1, "inv"); st.State != wire.TLanceInvocationState_FORGOTTEN {
		t.Fatalf("after the redelivery: %s", st.State)
	}
}

// A finished entry whose report still waits in the outbox is never
// forgotten, however old: the master may still need the query answer.
func TestHeldReportIsNeverForgotten(t *testing.T) {
	clk := clocktest.New(time.Now())
	h := newHarness(t, func(c *Config) { c.Clock, c.Masters = clk.Now, []string{closedAddr(t)} })
	h.ready(1)
	h.submit(h.dispatch("inv", 1))
	h.waitState(1, "inv", wire.TLanceInvocationState_FINISHED)
	clk.Advance(5 * time.Hour) // well past deadline + grace; the outbox keeps it 24 h
	if n := h.a.sweep(); n != 0 {
		t.Fatalf("swept %d entries whose report is still in the outbox", n)
	}
	if st := h.state(1, "inv"); st.State != wire.TLanceInvocationState_FINISHED || st.Result_.GetResultCode() != wire.TLanceIndexJobResultCode_NATIVE_OK {
		t.Fatalf("held entry answers %+v", st)
	}
	// Delivered at last: now it may go, and answers FORGOTTEN.
	m := newFakeMaster(t)
	h.heartbeat(1, m.Addr())
	eventually(t, func() bool { return len(outboxIDs(t, h.a)) == 0 }, "not delivered")
	eventually(t, func() bool { return h.a.sweep() == 1 }, "the delivered entry was not forgotten")
	if st := h.state(1, "inv"); st.State != wire.TLanceInvocationState_FORGOTTEN {
		t.Fatalf("after delivery and sweep: %s", st.State)
	}
}

// Past the tombstone bound the table goes lossy: every id it does not hold
// answers FORGOTTEN (still never UNKNOWN_INVOCATION for an accepted id), a
// new dispatch is still accepted, and one as late as a forgotten one could
// be answers OK without running.
func TestTombstoneBoundGoesLossy(t *testing.T) {
	clk := clocktest.New(time.Now())
	m := newFakeMaster(t)
	h := newHarness(t, func(c *Config) { c.Clock, c.Masters, c.MaxTombstones = clk.Now, []string{m.Addr()}, 1 })
	h.ready(1)
	for _, id := range []string{"a", "b"} {
		h.submit(h.dispatch(id, 1))
		h.waitState(1, id, wire.TLanceInvocationState_FINISHED)
	}
	eventually(t, func() bool { return len(outboxIDs(t, h.a)) == 0 }, "not delivered")
	clk.Advance(3 * time.Hour)
	if n := h.a.sweep(); n != 2 {
		t.Fatalf("swept %d", n)
	}
	resp := h.query(1, h.a.Epoch(), "a", "b", "never")
	for _, st := range resp.Invocations {
		if st.State != wire.TLanceInvocationState_FORGOTTEN {
			t.Fatalf("lossy table: %s answers %s, want FORGOTTEN", st.InvocationID, st.State)
		}
	}
	if h.logs.FilterMessageSnippet("tombstone bound").Len() != 1 {
		t.Error("going lossy was not logged once")
	}
	late := h.dispatch("b", 1)
	late.DeadlineMs = time.Now().Add(time.Hour).UnixMilli() // the original deadline, now 2 h past
	if got := h.submit(late); got != wire.TStatusCode_OK || h.runner.runCount("b") != 1 {
		t.Fatalf("late redelivery: %s, runs %d", got, h.runner.runCount("b"))
	}
	fresh := h.dispatch("c", 1)
	fresh.DeadlineMs = clk.Now().Add(time.Hour).UnixMilli()
	h.submit(fresh)
	h.waitState(1, "c", wire.TLanceInvocationState_FINISHED)
	if h.runner.runCount("c") != 1 {
		t.Fatal("a new dispatch did not run on a lossy table")
	}
}

func TestQueryBounds(t *testing.T) {
	h := newHarness(t, nil)
	ids := make([]string, maxQueryIDs+1)
	for i := range ids {
		ids[i] = "x"
	}
	if resp := h.query(1, h.a.Epoch(), ids...); resp.Status.StatusCode != wire.TStatusCode_INVALID_ARGUMENT {
		t.Fatalf("too many ids: %s", resp.Status.StatusCode)
	}
	long := string(make([]byte, 257))
	if resp := h.query(1, h.a.Epoch(), long); resp.Status.StatusCode != wire.TStatusCode_INVALID_ARGUMENT {
		t.Fatalf("long id: %s", resp.Status.StatusCode)
	}
	// A query does not need a heartbeat first.
	if resp := h.query(1, h.a.Epoch(), "a"); resp.Status.StatusCode != wire.TStatusCode_OK {
		t.Fatalf("query before any heartbeat: %s", resp.Status.StatusCode)
	}
}

func TestHeartbeat(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Concurrency = 3 })
	resp := h.heartbeat(9, "127.0.0.1:1", "127.0.0.1:2")
	if resp.Status.StatusCode != wire.TStatusCode_OK || resp.BeProcessEpoch != h.a.Epoch() || h.a.Epoch() <= 0 ||
		resp.GetCapacity() != 3 || resp.GetQueued() != 0 || resp.GetRunning() != 0 || resp.GetVersion() == "" {
		t.Fatalf("heartbeat: %+v", resp)
	}
	if got := h.a.dlv.order(); len(got) != 2 || got[0] != "127.0.0.1:1" {
		t.Fatalf("report targets %v", got)
	}
	// Malformed addresses are ignored; the previous targets stay.
	h.heartbeat(9, "not an address")
	if got := h.a.dlv.order(); len(got) != 2 {
		t.Fatalf("report targets after a bad heartbeat: %v", got)
	}
	h.a.mu.Lock()
	term := h.a.cl.term()
	h.a.mu.Unlock()
	if term != 9 {
		t.Fatalf("highest term %d, want 9", term)
	}
}

func TestNewValidates(t *testing.T) {
	for name, cfg := range map[string]Config{
		"no listen":     {DataDir: t.TempDir()},
		"no data dir":   {ListenAddr: "127.0.0.1:0"},
		"bad isolation": {ListenAddr: "127.0.0.1:0", DataDir: t.TempDir(), Isolation: "maybe"},
		"bad master":    {ListenAddr: "127.0.0.1:0", DataDir: t.TempDir(), Masters: []string{"nohost"}},
	} {
		if a, err := New(cfg, newFakeRunner()); err == nil {
			a.Close()
			t.Errorf("%s: New succeeded", name)
		}
	}
	if _, err := New(Config{ListenAddr: "127.0.0.1:0", DataDir: t.TempDir()}, nil); err == nil {
		t.Error("nil runner accepted")
	}
}
