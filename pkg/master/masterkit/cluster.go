// Package masterkit is the core of the three-master kit: three masters in
// one process over loopback with real raft-boltdb stores, started by
// master.Start exactly as `lancemaster serve` starts one, and, when asked,
// one fake Thrift backend. It needs no *testing.T: every step returns an
// error, and the caller closes the cluster. pkg/master/mastertest wraps it
// for tests (t.TempDir, t.Fatal, t.Cleanup); the benchmark and pkg/faults'
// world use it directly.
package masterkit

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/pkg/config"
	"github.com/lancemaster/lancemaster/pkg/master"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
	"github.com/lancemaster/lancemaster/pkg/rpc"
	"github.com/lancemaster/lancemaster/pkg/rpc/rpctest"
	"github.com/lancemaster/lancemaster/pkg/testkit"
)

// Size is how many masters a cluster has.
const Size = 3

// Config is what differs between the clusters of the kit's users. The zero
// value of every field but Dir is a working default.
type Config struct {
	// Dir is the parent of the data dirs: master <id> keeps its stores in
	// Dir/<id>. The caller owns Dir (the kit removes nothing).
	Dir string
	// FirstID numbers the masters: ids m<FirstID>, m<FirstID+1>, ….
	FirstID int
	// Profile is the raft timeouts profile; "" = config.RaftProfileFast.
	Profile string
	// Peers, when set, are the members as the others reach them (ids and
	// advertised addresses: a proxy's, say); Tweak then sets where each
	// binds. When nil, the kit reserves six loopback ports and the masters
	// bind what they advertise.
	Peers []config.Peer
	// HTTP gives each master an HTTP listener on a free loopback port.
	HTTP bool
	// Tweak, when set, edits master i's configuration before it is
	// validated.
	Tweak func(i int, n *config.Node)
	// Options, when set, gives master i's options (hooks, knobs, a logger,
	// a clock, backend clients), taken again at every start; the kit sets
	// Node, and Credentials when nil (config.StaticCredentials: the kit's
	// catalogs have none). A nil Logger is zap.NewNop (master.Start's).
	Options func(i int) master.Options
	// FakeBackend starts one rpctest.FakeBackend (Cluster.Backend); the
	// caller registers it.
	FakeBackend bool
	// StartTimeout bounds one master's start; 0 = 10 s.
	StartTimeout time.Duration
}

// Cluster is three masters (running or stopped) and their configuration.
type Cluster struct {
	Nodes []*config.Node
	// Masters holds the running masters (nil while stopped). Read it from
	// the goroutine that starts and stops them, or through Master and
	// LiveMasters from any goroutine.
	Masters []*master.Master
	Backend *rpctest.FakeBackend // nil without Config.FakeBackend

	cfg   Config
	ports []int // reserved by the kit, released by Close
	mu    sync.Mutex
}

// New configures the three masters (and starts the fake backend) without
// starting any master: StartMaster starts each.
func New(cfg Config) (c *Cluster, err error) {
	if cfg.Dir == "" {
		return nil, errors.New("masterkit: no Config.Dir")
	}
	if cfg.Profile == "" {
		cfg.Profile = config.RaftProfileFast
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 10 * time.Second
	}
	c = &Cluster{cfg: cfg, Masters: make([]*master.Master, Size)}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	peers := cfg.Peers
	if peers == nil {
		if c.ports, err = testkit.ReservePorts(2 * Size); err != nil {
			return c, err
		}
		for i := 0; i < Size; i++ {
			peers = append(peers, config.Peer{ID: "m" + strconv.Itoa(cfg.FirstID+i),
				RaftAddress: testkit.Addr(c.ports[i]), RPCAddress: testkit.Addr(c.ports[Size+i])})
		}
	}
	if len(peers) != Size {
		return c, fmt.Errorf("masterkit: %d peers, want %d", len(peers), Size)
	}
	for i := range peers {
		n := config.DefaultNode()
		n.NodeID, n.Peers, n.DataDir, n.Timeouts = peers[i].ID, peers, filepath.Join(cfg.Dir, peers[i].ID), cfg.Profile
		if cfg.HTTP {
			n.HTTPBind = "127.0.0.1:0"
		}
		if cfg.Tweak != nil {
			cfg.Tweak(i, n)
		}
		if err := n.Validate(); err != nil {
			return c, fmt.Errorf("masterkit: node %s: %w", n.NodeID, err)
		}
		c.Nodes = append(c.Nodes, n)
	}
	if cfg.FakeBackend {
		if c.Backend, err = rpctest.StartFakeBackend(rpc.DefaultConfig()); err != nil {
			return c, fmt.Errorf("masterkit: fake backend: %w", err)
		}
	}
	return c, nil
}

