package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	clusteropt "github.com/lancemaster/lancemaster/pkg/options"
	"github.com/lancemaster/lancemaster/pkg/testkit"

	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/pkg/cluster"
	"github.com/lancemaster/lancemaster/pkg/config"
	"github.com/lancemaster/lancemaster/pkg/job"
	lmaster "github.com/lancemaster/lancemaster/pkg/master"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
	"github.com/lancemaster/lancemaster/pkg/rpc"
	"github.com/lancemaster/lancemaster/pkg/rpc/rpctest"
)

// The admission section: three real masters in this process (pkg/cluster
// nodes with raftfsm FSMs and raft-boltdb stores, each serving pkg/admin over
// Thrift on 127.0.0.1), one rpctest.FakeBackend as the registered backend,
// and c clients calling CreateIndex over Thrift against the leader.
const (
	benchCatalog   = "bench"
	benchRoot      = "/bench/root"
	benchDB        = "d"
	benchIndexName = "id_idx"
	setupTimeout   = 30 * time.Second
	requestTimeout = 30 * time.Second
	leaderTimeout  = 30 * time.Second
)

// benchSnapshot is what the fake backend answers for every benchmark table:
// an int32 id and a 128-dimensional float32 vector.
var benchSnapshot = job.Snapshot{
	Version: 1,
	Fields: []job.Field{
		{ID: 0, Name: "id", Type: "int32"},
		{ID: 1, Name: "vector", Type: "fixed_size_list", ListDimension: 128, ElementType: "float32", Nullable: true},
	},
}

// benchOptions lift every quota out of the way and allow the local-path root.
var benchOptions = [][2]string{
	{clusteropt.OptMaxUnresolvedGlobal, strconv.Itoa(1 << 30)},
	{clusteropt.OptMaxUnresolvedPerCatalog, strconv.Itoa(1 << 30)},
	{clusteropt.OptMaxUnresolvedPerTable, strconv.Itoa(1 << 30)},
	{clusteropt.OptEnableLocalFileMutation, "true"},
}

// admissionOptions: admission alone is measured, so the dispatcher (which
// every master runs) leaves the admitted jobs PENDING. The lifecycle
// sections, which share benchOptions, need it running.
var admissionOptions = append(append([][2]string(nil), benchOptions...), [2]string{clusteropt.OptDispatcherPaused, "true"})

type master struct {
	id      string
	m       *lmaster.Master
	rpcAddr string
}

func (m *master) fsm() *raftfsm.FSM   { return m.m.FSM() }
func (m *master) node() *cluster.Node { return m.m.Node() }

