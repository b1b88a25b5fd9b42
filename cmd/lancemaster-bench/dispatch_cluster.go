package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/config"
	"github.com/lancemaster/lancemaster/pkg/console"
	"github.com/lancemaster/lancemaster/pkg/job"
	lmaster "github.com/lancemaster/lancemaster/pkg/master"
	"github.com/lancemaster/lancemaster/pkg/master/masterkit"
	"github.com/lancemaster/lancemaster/pkg/rpc"
	"github.com/lancemaster/lancemaster/pkg/testkit"
)

// The lifecycle sections (dispatch, reports, latency, failover) run three
// complete masters in this process, each started by master.Start exactly as
// `lancemaster serve` starts one: journal FSM, raft node with raft-boltdb
// stores (fsync on) under its own data dir, admin/report Thrift server,
// and the leader services (backend pool with heartbeats, dispatcher,
// refresh driver, retention GC). One rpctest.FakeBackend, reached over
// loopback Thrift like a real backend, is the only registered backend; its
// submit hook is the benchmark's probe.
//
// Each master reaches the backend through a gatedBackends: the production
// Thrift client, whose heartbeats the benchmark can refuse (the failover
// section uses that to keep work PENDING on a leader). Nothing else is
// changed.

// gatedBackends is rpc.NewThriftBackendClient with a gate on Heartbeat:
// while closed, every heartbeat fails as "not sent", so the master's pool
// hears no backend and its dispatcher sends nothing.
type gatedBackends struct {
	rpc.BackendClient
	closed atomic.Bool
}

var errGateClosed = errors.New("bench: heartbeats refused (gate closed)")

func (g *gatedBackends) Heartbeat(ctx context.Context, addr string, req *wire.THeartbeatRequest) (*wire.THeartbeatResponse, error) {
	if g.closed.Load() {
		return nil, &rpc.SendError{Op: "heartbeat", Addr: addr, Err: errGateClosed}
	}
	return g.BackendClient.Heartbeat(ctx, addr, req)
}

// mclusterConfig is what differs between the lifecycle clusters.
type mclusterConfig struct {
	name    string        // for errors and the temp dir
	profile string        // config.RaftProfileDefault or RaftProfileFast
	pool    time.Duration // the pool's heartbeat interval; 0 = production default (1 s)
	options [][2]string   // set after benchOptions, in order
	// console: each master serves its HTTP listener on a free loopback
	// port, with the console at /ui/ (the console section).
	console bool
}

// mcluster is the kit's three masters (masterkit: nodes, start, stop,
// leader, term, close) and its fake backend, with what is the benchmark's:
// the captured log, the gated backend clients, the configure step and the
// console.
type mcluster struct {
	*masterkit.Cluster
	cfg       mclusterConfig
	dir       string
	logs      *logCapture
	gates     []*gatedBackends
	backendID int64
	prevSlog  *slog.Logger // restored by close
	tables    atomic.Int64 // table names are unique across the cluster's life
}

// freeAddr reserves a loopback port for the rest of the run: the peer list
// must name every address before any node starts (testkit.ReservePorts
// keeps it from being taken before the node binds it).
func freeAddr() (string, error) {
	ps, err := testkit.ReservePorts(1)
	if err != nil {
		return "", err
	}
	return testkit.Addr(ps[0]), nil
}

