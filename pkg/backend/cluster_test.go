package backend

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/backend/frame"
	"github.com/lancemaster/lancemaster/pkg/clocktest"
)

func (h *harness) clusterDispatch(id, cluster string, term int64) *wire.TLanceIndexJobDispatch {
	d := h.dispatch(id, term)
	d.ClusterID = &cluster
	return d
}

func (h *harness) clusterQuery(cluster string, term int64, ids ...string) *wire.TQueryInvocationsResponse {
	h.t.Helper()
	resp, err := h.client.Query(h.ctx(), h.a.Addr(), &wire.TQueryInvocationsRequest{LeaderTerm: term, BeProcessEpoch: h.a.Epoch(),
		InvocationIds: ids, ClusterID: &cluster})
	if err != nil {
		h.t.Fatalf("query: %v", err)
	}
	return resp
}

// The scenario: after an operator restored a snapshot into fresh
// masters (a new cluster id, Raft terms starting low), the backend that
// heard the old cluster at term 50 must take the new cluster's dispatches
// at term 2 once the old one is silent — not refuse them all with
// STALE_LEADER_TERM while its heartbeats look alive.
func TestRestoreIntoFreshMastersRebinds(t *testing.T) {
	clk := clocktest.New(time.Now())
	h := newHarness(t, func(c *Config) { c.Clock = clk.Now })
	if resp := h.heartbeatCluster("A", 50); resp.Status.StatusCode != wire.TStatusCode_OK || resp.GetClusterID() != "A" || !resp.GetAccepting() {
		t.Fatalf("first heartbeat: %+v", resp)
	}
	if got := h.submit(h.clusterDispatch("a1", "A", 50)); got != wire.TStatusCode_OK {
		t.Fatalf("cluster A's dispatch: %s", got)
	}
	clk.Advance(DefaultClusterRebindAfter)
	resp := h.heartbeatCluster("B", 2)
	if resp.Status.StatusCode != wire.TStatusCode_OK || resp.GetClusterID() != "B" || !resp.GetAccepting() {
		t.Fatalf("cluster B's heartbeat after A went silent: %+v", resp)
	}
	if got := h.submit(h.clusterDispatch("b1", "B", 2)); got != wire.TStatusCode_OK {
		t.Fatalf("cluster B's dispatch at term 2: %s, want OK", got)
	}
	if st := h.clusterQuery("B", 2, "b1"); st.Status.StatusCode != wire.TStatusCode_OK {
		t.Fatalf("cluster B's query: %s", st.Status.StatusCode)
	}
	h.waitState(2, "b1", wire.TLanceInvocationState_FINISHED)
	// Old cluster A is refused now, and a master without a cluster id is
	// judged against B.
	if got := h.submit(h.clusterDispatch("a2", "A", 51)); got != wire.TStatusCode_OTHER_CLUSTER {
		t.Fatalf("cluster A after the re-bind: %s, want OTHER_CLUSTER", got)
	}
	if got := h.submit(h.dispatch("n1", 1)); got != wire.TStatusCode_STALE_LEADER_TERM {
		t.Fatalf("no cluster id, term 1 < B's 2: %s", got)
	}
}

// A backend serves one cluster: while the bound cluster heartbeats, another
// cluster's heartbeats answer OTHER_CLUSTER (not accepting) and change
// nothing, and its dispatches and queries answer OTHER_CLUSTER.
func TestOtherClusterIsRefusedWhileTheBoundOneIsAlive(t *testing.T) {
	clk := clocktest.New(time.Now())
	m := newFakeMaster(t)
	h := newHarness(t, func(c *Config) { c.Clock = clk.Now })
	h.heartbeatCluster("A", 5, m.Addr())
	clk.Advance(DefaultClusterRebindAfter - time.Second)
	resp := h.heartbeatCluster("B", 9, closedAddr(t))
	if resp.Status.StatusCode != wire.TStatusCode_OTHER_CLUSTER || resp.GetAccepting() || resp.GetNotAcceptingReason() == "" ||
		resp.GetClusterID() != "A" || resp.BeProcessEpoch != h.a.Epoch() {
		t.Fatalf("another cluster's heartbeat: %+v", resp)
	}
	if got := h.a.dlv.order(); len(got) != 1 || got[0] != m.Addr() {
		t.Fatalf("another cluster's heartbeat changed the report targets: %v", got)
	}
	if got := h.submit(h.clusterDispatch("b1", "B", 9)); got != wire.TStatusCode_OTHER_CLUSTER {
		t.Fatalf("another cluster's dispatch: %s", got)
	}
	if resp := h.clusterQuery("B", 9, "x"); resp.Status.StatusCode != wire.TStatusCode_OTHER_CLUSTER {
		t.Fatalf("another cluster's query: %s", resp.Status.StatusCode)
	}
	// Nor does it read a dataset for another cluster: no resolve worker runs.
	var resolves atomic.Int32
	h.runner.setScript(func(context.Context, *frame.Request) Outcome { resolves.Add(1); return resolved("UNKNOWN", "", "", 1) })
	if resp := h.resolve(resolveReq(func(r *wire.TResolveJobRequest) { r.ClusterID = thrift.StringPtr("B") })); resp.Status.StatusCode != wire.TStatusCode_OTHER_CLUSTER || resolves.Load() != 0 {
		t.Fatalf("another cluster's resolve: %s, %d workers ran", resp.Status.StatusCode, resolves.Load())
	}
	// A heartbeat from A keeps it bound: B still cannot re-bind a second later.
	clk.Advance(time.Second)
	h.heartbeatCluster("A", 5)
	clk.Advance(time.Second)
	if resp := h.heartbeatCluster("B", 9); resp.Status.StatusCode != wire.TStatusCode_OTHER_CLUSTER {
		t.Fatalf("B re-bound while A heartbeats: %+v", resp)
	}
	if got := h.submit(h.clusterDispatch("a1", "A", 5)); got != wire.TStatusCode_OK {
		t.Fatalf("the bound cluster's dispatch: %s", got)
	}
	if h.a.cl.term() != 5 {
		t.Fatalf("B's term reached A's fence: %d", h.a.cl.term())
	}
}

