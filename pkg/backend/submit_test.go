package backend

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/gen-go/wire"
)

// Every submit guard, in DESIGN.md §12's order: each request below fails
// two guards at once, and must get the earlier one's status.
func TestSubmitGuardsInOrder(t *testing.T) {
	h := newHarness(t, nil)
	h.runner.verified.Store(false)

	// Fails every guard from "no heartbeat" on.
	bad := h.dispatch("inv-1", 3)
	bad.BeProcessEpoch++
	bad.InvocationSecret = nil
	if got := h.submit(bad); got != wire.TStatusCode_NOT_READY {
		t.Fatalf("before any heartbeat: %s, want NOT_READY", got)
	}
	h.heartbeat(3)
	if got := h.submit(bad); got != wire.TStatusCode_NOT_READY {
		t.Fatalf("isolation not verified: %s, want NOT_READY", got)
	}
	if st, _ := h.a.submit(bad, nil); len(st.ErrorMsgs) != 1 || !strings.Contains(st.ErrorMsgs[0], "isolation") {
		t.Fatalf("the NOT_READY after the heartbeat should name isolation: %v", st.ErrorMsgs)
	}
	h.runner.verified.Store(true)
	if got := h.submit(bad); got != wire.TStatusCode_STALE_EPOCH {
		t.Fatalf("wrong epoch: %s, want STALE_EPOCH", got)
	}
	bad.BeProcessEpoch = h.a.Epoch()
	low := int64(2)
	bad.LeaderTerm = &low
	if got := h.submit(bad); got != wire.TStatusCode_STALE_LEADER_TERM {
		t.Fatalf("lower term: %s, want STALE_LEADER_TERM", got)
	}
	// A higher term raises the fence even though the payload is refused.
	high := int64(7)
	bad.LeaderTerm = &high
	if got := h.submit(bad); got != wire.TStatusCode_INVALID_ARGUMENT {
		t.Fatalf("no secret: %s, want INVALID_ARGUMENT", got)
	}
	if got := h.submit(h.dispatch("inv-1", 3)); got != wire.TStatusCode_STALE_LEADER_TERM {
		t.Fatalf("term 3 after term 7 was seen: %s, want STALE_LEADER_TERM", got)
	}
	if h.runner.runCount("inv-1") != 0 {
		t.Fatal("a refused dispatch ran")
	}
	if got := h.submit(h.dispatch("inv-1", 7)); got != wire.TStatusCode_OK {
		t.Fatalf("valid dispatch: %s, want OK", got)
	}
	// Queue full and shutting down are covered by their own tests.
}

