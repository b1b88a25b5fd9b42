package dispatch

import (
	"strings"
	"sync"
	"testing"

	"go.uber.org/zap/zapcore"

	"github.com/lancemaster/lancemaster/gen-go/wire"
)

func dispatchable(t *testing.T, e *env, id int64) bool {
	t.Helper()
	s, ok := e.pool.heardInTerm(id, testTerm)
	return ok && s.Dispatchable()
}

// Only an OK, accepting answer makes a backend dispatchable; an old backend
// that does not say counts as accepting.
func TestPoolAccepting(t *testing.T) {
	e := newEnv(t)
	b1 := e.addBackend("b1:9060", 1)
	e.heartbeat()
	if !dispatchable(t, e, b1) {
		t.Fatal("a backend that does not say whether it accepts must count as accepting")
	}
	e.be.setHeartbeat("b1:9060", func(r *wire.THeartbeatResponse) {
		r.Accepting = boolPtr(false)
		r.NotAcceptingReason = strPtr("isolation not verified")
	})
	e.heartbeat()
	s, _ := e.pool.Status(b1)
	if dispatchable(t, e, b1) || s.Accepting || s.NotAcceptingReason != "isolation not verified" || !s.Alive {
		t.Fatalf("status %+v: alive but not accepting", s)
	}
	woken(e.waker)
	e.be.setHeartbeat("b1:9060", func(r *wire.THeartbeatResponse) { r.Accepting = boolPtr(true) })
	e.heartbeat()
	if !dispatchable(t, e, b1) || !woken(e.waker) {
		t.Fatal("accepting again: dispatchable, and the dispatcher is woken")
	}
	// A non-OK status answer is the latest answer: not accepting.
	e.be.setHeartbeat("b1:9060", func(r *wire.THeartbeatResponse) { r.Status.StatusCode = wire.TStatusCode_SHUTTING_DOWN })
	e.heartbeat()
	if dispatchable(t, e, b1) {
		t.Fatal("a backend answering SHUTTING_DOWN is dispatchable")
	}
}

// OTHER_CLUSTER, or an answer naming another cluster id, makes a backend
// not alive for dispatch; logged at Warn once per change with both ids.
func TestPoolOtherCluster(t *testing.T) {
	e := newEnv(t)
	b1 := e.addBackend("b1:9060", 1)
	e.heartbeat()
	for _, tc := range []struct {
		name  string
		tweak func(*wire.THeartbeatResponse)
	}{
		{"status OTHER_CLUSTER", func(r *wire.THeartbeatResponse) {
			r.Status.StatusCode = wire.TStatusCode_OTHER_CLUSTER
			r.ClusterID = strPtr("cluster-B")
		}},
		{"another cluster id", func(r *wire.THeartbeatResponse) { r.ClusterID = strPtr("cluster-C") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.be.setHeartbeat("b1:9060", tc.tweak)
			before := e.logs.FilterMessageSnippet("another cluster").Len()
			e.heartbeat()
			e.heartbeat()
			if s, _ := e.pool.Status(b1); s.Alive || !s.OtherCluster || dispatchable(t, e, b1) {
				t.Fatalf("status %+v: a backend of another cluster is not alive", s)
			}
			warns := e.logs.FilterMessageSnippet("another cluster").FilterLevelExact(zapcore.WarnLevel).All()
			if len(warns)-before != 1 {
				t.Fatalf("%d warnings for one change, want 1", len(warns)-before)
			}
			w := warns[len(warns)-1].ContextMap()
			if w["backend_id"] != b1 || w["backend_cluster_id"] == "" || !strings.HasPrefix(w["backend_cluster_id"].(string), "cluster-") {
				t.Fatalf("the warning names %v", w)
			}
			if _, ok := w["cluster_id"]; !ok {
				t.Fatal("the warning does not name our cluster id")
			}
		})
	}
	e.be.setHeartbeat("b1:9060", nil)
	e.heartbeat()
	if s, _ := e.pool.Status(b1); !s.Alive || s.OtherCluster || !dispatchable(t, e, b1) {
		t.Fatalf("status %+v: back to this cluster", s)
	}
}

// A refused backend is not dispatchable until an OK, accepting heartbeat
// SENT after the refusal answers: one in flight at the time does not count.
func TestPoolRefusedClearedOnlyByALaterHeartbeat(t *testing.T) {
	e := newEnv(t)
	b1 := e.addBackend("b1:9060", 1)
	e.heartbeat()
	if !dispatchable(t, e, b1) {
		t.Fatal("setup")
	}

	// A heartbeat is in flight when the refusal is noted.
	inFlight, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	e.be.mu.Lock()
	e.be.hbGate = func(string) {
		once.Do(func() { close(inFlight); <-release })
	}
	e.be.mu.Unlock()
	done := make(chan struct{})
	go func() { e.heartbeat(); close(done) }()
	<-inFlight
	e.pool.MarkRefused(b1, testTerm)
	close(release)
	<-done
	if s, _ := e.pool.Status(b1); !s.Refused || dispatchable(t, e, b1) {
		t.Fatalf("status %+v: a heartbeat sent before the refusal cleared it", s)
	}

	// Not accepting does not clear it either.
	e.be.setHeartbeat("b1:9060", func(r *wire.THeartbeatResponse) { r.Accepting = boolPtr(false) })
	e.heartbeat()
	if s, _ := e.pool.Status(b1); !s.Refused {
		t.Fatal("a not-accepting answer cleared the refusal")
	}
	// A later OK, accepting one does, and wakes the dispatcher.
	e.be.setHeartbeat("b1:9060", nil)
	woken(e.waker)
	e.heartbeat()
	if s, _ := e.pool.Status(b1); s.Refused || !dispatchable(t, e, b1) || !woken(e.waker) {
		t.Fatalf("status %+v: an OK, accepting heartbeat sent after the refusal clears it", s)
	}
	// A refusal in another term's run is not this run's.
	e.pool.MarkRefused(b1, testTerm+1)
	if !dispatchable(t, e, b1) {
		t.Fatal("a refusal of another term was recorded")
	}
}

func boolPtr(b bool) *bool { return &b }