type lmCluster struct {
	dir      string
	logs     *logCapture // the masters' warnings and errors
	masters  []*master
	fake     *rpctest.FakeBackend
	stopFake func()
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

// startLMCluster starts three masters and the fake backend, waits for a
// leader and configures the cluster through the leader's admin API.
func startLMCluster(o *options) (lc *lmCluster, leader *master, err error) {
	dir, err := os.MkdirTemp(o.tmp, "lancemaster-")
	if err != nil {
		return nil, nil, err
	}
	lc = &lmCluster{dir: dir, logs: &logCapture{}}
	defer func() {
		if err != nil {
			lc.close()
		}
	}()
	peers := make([]config.Peer, 3)
	for i := range peers {
		raftAddr, err := freeAddr()
		if err != nil {
			return lc, nil, err
		}
		rpcAddr, err := freeAddr()
		if err != nil {
			return lc, nil, err
		}
		peers[i] = config.Peer{ID: fmt.Sprintf("m%d", i), RaftAddress: raftAddr, RPCAddress: rpcAddr}
	}
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	for _, p := range peers {
		m, err := startMaster(ctx, p, peers, filepath.Join(dir, p.ID), lc.logs.logger())
		if m != nil {
			lc.masters = append(lc.masters, m)
		}
		if err != nil {
			return lc, nil, fmt.Errorf("admission: start master %s: %w", p.ID, err)
		}
	}
	if leader, err = lc.awaitLeader(); err != nil {
		return lc, nil, err
	}
	if lc.fake, lc.stopFake, err = startFakeBackend(); err != nil {
		return lc, nil, fmt.Errorf("admission: fake backend: %w", err)
	}
	return lc, leader, configure(ctx, leader.rpcAddr, lc.fake.Addr())
}

// startMaster starts one complete master exactly as serve does.
func startMaster(ctx context.Context, self config.Peer, peers []config.Peer, dataDir string, log *zap.Logger) (*master, error) {
	n := config.DefaultNode()
	n.NodeID, n.DataDir, n.Peers = self.ID, dataDir, peers
	if err := n.Validate(); err != nil {
		return nil, err
	}
	m, err := lmaster.Start(ctx, lmaster.Options{Node: n, Logger: log.With(zap.String("master", self.ID)),
		Credentials: config.StaticCredentials{}}) // the bench catalog has no credentials
	if err != nil {
		return nil, err
	}
	return &master{id: self.ID, m: m, rpcAddr: self.RPCAddress}, nil
}

// awaitLeader waits until one master leads and has run its leader barrier.
func (lc *lmCluster) awaitLeader() (*master, error) {
	deadline := time.Now().Add(leaderTimeout)
	for time.Now().Before(deadline) {
		for _, m := range lc.masters {
			if m.node().LeaderTerm() != 0 {
				return m, nil
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	return nil, errors.New("admission: no leader elected")
}

// configure registers the fake backend, creates the catalog and sets the
// options, as an operator would with the CLI.
func configure(ctx context.Context, addr, backendAddr string) error {
	conn, err := rpc.Dial(ctx, addr, rpc.DefaultConfig())
	if err != nil {
		return err
	}
	defer conn.Close()
	c := adminapi.NewLanceMasterServiceClient(conn.Client())
	if _, err := c.AddBackend(ctx, backendAddr, ""); err != nil {
		return fmt.Errorf("admission: add backend: %w", err)
	}
	root := benchRoot
	if _, err := c.CreateCatalog(ctx, &adminapi.TCatalog{Name: benchCatalog, RootURI: &root}, ""); err != nil {
		return fmt.Errorf("admission: create catalog: %w", err)
	}
	for _, kv := range admissionOptions {
		if _, err := c.SetOption(ctx, kv[0], kv[1], ""); err != nil {
			return fmt.Errorf("admission: set %s: %w", kv[0], err)
		}
	}
	return nil
}

// term is the highest raft term any master has seen: it grows by one (at
// least) with every election.
func (lc *lmCluster) term() uint64 {
	var t uint64
	for _, m := range lc.masters {
		if v, err := strconv.ParseUint(m.node().Stats()["term"], 10, 64); err == nil && v > t {
			t = v
		}
	}
	return t
}

// close stops the RPC servers, the nodes and the fake, and removes the dirs.
// The benchmark's clients have hung up by then; each server is given a
// moment to see that before it is closed, so it does not log the connections
// it cuts as errors.
func (lc *lmCluster) close() {
	for _, m := range lc.masters {
		m.m.Close(false)
	}
	if lc.stopFake != nil {
		lc.stopFake()
	}
	os.RemoveAll(lc.dir)
}

// runAdmission measures CreateIndex admissions at concurrency c on a fresh
// cluster. Client g admits a BTREE index on id of table t<g>_<seq>; before
// each request (untimed) the table's dataset is registered with the fake.
func runAdmission(o *options, c int) (loadResult, error) {
	lc, leader, err := startLMCluster(o)
	if err != nil {
		return loadResult{}, err
	}
	defer lc.close()
	term0 := lc.term()
	lc.logs.reset()
	res, err := closedLoop(c, o.warm, o.dur, func(g int) (worker, error) {
		cl := &admitClient{addr: leader.rpcAddr, fake: lc.fake, g: g}
		return worker{prepare: cl.prepare, do: cl.admit, close: cl.close}, nil
	})
	res.JobsAtEnd = leader.fsm().State().LastJobID()
	res.Elections = int(lc.term() - term0)
	res.MasterLog = lc.logs.snapshot()
	return res, err
}

// admitClient is one benchmark client with its own connection to the leader.
type admitClient struct {
	addr string
	fake *rpctest.FakeBackend
	g    int
	seq  int

	conn   *rpc.Conn
	client *adminapi.LanceMasterServiceClient
	req    *adminapi.TCreateIndexRequest
}

func (a *admitClient) prepare() {
	a.seq++
	table := fmt.Sprintf("t%d_%d", a.g, a.seq)
	if loc, err := job.DatasetLocator(benchRoot, benchDB, table); err == nil {
		a.fake.SetDataset(loc, benchSnapshot)
	}
	a.req = &adminapi.TCreateIndexRequest{
		Catalog: benchCatalog, Db: benchDB, Table: table, IndexName: benchIndexName,
		Column: "id", IndexType: "BTREE",
	}
}

func (a *admitClient) admit() error {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	if a.conn == nil {
		conn, err := rpc.Dial(ctx, a.addr, rpc.DefaultConfig())
		if err != nil {
			return err
		}
		a.conn, a.client = conn, adminapi.NewLanceMasterServiceClient(conn.Client())
	}
	resp, err := a.client.CreateIndex(ctx, a.req)
	var ae *adminapi.TAdminError
	switch {
	case errors.As(err, &ae) && ae.GetCode() == adminapi.TErrorCode_NOT_LEADER && ae.GetLeaderAddress() != "":
		a.close() // leadership moved (a stalled host): follow it, as the CLI does
		a.addr = ae.GetLeaderAddress()
		return err
	case errors.As(err, &ae):
		return err // an answer: the connection is fine
	case err != nil:
		a.close() // a broken stream: dial again next time
		return err
	case resp.GetJobID() <= 0:
		return fmt.Errorf("admission: no job admitted (noop=%v)", resp.GetNoop())
	}
	return nil
}

func (a *admitClient) close() {
	if a.conn != nil {
		a.conn.Close()
		a.conn, a.client = nil, nil
	}
}