// The fence is kept per cluster id: re-binding back to A keeps A's term.
func TestFenceIsKeptPerCluster(t *testing.T) {
	clk := clocktest.New(time.Now())
	h := newHarness(t, func(c *Config) { c.Clock = clk.Now })
	h.heartbeatCluster("A", 50)
	clk.Advance(time.Minute)
	h.heartbeatCluster("B", 2)
	if got := h.submit(h.clusterDispatch("b1", "B", 1)); got != wire.TStatusCode_STALE_LEADER_TERM {
		t.Fatalf("B at term 1 below its 2: %s", got)
	}
	clk.Advance(time.Minute)
	if resp := h.heartbeatCluster("A", 49); resp.Status.StatusCode != wire.TStatusCode_OK || resp.GetClusterID() != "A" {
		t.Fatalf("A again after B went silent: %+v", resp)
	}
	if got := h.submit(h.clusterDispatch("a1", "A", 49)); got != wire.TStatusCode_STALE_LEADER_TERM {
		t.Fatalf("A at term 49 below its 50: %s, want STALE_LEADER_TERM (A's fence must be kept)", got)
	}
	if got := h.submit(h.clusterDispatch("a2", "A", 50)); got != wire.TStatusCode_OK {
		t.Fatalf("A at its term 50: %s", got)
	}
}

// Masters without cluster ids (an older version) work as before, and the
// first heartbeat carrying a cluster id binds.
func TestNoClusterIDJudgedAgainstTheBoundCluster(t *testing.T) {
	h := newHarness(t, nil)
	h.ready(3)
	if got := h.submit(h.dispatch("old", 3)); got != wire.TStatusCode_OK {
		t.Fatalf("an old master's dispatch: %s", got)
	}
	if resp := h.heartbeatCluster("A", 4); resp.GetClusterID() != "A" || resp.Status.StatusCode != wire.TStatusCode_OK {
		t.Fatalf("binding heartbeat: %+v", resp)
	}
	if got := h.submit(h.dispatch("old2", 3)); got != wire.TStatusCode_STALE_LEADER_TERM {
		t.Fatalf("no cluster id at term 3 below A's 4: %s", got)
	}
	if got := h.submit(h.dispatch("old3", 4)); got != wire.TStatusCode_OK {
		t.Fatalf("no cluster id at A's term: %s", got)
	}
	long := string(make([]byte, maxClusterIDBytes+1))
	if got := h.submit(h.clusterDispatch("x", long, 4)); got != wire.TStatusCode_OTHER_CLUSTER && got != wire.TStatusCode_INVALID_ARGUMENT {
		t.Fatalf("an overlong cluster id: %s", got)
	}
}

// fenceClusterLocked (the helper resolve uses) without a term checks the
// cluster only.
func TestFenceClusterWithoutTerm(t *testing.T) {
	h := newHarness(t, nil)
	h.heartbeatCluster("A", 7)
	h.a.mu.Lock()
	defer h.a.mu.Unlock()
	for _, tc := range []struct {
		cluster string
		want    wire.TStatusCode
	}{{"A", wire.TStatusCode_OK}, {"", wire.TStatusCode_OK}, {"B", wire.TStatusCode_OTHER_CLUSTER},
		{string(make([]byte, maxClusterIDBytes+1)), wire.TStatusCode_INVALID_ARGUMENT}} {
		st := h.a.fenceClusterLocked(tc.cluster, noLeaderTerm)
		got := wire.TStatusCode_OK
		if st != nil {
			got = st.StatusCode
		}
		if got != tc.want {
			t.Errorf("cluster %.8q: %s, want %s", tc.cluster, got, tc.want)
		}
	}
	if st := h.a.fenceClusterLocked("A", 6); st == nil || st.StatusCode != wire.TStatusCode_STALE_LEADER_TERM {
		t.Errorf("A at term 6 below 7: %v", st)
	}
}

func TestClusterFencesAreBounded(t *testing.T) {
	clk := clocktest.New(time.Now())
	h := newHarness(t, func(c *Config) { c.Clock = clk.Now })
	h.heartbeatCluster("bound", 1)
	h.a.mu.Lock()
	defer h.a.mu.Unlock()
	h.a.cl.bound = "" // let requests name any cluster, as before a binding
	for i := 0; i < 3*maxClusterFences; i++ {
		clk.Advance(time.Millisecond)
		h.a.fenceClusterLocked(string(rune('a'+i%26))+time.Duration(i).String(), 1)
	}
	if n := len(h.a.cl.fences); n > maxClusterFences {
		t.Fatalf("%d fences kept, at most %d", n, maxClusterFences)
	}
}
