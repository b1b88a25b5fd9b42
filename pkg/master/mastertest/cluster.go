// Package mastertest is the three-master test kit: three masters in one
// process over loopback with real raft-boltdb stores and one fake Thrift
// backend, and the operations tests run against them (set up, admit, wait,
// kill, restart). It is pkg/master/masterkit (the core, which needs no
// *testing.T and which the benchmark and pkg/faults use) with t.TempDir,
// t.Fatal and t.Cleanup. pkg/master's tests use it.
package mastertest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/pkg/config"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/master"
	"github.com/lancemaster/lancemaster/pkg/master/masterkit"
	"github.com/lancemaster/lancemaster/pkg/options"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
	"github.com/lancemaster/lancemaster/pkg/testkit"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
)

// Cluster is three masters in this process over loopback with real
// raft-boltdb stores, and one fake Thrift backend: a masterkit.Cluster
// (Nodes, Masters, Backend, Master, LiveMasters, Client) whose set-up and
// steps fail the test instead of returning errors.
type Cluster struct {
	*masterkit.Cluster
	T *testing.T
}

// New starts three masters (fast raft timeouts, data dirs under t.TempDir)
// and the fake backend; tweak, when set, edits each node's configuration
// before it is validated. Everything stops when the test ends.
func New(t *testing.T, tweak func(n *config.Node)) *Cluster {
	return NewWith(t, tweak, nil)
}