// startMCluster starts the fake backend and three masters, waits for a
// leader, and configures the cluster through it (backend, catalog, options).
func startMCluster(o *options, cfg mclusterConfig) (c *mcluster, err error) {
	dir, err := os.MkdirTemp(o.tmp, cfg.name+"-")
	if err != nil {
		return nil, err
	}
	c = &mcluster{cfg: cfg, dir: dir, logs: &logCapture{}, prevSlog: slog.Default()}
	// The Thrift library reports through slog; serve routes it into the
	// master's log, and so does the benchmark (into the captured warnings).
	slog.SetDefault(slog.New(config.SlogHandler(c.logs.logger().Named("thrift"))))
	defer func() {
		if err != nil {
			c.close()
		}
	}()
	for i := 0; i < masterkit.Size; i++ {
		c.gates = append(c.gates, &gatedBackends{BackendClient: rpc.NewThriftBackendClient(rpc.DefaultConfig())})
	}
	c.Cluster, err = masterkit.Start(masterkit.Config{Dir: dir, Profile: cfg.profile, HTTP: cfg.console,
		FakeBackend: true, StartTimeout: setupTimeout,
		Tweak: func(_ int, n *config.Node) {
			if o.logStore != "" { // "" (options built without flags): the node default
				n.RaftLogStore = o.logStore
			}
		},
		Options: func(i int) lmaster.Options {
			return lmaster.Options{
				Logger:   c.logs.logger(),
				Backends: c.gates[i],
				Knobs:    &lmaster.Knobs{HeartbeatInterval: c.cfg.pool},
				Console:  c.consoleHandler(),
			}
		}})
	if err != nil {
		return c, fmt.Errorf("%s: %w", cfg.name, err)
	}
	// The fake serves in the masters' process: it keeps no record of the
	// reads it serves (a load point's inspects would stay in their heap).
	c.Backend.SetRecordReads(false)
	_, l, err := c.leader(-1)
	if err != nil {
		return c, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	err = withAdmin(ctx, l.RPCAddr(), func(ctx context.Context, a *adminapi.LanceMasterServiceClient) error {
		if _, err := a.AddBackend(ctx, c.Backend.Addr(), ""); err != nil {
			return fmt.Errorf("add backend: %w", err)
		}
		root := benchRoot
		if _, err := a.CreateCatalog(ctx, &adminapi.TCatalog{Name: benchCatalog, RootURI: &root}, ""); err != nil {
			return fmt.Errorf("create catalog: %w", err)
		}
		for _, kv := range append(append([][2]string(nil), benchOptions...), cfg.options...) {
			if _, err := a.SetOption(ctx, kv[0], kv[1], ""); err != nil {
				return fmt.Errorf("set %s: %w", kv[0], err)
			}
		}
		return nil
	})
	if err != nil {
		return c, fmt.Errorf("%s: configure: %w", cfg.name, err)
	}
	bs := l.FSM().State().Backends()
	if len(bs) != 1 {
		return c, fmt.Errorf("%s: %d backends registered, want 1", cfg.name, len(bs))
	}
	c.backendID = bs[0].ID
	// The leader's pool hears a new backend at its next heartbeat pass (up
	// to an interval later); until then nothing can be dispatched.
	if !waitFor(setupTimeout, 5*time.Millisecond, func() bool {
		s, _ := l.Pool().Status(c.backendID)
		return s.Alive
	}) {
		return c, fmt.Errorf("%s: the leader never heard the backend", cfg.name)
	}
	return c, nil
}

// leader waits for a master other than not (-1: any) that leads and has run
// its leader barrier.
func (c *mcluster) leader(not int) (int, *lmaster.Master, error) {
	i, m, err := c.AwaitLeader(not, leaderTimeout)
	if err != nil {
		return -1, nil, fmt.Errorf("%s: %w", c.cfg.name, err)
	}
	return i, m, nil
}

// close stops the masters and the fake, and removes the data dirs.
func (c *mcluster) close() {
	if c.Cluster != nil {
		c.Cluster.Close()
	}
	slog.SetDefault(c.prevSlog)
	os.RemoveAll(c.dir)
}

// withAdmin runs fn on a fresh admin connection to addr.
func withAdmin(ctx context.Context, addr string, fn func(context.Context, *adminapi.LanceMasterServiceClient) error) error {
	conn, err := rpc.Dial(ctx, addr, rpc.DefaultConfig())
	if err != nil {
		return err
	}
	defer conn.Close()
	return fn(ctx, adminapi.NewLanceMasterServiceClient(conn.Client()))
}

// setOption sets one cluster option through the master at addr.
func setOption(addr, key, value string) error {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	return withAdmin(ctx, addr, func(ctx context.Context, a *adminapi.LanceMasterServiceClient) error {
		_, err := a.SetOption(ctx, key, value, "")
		return err
	})
}

// admitter is one admission client with its own connection.
type admitter struct {
	c      *mcluster
	addr   string
	conn   *rpc.Conn
	client *adminapi.LanceMasterServiceClient
}

func (c *mcluster) newAdmitter(addr string) *admitter { return &admitter{c: c, addr: addr} }

// prepare registers a fresh table with the fake backend and returns the
// request admitting a BTREE index on its id column.
func (a *admitter) prepare() (*adminapi.TCreateIndexRequest, error) {
	table := "t" + strconv.FormatInt(a.c.tables.Add(1), 10)
	loc, err := job.DatasetLocator(benchRoot, benchDB, table)
	if err != nil {
		return nil, err
	}
	a.c.Backend.SetInspectResponse(loc, benchInspect)
	return &adminapi.TCreateIndexRequest{
		Catalog: benchCatalog, Db: benchDB, Table: table, IndexName: benchIndexName, Column: "id", IndexType: "BTREE",
	}, nil
}

// create calls CreateIndex: the full admission path (inspect round trip to
// the backend, preflight, one Raft entry). It returns the job id.
func (a *admitter) create(req *adminapi.TCreateIndexRequest) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	if a.conn == nil {
		conn, err := rpc.Dial(ctx, a.addr, rpc.DefaultConfig())
		if err != nil {
			return 0, err
		}
		a.conn, a.client = conn, adminapi.NewLanceMasterServiceClient(conn.Client())
	}
	resp, err := a.client.CreateIndex(ctx, req)
	var ae *adminapi.TAdminError
	switch {
	case errors.As(err, &ae):
		return 0, err
	case err != nil:
		a.close() // a broken stream: dial again next time
		return 0, err
	case resp.GetJobID() <= 0:
		return 0, fmt.Errorf("no job admitted (noop=%v)", resp.GetNoop())
	}
	return resp.GetJobID(), nil
}

