package cluster

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// svcLog records what the leader services and the ready hook saw.
type svcLog struct {
	mu         sync.Mutex
	readyTerm  map[string]uint64 // node -> term of the last hook run
	starts     map[string]int    // node -> "watch" starts
	stops      map[string]int    // node -> "watch" returns
	active     map[string]int    // node -> "watch" runs in progress
	maxActive  map[string]int
	countAtRun map[string]int             // node -> FSM count when "watch" last started
	ctxs       map[string]context.Context // node -> ctx of the first "watch" run
	flakyRuns  map[string]int
	violations []string
}

func newSvcLog() *svcLog {
	return &svcLog{readyTerm: map[string]uint64{}, starts: map[string]int{}, stops: map[string]int{},
		active: map[string]int{}, maxActive: map[string]int{}, countAtRun: map[string]int{}, flakyRuns: map[string]int{},
		ctxs: map[string]context.Context{}}
}

func (l *svcLog) get(m map[string]int, id string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return m[id]
}

// install registers the hook and two services on tn's future Nodes.
// The hook fails once per Node; "watch" is slow to stop; "flaky" panics,
// then fails, then runs.
func (l *svcLog) install(tn *testNode, stopDelay time.Duration) {
	id := tn.cfg.NodeID
	tn.setup = func(n *Node) {
		hookCalls := 0
		n.OnLeaderReady(func(ctx context.Context) error {
			l.mu.Lock()
			defer l.mu.Unlock()
			if hookCalls++; hookCalls == 1 {
				return errors.New("first hook call fails; it must be retried")
			}
			term, _ := LeaderTermFromContext(ctx)
			l.readyTerm[id] = term
			return nil
		})
		n.AddLeaderService("watch", RunnableFunc(func(ctx context.Context) error {
			term, ok := LeaderTermFromContext(ctx)
			l.mu.Lock()
			if !ok || term == 0 || term != n.LeaderTerm() || l.readyTerm[id] != term {
				l.violations = append(l.violations, id+": watch started before the ready hook of its term")
			}
			if l.ctxs[id] == nil {
				l.ctxs[id] = ctx
			}
			l.starts[id]++
			l.active[id]++
			l.maxActive[id] = max(l.maxActive[id], l.active[id])
			l.countAtRun[id] = tn.currentFSM().Count()
			l.mu.Unlock()
			<-ctx.Done()
			time.Sleep(stopDelay) // a service that takes a while to wind down
			l.mu.Lock()
			l.active[id]--
			l.stops[id]++
			l.mu.Unlock()
			return ctx.Err()
		}))
		failures := 0
		n.AddLeaderService("flaky", RunnableFunc(func(ctx context.Context) error {
			l.mu.Lock()
			l.flakyRuns[id]++
			l.mu.Unlock()
			switch failures++; failures {
			case 1:
				panic("a leader service panics; it must be restarted like a failure")
			case 2:
				return errors.New("transient failure")
			}
			<-ctx.Done()
			return nil
		}))
	}
}