// NewWith is New with per-master options (knobs, hooks, a logger, a
// credential source), taken again at every Start. A master without a
// logger logs its warnings to the test.
func NewWith(t *testing.T, tweak func(n *config.Node), opts func(i int) master.Options) *Cluster {
	t.Helper()
	kc, err := masterkit.Start(masterkit.Config{Dir: t.TempDir(), FirstID: 1, FakeBackend: true,
		Tweak: func(_ int, n *config.Node) {
			if tweak != nil {
				tweak(n)
			}
		},
		Options: func(i int) master.Options {
			o := master.Options{}
			if opts != nil {
				o = opts(i)
			}
			if o.Logger == nil {
				o.Logger = zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
			}
			return o
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kc.Close)
	return &Cluster{Cluster: kc, T: t}
}

// Start starts (or restarts, from its data dir) master i.
func (c *Cluster) Start(i int) {
	c.T.Helper()
	if err := c.StartMaster(i); err != nil {
		c.T.Fatal(err)
	}
}

// Kill closes master i without handing leadership over.
func (c *Cluster) Kill(i int) {
	c.T.Helper()
	if err := c.Stop(i, false); err != nil {
		c.T.Logf("close m%d: %v", i+1, err)
	}
}

// Leader waits for a Leader whose term's barrier has completed.
func (c *Cluster) Leader() int {
	c.T.Helper()
	l, _, err := c.AwaitLeader(-1, 15*time.Second)
	if err != nil {
		c.T.Fatal(err)
	}
	return l
}

// Follower is a running master that is not the leader and has heard from
// one: a request through it reaches the leader rather than finding it
// still learning who leads (or, on a loaded machine, holding an election of
// its own after a missed heartbeat).
func (c *Cluster) Follower() int {
	c.T.Helper()
	c.Leader() // one leads, its term's barrier applied
	f := -1
	knows := testkit.Poll(15*time.Second, func() bool {
		for i, m := range c.LiveMasters() {
			if m == nil {
				continue
			}
			if id, _ := m.Node().Leader(); id != "" && id != c.Nodes[i].NodeID {
				f = i
				return true
			}
		}
		return false
	})
	if !knows {
		c.T.Fatal("no follower that knows the leader within 15 s")
	}
	return f
}

// JobCount is how many jobs m's replica holds.
func JobCount(m *master.Master) int {
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

// Setup registers the catalog and the backend and raises the quotas, through
// the given master.
func (c *Cluster) Setup(via int) {
	c.T.Helper()
	c.Backend.SetDataset("/data/lake/db/items.lance", job.Snapshot{Version: 3, Fields: []job.Field{{ID: 0, Name: "id", Type: "int32"}}})
	root := "/data/lake"
	steps := []func(ctx context.Context, cl *adminapi.LanceMasterServiceClient) error{
		func(ctx context.Context, cl *adminapi.LanceMasterServiceClient) error {
			_, err := cl.CreateCatalog(ctx, &adminapi.TCatalog{Name: "lake", RootURI: &root}, "")
			return err
		},
		func(ctx context.Context, cl *adminapi.LanceMasterServiceClient) error {
			_, err := cl.AddBackend(ctx, c.Backend.Addr(), "")
			return err
		},
	}
	for _, k := range []string{options.OptMaxUnresolvedGlobal, options.OptMaxUnresolvedPerCatalog, options.OptMaxUnresolvedPerTable} {
		steps = append(steps, func(ctx context.Context, cl *adminapi.LanceMasterServiceClient) error {
			_, err := cl.SetOption(ctx, k, "100000", "")
			return err
		})
	}
	for _, step := range steps {
		if err := c.CallWhileUnavailable(via, step); err != nil {
			c.T.Fatalf("setup: %v", err)
		}
	}
}

// CallWhileUnavailable calls fn on master via, again while the answer is
// UNAVAILABLE, for at most 20 s. UNAVAILABLE (no leader known, this master
// behind) is answered before anything is journaled and says "retry
// shortly": an operator retries it, and so does a test that is not about
// it (a loaded machine may lose a leader, or a follower not know the new
// one yet, for a moment).
func (c *Cluster) CallWhileUnavailable(via int, fn func(ctx context.Context, cl *adminapi.LanceMasterServiceClient) error) error {
	cl := c.Client(via)
	for end := time.Now().Add(20 * time.Second); ; {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := cl.Call(ctx, fn)
		cancel()
		var ae *adminapi.TAdminError
		if err == nil || !errors.As(err, &ae) || ae.Code != adminapi.TErrorCode_UNAVAILABLE || time.Now().After(end) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Admit sends n admissions (index names prefix0000...) to master via over
// Thrift, 16 at a time, and fails on any error.
func (c *Cluster) Admit(via int, prefix string, n int) {
	c.T.Helper()
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
			err := c.CallWhileUnavailable(via, func(ctx context.Context, cl *adminapi.LanceMasterServiceClient) error {
				_, err := cl.CreateIndex(ctx, &adminapi.TCreateIndexRequest{Catalog: "lake", Db: "db", Table: "items",
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
		c.T.Fatalf("%d of %d admissions failed; first: %v", failed.Load(), n, firstErr.Load())
	}
}

// AdmitIDs admits n BTREE indexes on table and returns their job ids.
func (c *Cluster) AdmitIDs(via int, catalog, table, prefix string, n int) []int64 {
	c.T.Helper()
	var ids []int64
	for i := 0; i < n; i++ {
		err := c.CallWhileUnavailable(via, func(ctx context.Context, a *adminapi.LanceMasterServiceClient) error {
			resp, err := a.CreateIndex(ctx, &adminapi.TCreateIndexRequest{Catalog: catalog, Db: "db", Table: table,
				IndexName: fmt.Sprintf("%s%03d", prefix, i), Column: "id", IndexType: "BTREE"})
			if err == nil {
				ids = append(ids, resp.GetJobID())
			}
			return err
		})
		if err != nil {
			c.T.Fatalf("admit %s%03d: %v", prefix, i, err)
		}
	}
	return ids
}

// WaitSettled waits until master l has every job of ids terminal and
// refreshed.
func (c *Cluster) WaitSettled(l int, ids []int64) {
	c.T.Helper()
	testkit.Eventually(c.T, 30*time.Second, "jobs settle", func() bool {
		m := c.LiveMasters()[l]
		return m != nil && masterkit.Settled(m.FSM().State(), ids)
	})
}

// DispatchedAll reports whether the fake backend received every job of ids.
func (c *Cluster) DispatchedAll(ids []int64) bool {
	got := map[int64]bool{}
	for _, d := range c.Backend.Dispatches() {
		got[d.JobID] = true
	}
	for _, id := range ids {
		if !got[id] {
			return false
		}
	}
	return true
}

// SetOptions sets cluster-wide options through master via.
func (c *Cluster) SetOptions(via int, kv map[string]string) {
	c.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := c.Client(via).Call(ctx, func(ctx context.Context, a *adminapi.LanceMasterServiceClient) error {
		for k, v := range kv {
			if _, err := a.SetOption(ctx, k, v, ""); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		c.T.Fatal(err)
	}
}

// CreateCatalog creates a catalog with a webhook refresh through master via.
func (c *Cluster) CreateCatalog(via int, name, root, webhook string) {
	c.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kind := "webhook"
	err := c.Client(via).Call(ctx, func(ctx context.Context, a *adminapi.LanceMasterServiceClient) error {
		_, err := a.CreateCatalog(ctx, &adminapi.TCatalog{Name: name, RootURI: &root, RefreshKind: &kind, RefreshURL: &webhook}, "")
		return err
	})
	if err != nil {
		c.T.Fatal(err)
	}
}
