package backend

import (
	"sync"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/gen-go/wire"
)

type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *testClock) Add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func TestQueryThroughTheLifecycle(t *testing.T) {
	clk := &testClock{t: time.Now()}
	h := newHarness(t, func(c *Config) { c.Clock, c.Grace = clk.Now, time.Hour })
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

	// Kept until deadline + Grace, then forgotten.
	h.waitState(4, "wait", wire.TLanceInvocationState_FINISHED)
	if n := h.a.sweep(); n != 0 {
		t.Fatalf("swept %d before the deadline", n)
	}
	clk.Add(2*time.Hour - time.Minute) // deadline (1 h) + grace (1 h), not yet
	if n := h.a.sweep(); n != 0 {
		t.Fatalf("swept %d before deadline + grace", n)
	}
	clk.Add(2 * time.Minute)
	if n := h.a.sweep(); n != 2 {
		t.Fatalf("swept %d, want 2", n)
	}
	if st := h.state(4, "run"); st.State != wire.TLanceInvocationState_UNKNOWN_INVOCATION {
		t.Fatalf("after retention: %s", st.State)
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