// admit is prepare then create.
func (a *admitter) admit() (int64, error) {
	req, err := a.prepare()
	if err != nil {
		return 0, err
	}
	return a.create(req)
}

func (a *admitter) close() {
	if a.conn != nil {
		a.conn.Close()
		a.conn, a.client = nil, nil
	}
}

// admitRetries bounds the attempts of one admission in admitMany.
const admitRetries = 3

// admitMany admits n jobs through addr with conc clients and returns their
// ids (in no particular order).
func (c *mcluster) admitMany(addr string, n, conc int) ([]int64, error) {
	var (
		next     atomic.Int64
		mu       sync.Mutex
		ids      = make([]int64, 0, n)
		firstErr error
		wg       sync.WaitGroup
	)
	for g := 0; g < conc; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := c.newAdmitter(addr)
			defer a.close()
			for next.Add(1) <= int64(n) {
				var id int64
				var err error
				for try := 0; try < admitRetries; try++ {
					if id, err = a.admit(); err == nil {
						break
					}
					time.Sleep(errorBackoff)
				}
				mu.Lock()
				if err != nil {
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
				ids = append(ids, id)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return ids, fmt.Errorf("admission failed after %d tries: %w", admitRetries, firstErr)
	}
	return ids, nil
}

// waitFor polls cond every interval until it holds or timeout passes.
func waitFor(timeout, interval time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(interval)
	}
	return true
}

// consoleHandler is the console the masters serve (nil without it).
func (c *mcluster) consoleHandler() http.Handler {
	if !c.cfg.console {
		return nil
	}
	return console.Handler()
}
