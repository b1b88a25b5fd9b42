package dispatch

import (
	"testing"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

const testClusterID = "lm-0123456789abcdef0123456789abcdef"

func (e *env) setClusterID(id string) {
	e.t.Helper()
	if resp := e.propose(raftfsm.CmdSetClusterID, &journal.TClusterIDCommand{NowMs: e.nowMs(), ClusterID: id}); resp.Code != journal.TApplyCode_OK {
		e.t.Fatalf("set cluster id: %v %s", resp.Code, resp.GetMessage())
	}
}

// Heartbeats, dispatches, reconcile queries and resolve requests carry the
// journaled cluster id (§13.1); a backend naming it is of this cluster.
func TestRequestsCarryTheClusterID(t *testing.T) {
	e := newEnv(t)
	e.setClusterID(testClusterID)
	b1 := e.addBackend("b1:9060", 1)
	e.be.setHeartbeat("b1:9060", func(r *wire.THeartbeatResponse) { r.ClusterID = strPtr(testClusterID) })
	ids := e.admit(3)
	e.markRunning(ids[0], b1, 1, e.nowMs()+3_600_000, 3)
	e.markRunning(ids[1], b1, 1, e.nowMs()+3_600_000, 3)
	e.resolving(ids[1], e.nowMs())
	e.be.setQuery(queryAnswer(map[string]*wire.TInvocationStatus{}))
	e.be.setResolve(resolveAnswer(wire.TLanceResolveOutcome_UNKNOWN, "pruned", ""))
	e.heartbeat()
	if err := e.d.ReconcileRunning(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.round()

	if s, _ := e.pool.Status(b1); !s.Dispatchable() {
		t.Fatalf("status %+v: a backend naming our cluster id is dispatchable", s)
	}
	for _, hb := range e.be.heartbeats {
		if hb.GetClusterID() != testClusterID {
			t.Fatalf("heartbeat carries cluster id %q", hb.GetClusterID())
		}
	}
	if q := e.be.queried(); len(q) != 1 || q[0].GetClusterID() != testClusterID {
		t.Fatalf("queries %+v", q)
	}
	if r := e.be.resolved(); len(r) != 1 || r[0].req.GetClusterID() != testClusterID {
		t.Fatalf("resolves %+v", r)
	}
	s := e.be.submitted()
	if len(s) == 0 {
		t.Fatal("nothing dispatched")
	}
	for _, c := range s {
		if c.d.GetClusterID() != testClusterID {
			t.Fatalf("dispatch carries cluster id %q", c.d.GetClusterID())
		}
	}
	e.wantState(ids[1], job.Unknown)
}

// Before a cluster id is journaled, requests carry none.
func TestNoClusterIDYet(t *testing.T) {
	e := newEnv(t)
	e.addBackend("b1:9060", 1)
	e.admit(1)
	e.heartbeat()
	e.round()
	if hb := e.be.heartbeats[0]; hb.IsSetClusterID() {
		t.Fatal("a heartbeat carries a cluster id before one is journaled")
	}
	if s := e.be.submitted(); len(s) != 1 || s[0].d.IsSetClusterID() {
		t.Fatal("a dispatch carries a cluster id before one is journaled")
	}
}

// A backend bound to another cluster gets no dispatch.
func TestOtherClusterGetsNoDispatch(t *testing.T) {
	e := newEnv(t)
	e.setClusterID(testClusterID)
	e.addBackend("b1:9060", 1)
	e.be.setHeartbeat("b1:9060", func(r *wire.THeartbeatResponse) {
		r.Status.StatusCode = wire.TStatusCode_OTHER_CLUSTER
		r.ClusterID = strPtr("lm-other")
	})
	id := e.admit(1)[0]
	e.heartbeat()
	e.round()
	e.wantState(id, job.Pending)
	if len(e.be.submitted()) != 0 {
		t.Fatal("dispatched to a backend of another cluster")
	}
}