func TestSubmitPayloadBounds(t *testing.T) {
	h := newHarness(t, nil)
	h.ready(1)
	long := func(n int) string { return strings.Repeat("x", n) }
	many := map[string]string{}
	for i := 0; i < 65; i++ {
		many[long(i+1)] = "v"
	}
	cases := map[string]func(d *wire.TLanceIndexJobDispatch){
		"empty invocation id":   func(d *wire.TLanceIndexJobDispatch) { d.InvocationID = "" },
		"invocation id 257 B":   func(d *wire.TLanceIndexJobDispatch) { d.InvocationID = long(257) },
		"no secret":             func(d *wire.TLanceIndexJobDispatch) { d.InvocationSecret = nil },
		"empty secret":          func(d *wire.TLanceIndexJobDispatch) { s := ""; d.InvocationSecret = &s },
		"65 storage options":    func(d *wire.TLanceIndexJobDispatch) { d.StorageOptions = many },
		"storage key 257 B":     func(d *wire.TLanceIndexJobDispatch) { d.StorageOptions = map[string]string{long(257): "v"} },
		"storage value 4097 B":  func(d *wire.TLanceIndexJobDispatch) { d.StorageOptions = map[string]string{"k": long(4097)} },
		"empty storage key":     func(d *wire.TLanceIndexJobDispatch) { d.StorageOptions = map[string]string{"": "v"} },
		"index name 1025 B":     func(d *wire.TLanceIndexJobDispatch) { d.IndexName = long(1025) },
		"column name 1025 B":    func(d *wire.TLanceIndexJobDispatch) { d.ColumnName = long(1025) },
		"properties 4097 B":     func(d *wire.TLanceIndexJobDispatch) { p := long(4097); d.PropertiesJSON = &p },
		"non-UTF-8 index name":  func(d *wire.TLanceIndexJobDispatch) { d.IndexName = "\xff" },
		"unknown mutation type": func(d *wire.TLanceIndexJobDispatch) { d.MutationType = 9 },
		"no dataset uri":        func(d *wire.TLanceIndexJobDispatch) { d.DatasetURI = "" },
		"CREATE without column": func(d *wire.TLanceIndexJobDispatch) { d.ColumnName = "" },
		"no deadline":           func(d *wire.TLanceIndexJobDispatch) { d.DeadlineMs = 0 },
		"DROP without index": func(d *wire.TLanceIndexJobDispatch) {
			d.MutationType = wire.TLanceIndexMutationType_DROP
			d.IndexName = ""
		},
		"OPTIMIZE with an index": func(d *wire.TLanceIndexJobDispatch) {
			d.MutationType, d.ColumnName, d.IndexType = wire.TLanceIndexMutationType_OPTIMIZE, "", ""
		},
	}
	for name, mutate := range cases {
		d := h.dispatch("inv-"+name, 1)
		mutate(d)
		st, err := h.client.Submit(h.ctx(), h.a.Addr(), d)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if st.StatusCode != wire.TStatusCode_INVALID_ARGUMENT {
			t.Errorf("%s: %s, want INVALID_ARGUMENT", name, st.StatusCode)
		}
		for _, m := range st.ErrorMsgs {
			if strings.Contains(m, "xxxxxxxx") {
				t.Errorf("%s: the message echoes a value: %.80s", name, m)
			}
		}
	}
	// At the bounds exactly: accepted.
	d := h.dispatch(long(256), 1)
	d.IndexName, d.ColumnName = long(1024), long(1024)
	p := long(4096)
	d.PropertiesJSON = &p
	d.StorageOptions = map[string]string{long(256): long(4096)}
	if got := h.submit(d); got != wire.TStatusCode_OK {
		t.Fatalf("at the bounds: %s, want OK", got)
	}
	drop := h.dispatch("inv-drop", 1)
	drop.MutationType, drop.ColumnName, drop.IndexType, drop.PropertiesJSON = wire.TLanceIndexMutationType_DROP, "", "", nil
	if got := h.submit(drop); got != wire.TStatusCode_OK {
		t.Fatalf("DROP without column: %s, want OK", got)
	}
}

func TestFencing(t *testing.T) {
	h := newHarness(t, nil)
	h.ready(5)
	other := h.dispatch("inv-epoch", 5)
	other.BeProcessEpoch = h.a.Epoch() - 1
	if got := h.submit(other); got != wire.TStatusCode_STALE_EPOCH {
		t.Fatalf("another epoch: %s", got)
	}
	if got := h.submit(h.dispatch("inv-low", 4)); got != wire.TStatusCode_STALE_LEADER_TERM {
		t.Fatalf("term below the heartbeat's: %s", got)
	}
	noTerm := h.dispatch("inv-noterm", 5)
	noTerm.LeaderTerm = nil
	if got := h.submit(noTerm); got != wire.TStatusCode_STALE_LEADER_TERM {
		t.Fatalf("a dispatch without a term, after term 5: %s", got)
	}
	// A lower-term heartbeat is still answered, and does not lower the fence.
	if resp := h.heartbeat(2); resp.Status.StatusCode != wire.TStatusCode_OK || resp.BeProcessEpoch != h.a.Epoch() {
		t.Fatalf("lower-term heartbeat: %+v", resp)
	}
	if got := h.submit(h.dispatch("inv-4", 4)); got != wire.TStatusCode_STALE_LEADER_TERM {
		t.Fatalf("after a lower heartbeat: %s", got)
	}
	// Equal term passes; a query at a higher term fences it.
	if got := h.submit(h.dispatch("inv-a", 5)); got != wire.TStatusCode_OK {
		t.Fatalf("same term: %s", got)
	}
	if resp := h.query(6, h.a.Epoch(), "inv-x"); resp.Status.StatusCode != wire.TStatusCode_OK ||
		resp.Invocations[0].State != wire.TLanceInvocationState_UNKNOWN_INVOCATION {
		t.Fatalf("query at 6: %+v", resp)
	}
	if got := h.submit(h.dispatch("inv-x", 5)); got != wire.TStatusCode_STALE_LEADER_TERM {
		t.Fatalf("term 5 after a term-6 query: %s", got)
	}
	// Query is fenced the same way.
	if resp := h.query(5, h.a.Epoch(), "inv-a"); resp.Status.StatusCode != wire.TStatusCode_STALE_LEADER_TERM {
		t.Fatalf("query at a lower term: %s", resp.Status.StatusCode)
	}
	if resp := h.query(6, h.a.Epoch()+1, "inv-a"); resp.Status.StatusCode != wire.TStatusCode_STALE_EPOCH {
		t.Fatalf("query of another epoch: %s", resp.Status.StatusCode)
	}
	// Even a redelivery of an accepted id is refused from a fenced-off leader.
	if got := h.submit(h.dispatch("inv-a", 5)); got != wire.TStatusCode_STALE_LEADER_TERM {
		t.Fatalf("redelivery from a fenced-off leader: %s", got)
	}
	if h.runner.runCount("inv-x") != 0 || h.runner.runCount("inv-low") != 0 || h.runner.runCount("inv-epoch") != 0 {
		t.Fatal("a fenced dispatch ran")
	}
}

