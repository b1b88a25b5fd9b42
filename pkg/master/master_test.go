package master

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/pkg/config"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/options"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
	"github.com/lancemaster/lancemaster/pkg/rpc"
	"github.com/lancemaster/lancemaster/pkg/rpc/rpctest"
	"github.com/lancemaster/lancemaster/pkg/testkit"
)

// cluster3 is three masters in this process over loopback with real
// raft-boltdb stores, and one fake Thrift backend.
type cluster3 struct {
	t       *testing.T
	nodes   []*config.Node
	masters []*Master
	backend *rpctest.FakeBackend
	// opts, when set, adds per-master options (hooks) at every start.
	opts func(i int) Options
	mu   sync.Mutex // guards masters against the worker's reads
}

// freePorts reserves n loopback ports for servers named before they bind.
func freePorts(t *testing.T, n int) []int { return testkit.Ports(t, n) }

func newCluster3(t *testing.T, tweak func(n *config.Node)) *cluster3 {
	return newCluster3With(t, tweak, nil)
}

func newCluster3With(t *testing.T, tweak func(n *config.Node), opts func(i int) Options) *cluster3 {
	t.Helper()
	ports := freePorts(t, 6)
	c := &cluster3{t: t, backend: rpctest.NewFakeBackend(t), opts: opts}
	var peers []config.Peer
	for i := 0; i < 3; i++ {
		peers = append(peers, config.Peer{ID: fmt.Sprintf("m%d", i+1),
			RaftAddress: "127.0.0.1:" + strconv.Itoa(ports[i]), RPCAddress: "127.0.0.1:" + strconv.Itoa(ports[3+i])})
	}
	for i := 0; i < 3; i++ {
		n := config.DefaultNode()
		n.NodeID, n.Peers, n.DataDir, n.Timeouts = peers[i].ID, peers, t.TempDir(), config.RaftProfileFast
		if tweak != nil {
			tweak(n)
		}
		if err := n.Validate(); err != nil {
			t.Fatal(err)
		}
		c.nodes = append(c.nodes, n)
	}
	c.masters = make([]*Master, 3)
	for i := range c.nodes {
		c.start(i)
	}
	t.Cleanup(func() {
		for _, m := range c.masters {
			if m != nil {
				m.Close(false)
			}
		}
	})
	return c
}

func (c *cluster3) start(i int) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	o := Options{}
	if c.opts != nil {
		o = c.opts(i)
	}
	o.Node = c.nodes[i]
	if o.Logger == nil {
		o.Logger = zaptest.NewLogger(c.t, zaptest.Level(zap.WarnLevel))
	}
	if o.Credentials == nil {
		o.Credentials = config.StaticCredentials{}
	}
	m, err := Start(ctx, o)
	if err != nil {
		c.t.Fatalf("start m%d: %v", i+1, err)
	}
	c.mu.Lock()
	c.masters[i] = m
	c.mu.Unlock()
}

func (c *cluster3) kill(i int) {
	c.t.Helper()
	if err := c.masters[i].Close(false); err != nil {
		c.t.Logf("close m%d: %v", i+1, err)
	}
	c.mu.Lock()
	c.masters[i] = nil
	c.mu.Unlock()
}

// leader waits for a leader whose term's barrier has completed.
func (c *cluster3) leader() int {
	c.t.Helper()
	idx := -1
	eventually(c.t, 15*time.Second, "a leader", func() bool {
		for i, m := range c.masters {
			if m != nil && m.Node().LeaderTerm() != 0 {
				idx = i
				return true
			}
		}
		return false
	})
	return idx
}

func (c *cluster3) follower() int {
	l := c.leader()
	for i, m := range c.masters {
		if m != nil && i != l {
			return i
		}
	}
	c.t.Fatal("no follower")
	return -1
}

func (c *cluster3) client(i int) *rpc.MasterClient {
	return rpc.NewMasterClient([]string{c.nodes[i].RPCAdvertise}, rpc.DefaultConfig(), zap.NewNop())
}

func eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	testkit.Eventually(t, timeout, what, cond)
}

func jobCount(m *Master) int {
	n := 0
	after := int64(0)
	for {
		recs, more := m.FSM().State().ListJobs(raftfsm.JobFilter{}, after, 1000)
		n += len(recs)
		if !more || len(recs) == 0 {
			return n
		}
		after = recs[len(recs)-1].JobID
	}
}

