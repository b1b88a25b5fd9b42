package cluster

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/lancemaster/lancemaster/pkg/config"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
	"github.com/lancemaster/lancemaster/pkg/testkit"
)

// The 3-node harness: real TCP transports on 127.0.0.1, real raft-boltdb
// stores in t.TempDir(), config.FastRaftTimeouts, an in-process Forwarder.

type testCluster struct {
	t     *testing.T
	peers []config.Peer
	nodes []*testNode
	fwd   *localForwarder
	log   *zap.Logger
}

type testNode struct {
	c   *testCluster
	cfg Config
	// setup runs on every fresh Node before Start (services, hooks).
	setup func(*Node)

	mu  sync.Mutex
	n   *Node        // nil while stopped
	fsm testableFSM  // the current instance's FSM
	gen atomic.Int32 // incremented on every start
}

// clusterOpt adjusts each node's Config before the first start.
type clusterOpt func(*Config)

func newTestCluster(t *testing.T, size int, opts ...clusterOpt) *testCluster {
	t.Helper()
	c := &testCluster{t: t, fwd: &localForwarder{byAddr: map[string]*testNode{}}}
	c.log = testLogger(t)
	ports := freePorts(t, size)
	for i := 0; i < size; i++ {
		c.peers = append(c.peers, config.Peer{
			ID:          fmt.Sprintf("m%d", i+1),
			RaftAddress: fmt.Sprintf("127.0.0.1:%d", ports[i]),
			RPCAddress:  fmt.Sprintf("rpc-m%d", i+1),
		})
	}
	for _, p := range c.peers {
		cfg := Config{
			NodeID:           p.ID,
			RaftBind:         p.RaftAddress,
			DataDir:          t.TempDir(),
			Peers:            c.peers,
			Timeouts:         config.FastRaftTimeouts(),
			ApplyTimeout:     10 * time.Second,
			SnapshotInterval: time.Hour, // tests snapshot explicitly
			Logger:           c.log,
		}
		for _, o := range opts {
			o(&cfg)
		}
		tn := &testNode{c: c, cfg: cfg}
		c.nodes = append(c.nodes, tn)
		c.fwd.byAddr[p.RPCAddress] = tn
	}
	t.Cleanup(func() {
		for _, tn := range c.nodes {
			tn.stop(false)
		}
	})
	return c
}

func (c *testCluster) startAll() {
	c.t.Helper()
	for _, tn := range c.nodes {
		tn.start()
	}
}

// start creates a fresh Node (and FSM) on the node's data dir and starts it.
func (tn *testNode) start() {
	t := tn.c.t
	t.Helper()
	fsm := newTestFSM(t)
	n, err := New(tn.cfg, fsm, tn.c.fwd)
	if err != nil {
		t.Fatalf("New(%s): %v", tn.cfg.NodeID, err)
	}
	if tn.setup != nil {
		tn.setup(n)
	}
	if err := n.Start(context.Background()); err != nil {
		t.Fatalf("Start(%s): %v", tn.cfg.NodeID, err)
	}
	tn.mu.Lock()
	tn.n, tn.fsm = n, fsm
	tn.mu.Unlock()
	tn.gen.Add(1)
}

// stop shuts the node down (no-op when stopped).
func (tn *testNode) stop(transfer bool) {
	tn.mu.Lock()
	n := tn.n
	tn.n = nil
	tn.mu.Unlock()
	if n == nil {
		return
	}
	if err := n.Shutdown(transfer); err != nil {
		tn.c.t.Errorf("Shutdown(%s): %v", tn.cfg.NodeID, err)
	}
}

func (tn *testNode) node() *Node {
	tn.mu.Lock()
	defer tn.mu.Unlock()
	return tn.n
}

func (tn *testNode) currentFSM() testableFSM {
	tn.mu.Lock()
	defer tn.mu.Unlock()
	return tn.fsm
}

// leader waits for exactly one running node to lead and returns it.
func (c *testCluster) leader() *testNode {
	c.t.Helper()
	var ld *testNode
	eventually(c.t, 10*time.Second, "a single leader", func() bool {
		ld = nil
		for _, tn := range c.nodes {
			if n := tn.node(); n != nil && n.IsLeader() {
				if ld != nil {
					return false
				}
				ld = tn
			}
		}
		return ld != nil
	})
	return ld
}

// followers returns the running nodes other than ld.
func (c *testCluster) followers(ld *testNode) []*testNode {
	var out []*testNode
	for _, tn := range c.nodes {
		if tn != ld && tn.node() != nil {
			out = append(out, tn)
		}
	}
	return out
}

// awaitCount waits until every running node's FSM has applied want commands.
func (c *testCluster) awaitCount(want int) {
	c.t.Helper()
	for _, tn := range c.nodes {
		if tn.node() == nil {
			continue
		}
		eventually(c.t, 20*time.Second, fmt.Sprintf("%s applies %d commands", tn.cfg.NodeID, want), func() bool {
			return tn.currentFSM().Count() == want
		})
	}
}

// localForwarder forwards in process to the leader Node's ApplyLocal.
type localForwarder struct {
	byAddr   map[string]*testNode // immutable after newTestCluster
	forwards atomic.Int64
}

func (f *localForwarder) ForwardApply(ctx context.Context, addr string, cmd []byte) ([]byte, error) {
	f.forwards.Add(1)
	tn, ok := f.byAddr[addr]
	if !ok {
		return nil, fmt.Errorf("%w: unknown rpc address %s", ErrNotApplied, addr)
	}
	n := tn.node()
	if n == nil {
		return nil, fmt.Errorf("%w: %s: connection refused", ErrNotApplied, addr)
	}
	resp, err := n.ApplyLocal(ctx, cmd)
	if err != nil {
		return nil, err
	}
	return raftfsm.EncodeResponse(resp)
}

// eventually is testkit.Eventually.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	testkit.Eventually(t, timeout, what, cond)
}

// freePorts reserves n loopback ports for transports named before they bind.
func freePorts(t *testing.T, n int) []int { return testkit.Ports(t, n) }

// testLogger logs through t.Log until the test's cleanups are done (raft
// goroutines must not log into a finished test). LANCEMASTER_TEST_LOG sets
// the level (default info).
func testLogger(t *testing.T) *zap.Logger {
	w := &tbWriter{t: t}
	t.Cleanup(w.close) // registered first, so it runs last
	level := zapcore.InfoLevel
	if s := os.Getenv("LANCEMASTER_TEST_LOG"); s != "" {
		if err := level.Set(s); err != nil {
			t.Fatalf("LANCEMASTER_TEST_LOG: %v", err)
		}
	}
	enc := zap.NewDevelopmentEncoderConfig()
	core := zapcore.NewCore(zapcore.NewConsoleEncoder(enc), zapcore.AddSync(w), level)
	return zap.New(core)
}

type tbWriter struct {
	mu   sync.Mutex
	t    *testing.T
	done bool
}

func (w *tbWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (w *tbWriter) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.done = true
}