func TestRedeliveryNeverRunsTwice(t *testing.T) {
	h := newHarness(t, nil)
	h.ready(1)
	h.runner.hold()
	if got := h.submit(h.dispatch("inv-a", 1)); got != wire.TStatusCode_OK {
		t.Fatal(got)
	}
	h.runner.waitStarted(t, "inv-a")
	if got := h.submit(h.dispatch("inv-b", 1)); got != wire.TStatusCode_OK { // queued behind inv-a
		t.Fatal(got)
	}
	// Redeliveries while running and while queued, concurrently.
	var wg sync.WaitGroup
	codes := make(chan wire.TStatusCode, 40)
	for i := 0; i < 20; i++ {
		for _, id := range []string{"inv-a", "inv-b"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				st, err := h.client.Submit(h.ctx(), h.a.Addr(), h.dispatch(id, 1))
				if err != nil {
					t.Error(err)
					return
				}
				codes <- st.StatusCode
			}()
		}
	}
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != wire.TStatusCode_OK {
			t.Fatalf("a redelivery answered %s, want OK", c)
		}
	}
	h.runner.release()
	h.waitState(1, "inv-b", wire.TLanceInvocationState_FINISHED)
	// And after it finished.
	if got := h.submit(h.dispatch("inv-a", 1)); got != wire.TStatusCode_OK {
		t.Fatal(got)
	}
	time.Sleep(20 * time.Millisecond) // room for a wrongful second run
	if a, b := h.runner.runCount("inv-a"), h.runner.runCount("inv-b"); a != 1 || b != 1 {
		t.Fatalf("runs: inv-a %d, inv-b %d; want 1 each", a, b)
	}
}

func TestQueueFull(t *testing.T) {
	h := newHarness(t, nil) // concurrency 1, queue 2
	h.ready(1)
	h.runner.hold()
	h.submit(h.dispatch("run", 1))
	h.runner.waitStarted(t, "run")
	for _, id := range []string{"q1", "q2"} {
		if got := h.submit(h.dispatch(id, 1)); got != wire.TStatusCode_OK {
			t.Fatalf("%s: %s", id, got)
		}
	}
	if got := h.submit(h.dispatch("q3", 1)); got != wire.TStatusCode_QUEUE_FULL {
		t.Fatalf("third queued: %s, want QUEUE_FULL", got)
	}
	if got := h.submit(h.dispatch("q1", 1)); got != wire.TStatusCode_OK {
		t.Fatalf("redelivery while the queue is full: %s, want OK", got)
	}
	hb := h.heartbeat(1)
	if hb.GetCapacity() != 1 || hb.GetQueued() != 2 || hb.GetRunning() != 1 || hb.GetVersion() != Version {
		t.Fatalf("heartbeat load: capacity %d queued %d running %d version %q", hb.GetCapacity(), hb.GetQueued(), hb.GetRunning(), hb.GetVersion())
	}
	if st := h.state(1, "q3"); st.State != wire.TLanceInvocationState_UNKNOWN_INVOCATION {
		t.Fatalf("refused q3 is %s, want UNKNOWN_INVOCATION", st.State)
	}
	h.runner.release()
	h.waitState(1, "q2", wire.TLanceInvocationState_FINISHED)
	if got := h.submit(h.dispatch("q3", 1)); got != wire.TStatusCode_OK {
		t.Fatalf("after the queue drained: %s", got)
	}
	if n := h.runner.runCount("q3"); n > 1 {
		t.Fatalf("q3 ran %d times", n)
	}
}