// setup registers the catalog and the backend and raises the quotas, through
// the given master.
func (c *cluster3) setup(via int) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c.backend.SetDataset("/data/lake/db/items.lance", job.Snapshot{Version: 3, Fields: []job.Field{{ID: 0, Name: "id", Type: "int32"}}})
	err := c.client(via).Call(ctx, func(ctx context.Context, cl *adminapi.LanceMasterServiceClient) error {
		root := "/data/lake"
		if _, err := cl.CreateCatalog(ctx, &adminapi.TCatalog{Name: "lake", RootURI: &root}, ""); err != nil {
			return err
		}
		if _, err := cl.AddBackend(ctx, c.backend.Addr(), ""); err != nil {
			return err
		}
		for _, k := range []string{options.OptMaxUnresolvedGlobal, options.OptMaxUnresolvedPerCatalog, options.OptMaxUnresolvedPerTable} {
			if _, err := cl.SetOption(ctx, k, "100000", ""); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		c.t.Fatalf("setup: %v", err)
	}
}

// admit sends n admissions (index names prefix0000...) to master via over
// Thrift, 16 at a time, and fails on any error.
func (c *cluster3) admit(via int, prefix string, n int) {
	c.t.Helper()
	cl := c.client(via)
	var wg sync.WaitGroup
	var failed atomic.Int64
	var firstErr atomic.Value
	sem := make(chan struct{}, 16)
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			err := cl.Call(ctx, func(ctx context.Context, c *adminapi.LanceMasterServiceClient) error {
				_, err := c.CreateIndex(ctx, &adminapi.TCreateIndexRequest{Catalog: "lake", Db: "db", Table: "items",
					IndexName: fmt.Sprintf("%s%04d", prefix, i), Column: "id", IndexType: "BTREE"})
				return err
			})
			if err != nil {
				failed.Add(1)
				firstErr.CompareAndSwap(nil, err)
			}
		}(i)
	}
	wg.Wait()
	if failed.Load() > 0 {
		c.t.Fatalf("%d of %d admissions failed; first: %v", failed.Load(), n, firstErr.Load())
	}
}

// Three masters over loopback with real raft-boltdb stores: 1,000 admissions
// sent to a follower; the leader is killed; the new leader has all 1,000 and
// accepts writes; the killed master, restarted from its data dir, catches up.
func TestFollowerAdmissionsSurviveLeaderLoss(t *testing.T) {
	c := newCluster3(t, nil)
	f := c.follower()
	c.setup(f)
	c.admit(f, "i", 1000)
	for i, m := range c.masters {
		eventually(t, 10*time.Second, fmt.Sprintf("m%d applies 1000 jobs", i+1), func() bool { return jobCount(m) == 1000 })
	}

	old := c.leader()
	c.kill(old)
	l := c.leader()
	if l == old {
		t.Fatal("the killed master is still the leader")
	}
	if n := jobCount(c.masters[l]); n != 1000 {
		t.Fatalf("new leader has %d jobs", n)
	}
	// Ids are dense and unique: 1..1000.
	for id := int64(1); id <= 1000; id++ {
		if _, ok := c.masters[l].FSM().State().Job(id); !ok {
			t.Fatalf("job %d missing on the new leader", id)
		}
	}
	// The new leader accepts writes, also through the remaining follower.
	other := 3 - l - old
	c.admit(other, "after", 10)
	eventually(t, 10*time.Second, "1010 jobs on the leader", func() bool { return jobCount(c.masters[l]) == 1010 })

	// The killed master restarts from its data dir and catches up.
	c.start(old)
	eventually(t, 15*time.Second, "the restarted master catches up", func() bool { return jobCount(c.masters[old]) == 1010 })
	b1, b2 := c.masters[old].FSM().State().Books(), c.masters[l].FSM().State().Books()
	if fmt.Sprint(b1) != fmt.Sprint(b2) {
		t.Fatalf("books differ after catch-up:\n%v\n%v", b1, b2)
	}
}

// A master far behind is brought up by snapshot install.
func TestFarBehindMasterCatchesUpBySnapshot(t *testing.T) {
	c := newCluster3(t, func(n *config.Node) {
		n.SnapshotThreshold = 64
		n.TrailingLogs = 16
	})
	l := c.leader()
	c.setup(l)
	lag := (l + 1) % 3
	c.kill(lag)
	c.admit(l, "s", 300)
	if err := c.masters[l].Node().Snapshot(); err != nil {
		t.Fatal(err)
	}
	c.start(lag)
	eventually(t, 20*time.Second, "the lagging master catches up", func() bool { return jobCount(c.masters[lag]) == 300 })
	// Raft records the installed snapshot's index just after the FSM restore
	// that made the jobs visible.
	eventually(t, 10*time.Second, "the lagging master to record an installed snapshot", func() bool {
		s := c.masters[lag].Node().Stats()["last_snapshot_index"]
		return s != "" && s != "0"
	})
	if fmt.Sprint(c.masters[lag].FSM().State().Books()) != fmt.Sprint(c.masters[l].FSM().State().Books()) {
		t.Fatal("books differ after snapshot install")
	}
}