func TestLeaderServicesFollowLeadership(t *testing.T) {
	c := newTestCluster(t, 3)
	l := newSvcLog()
	for _, tn := range c.nodes {
		l.install(tn, 300*time.Millisecond)
	}
	c.startAll()
	ld := c.leader()
	id := ld.cfg.NodeID
	eventually(t, 10*time.Second, "watch starts on the leader", func() bool { return l.get(l.starts, id) == 1 })
	eventually(t, 10*time.Second, "flaky is restarted until it runs", func() bool { return l.get(l.flakyRuns, id) == 3 })
	for _, f := range c.followers(ld) {
		if l.get(l.starts, f.cfg.NodeID) != 0 {
			t.Errorf("leader service started on follower %s", f.cfg.NodeID)
		}
	}

	const writes = 30
	proposeMany(t, ld.node(), 0, writes, 8)

	// Transfer away, and straight back while the old run is still winding
	// down: the node must not start a new run before the old one returned.
	target := c.followers(ld)[0]
	if err := ld.node().TransferLeadership(target.cfg.NodeID); err != nil {
		t.Fatalf("TransferLeadership: %v", err)
	}
	if got, _ := ld.node().Leader(); got != target.cfg.NodeID {
		t.Errorf("after TransferLeadership the old leader names %q as leader, want %s", got, target.cfg.NodeID)
	}
	eventually(t, 10*time.Second, "the target leads", func() bool { return target.node().IsLeader() })
	eventually(t, 10*time.Second, "watch starts on the target", func() bool { return l.get(l.starts, target.cfg.NodeID) == 1 })
	if got := l.get(l.countAtRun, target.cfg.NodeID); got != writes {
		t.Errorf("watch on the new leader started with %d commands applied, want %d (barrier first)", got, writes)
	}
	// A service that outlives its leadership cannot write, not even through
	// the new leader.
	l.mu.Lock()
	stale := context.WithoutCancel(l.ctxs[id]) // keeps the term, drops the cancel
	l.mu.Unlock()
	fwdBefore := c.fwd.forwards.Load()
	if _, err := ld.node().Propose(stale, testCmd(writes)); !errors.Is(err, raftfsm.ErrNotLeader) {
		t.Errorf("Propose with a stale leader-service context: %v, want ErrNotLeader", err)
	}
	if c.fwd.forwards.Load() != fwdBefore {
		t.Errorf("a stale leader service's write was forwarded")
	}

	// The old leader's watch takes 300 ms to return; hand leadership back
	// before that, so the regain must wait for the old run.
	eventually(t, 10*time.Second, "transfer back", func() bool {
		return target.node().TransferLeadership(id) == nil
	})
	eventually(t, 10*time.Second, "watch starts again on the first leader", func() bool { return l.get(l.starts, id) == 2 })
	if got := l.get(l.stops, id); got != 1 {
		t.Errorf("watch started again on %s with %d of its first run's stops recorded, want 1", id, got)
	}
	// Leading again, in a later term: the first term's context still cannot write.
	if _, err := ld.node().Propose(stale, testCmd(writes)); !errors.Is(err, raftfsm.ErrNotLeader) {
		t.Errorf("Propose with the context of an earlier term on the leader: %v, want ErrNotLeader", err)
	}
	eventually(t, 10*time.Second, "target's services stopped", func() bool {
		return l.get(l.stops, target.cfg.NodeID) == 1
	})

	// Shutdown waits for the services: nothing runs once it returns.
	ld.stop(false)
	if got := l.get(l.active, id); got != 0 {
		t.Errorf("%d watch runs still active after Shutdown returned", got)
	}
	if got := l.get(l.stops, id); got != 2 {
		t.Errorf("watch stops on %s = %d, want 2", id, got)
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	for node, m := range l.maxActive {
		if m > 1 {
			t.Errorf("%s ran %d watch services at once; a new leadership must wait for the old run", node, m)
		}
	}
	for _, v := range l.violations {
		t.Error(v)
	}
}

func TestShutdownTransfersLeadership(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	c := newTestCluster(t, 3, func(cfg *Config) {
		cfg.Logger = cfg.Logger.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
			return zapcore.NewTee(c, core)
		}))
	})
	c.startAll()
	ld := c.leader()
	mustPropose(t, ld.node(), 1)

	t0 := time.Now()
	ld.stop(true)
	took := time.Since(t0)
	if n := logs.FilterMessage("leadership transferred before shutdown").Len(); n != 1 {
		t.Fatalf("leader logged %d transfers before shutdown, want 1 (warnings: %v)", n,
			logs.FilterMessage("leadership transfer before shutdown failed").All())
	}
	nl := c.leader()
	t.Logf("Shutdown(true) took %s; %s leads %s after it began", took, nl.cfg.NodeID, time.Since(t0))
	mustPropose(t, nl.node(), 2)
	c.awaitCount(2)
}