// Start is New, then every master started.
func Start(cfg Config) (*Cluster, error) {
	c, err := New(cfg)
	if err != nil {
		return nil, err
	}
	for i := range c.Nodes {
		if err := c.StartMaster(i); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// StartMaster starts (or restarts, from its data dir) master i.
func (c *Cluster) StartMaster(i int) error {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.StartTimeout)
	defer cancel()
	o := master.Options{}
	if c.cfg.Options != nil {
		o = c.cfg.Options(i)
	}
	o.Node = c.Nodes[i]
	if o.Credentials == nil {
		o.Credentials = config.StaticCredentials{}
	}
	m, err := master.Start(ctx, o)
	if err != nil {
		return fmt.Errorf("start master %s: %w", c.Nodes[i].NodeID, err)
	}
	c.mu.Lock()
	c.Masters[i] = m
	c.mu.Unlock()
	return nil
}

// Detach takes master i out of the cluster (nil if stopped) without
// closing it: the caller closes it, after whatever must come first.
func (c *Cluster) Detach(i int) *master.Master {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.Masters[i]
	c.Masters[i] = nil
	return m
}

// Stop closes master i: transfer = SIGTERM (leadership handed over first),
// else a kill as the others see it (raft stops answering). A stopped
// master is left as it is.
func (c *Cluster) Stop(i int, transfer bool) error {
	if m := c.Detach(i); m != nil {
		return m.Close(transfer)
	}
	return nil
}

// Master is master i (nil while stopped), safe from any goroutine.
func (c *Cluster) Master(i int) *master.Master {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Masters[i]
}

// LiveMasters is a copy of Masters, safe from any goroutine.
func (c *Cluster) LiveMasters() []*master.Master {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*master.Master(nil), c.Masters...)
}

// AwaitLeader waits (testkit.Poll) for a master other than not (-1: any)
// that leads and has run its leader barrier.
func (c *Cluster) AwaitLeader(not int, timeout time.Duration) (int, *master.Master, error) {
	idx, lead := -1, (*master.Master)(nil)
	testkit.Poll(timeout, func() bool {
		for i := range c.Nodes {
			if m := c.Master(i); i != not && m != nil && m.Node().LeaderTerm() != 0 {
				idx, lead = i, m
				return true
			}
		}
		return false
	})
	if idx < 0 {
		return -1, nil, fmt.Errorf("no leader elected within %v", timeout)
	}
	return idx, lead, nil
}

// Term is the highest raft term any running master has seen.
func (c *Cluster) Term() uint64 {
	var t uint64
	for i := range c.Nodes {
		if m := c.Master(i); m != nil {
			if v, err := strconv.ParseUint(m.Node().Stats()["term"], 10, 64); err == nil && v > t {
				t = v
			}
		}
	}
	return t
}

// Client is an admin client of master i alone (no failover).
func (c *Cluster) Client(i int) *rpc.MasterClient {
	return rpc.NewMasterClient([]string{c.Nodes[i].RPCAdvertise}, rpc.DefaultConfig(), zap.NewNop())
}

// Close stops every master (at once: no point in a leader change) and the
// fake backend, and releases the ports the kit reserved.
func (c *Cluster) Close() {
	var wg sync.WaitGroup
	for i := range c.Masters {
		wg.Add(1)
		go func() { defer wg.Done(); _ = c.Stop(i, false) }()
	}
	wg.Wait()
	if c.Backend != nil {
		c.Backend.Close()
	}
	testkit.ReleasePorts(c.ports)
	c.ports = nil
}

// Settled reports whether every job of ids is terminal and refreshed in st.
func Settled(st *raftfsm.State, ids []int64) bool {
	for _, id := range ids {
		if r, ok := st.Job(id); !ok || r.Unresolved() {
			return false
		}
	}
	return true
}