func TestShuttingDown(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.QueueSize = 1 })
	h.ready(1)
	h.runner.hold()
	h.submit(h.dispatch("run", 1))
	h.runner.waitStarted(t, "run")
	h.submit(h.dispatch("queued", 1))
	closed := make(chan error, 1)
	go func() { closed <- h.a.Close() }()
	// Close drains the queue (the queued dispatch never starts) and waits
	// for the running worker; meanwhile submits are refused.
	h.waitState(1, "queued", wire.TLanceInvocationState_FINISHED)
	if got := h.submit(h.dispatch("late", 1)); got != wire.TStatusCode_SHUTTING_DOWN {
		t.Fatalf("while shutting down: %s, want SHUTTING_DOWN", got)
	}
	if got := h.submit(h.dispatch("run", 1)); got != wire.TStatusCode_OK {
		t.Fatalf("redelivery while shutting down: %s, want OK", got)
	}
	st := h.state(1, "queued")
	if st.Result_.GetResultCode() != wire.TLanceIndexJobResultCode_PRE_INVOCATION_RESOURCE_REJECTED ||
		st.GetTerminationProof() != wire.TLanceIndexTerminationProof_NEVER_LAUNCHED {
		t.Fatalf("the queued dispatch finished as %+v", st)
	}
	if h.runner.runCount("queued") != 0 {
		t.Fatal("the queued dispatch ran")
	}
	h.runner.release()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if h.runner.runCount("late") != 0 {
		t.Fatal("a dispatch refused while shutting down ran")
	}
}

func TestShutdownCancelsWorkersAfterTheBound(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.ShutdownTimeout = 50 * time.Millisecond })
	h.ready(1)
	h.runner.hold()
	h.submit(h.dispatch("run", 1))
	h.runner.waitStarted(t, "run")
	if err := h.a.Close(); err != nil {
		t.Fatal(err)
	}
	h.a.mu.Lock()
	st := h.a.table.status("run")
	h.a.mu.Unlock()
	if st.State != wire.TLanceInvocationState_FINISHED || st.Result_.ResultCode != nil ||
		st.GetTerminationProof() != wire.TLanceIndexTerminationProof_CHILD_REAPED {
		t.Fatalf("a cancelled build finished as %+v", st)
	}
}

func TestDeadlinePassedInQueue(t *testing.T) {
	h := newHarness(t, nil)
	h.ready(1)
	h.runner.hold()
	h.submit(h.dispatch("run", 1))
	h.runner.waitStarted(t, "run")
	d := h.dispatch("short", 1)
	d.DeadlineMs = time.Now().Add(30 * time.Millisecond).UnixMilli()
	h.submit(d)
	time.Sleep(60 * time.Millisecond)
	h.runner.release()
	st := h.waitState(1, "short", wire.TLanceInvocationState_FINISHED)
	if h.runner.runCount("short") != 0 || st.GetTerminationProof() != wire.TLanceIndexTerminationProof_NEVER_LAUNCHED ||
		st.Result_.GetResultCode() != wire.TLanceIndexJobResultCode_PRE_INVOCATION_RESOURCE_REJECTED {
		t.Fatalf("an expired queued dispatch: runs %d, status %+v", h.runner.runCount("short"), st)
	}
}

// An OPTIMIZE names no index: the backend accepts it as it is (before, a
// dispatch without index_name was refused, so no OPTIMIZE could run).
func TestSubmitAcceptsAnOptimize(t *testing.T) {
	h := newHarness(t, nil)
	h.ready(1)
	d := h.dispatch("inv-optimize", 1)
	d.MutationType, d.IndexName, d.ColumnName, d.IndexType, d.PropertiesJSON = wire.TLanceIndexMutationType_OPTIMIZE, "", "", "", nil
	if got := h.submit(d); got != wire.TStatusCode_OK {
		t.Fatalf("OPTIMIZE dispatch: %s", got)
	}
}
