package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	clusteropt "github.com/lancemaster/lancemaster/pkg/options"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/pkg/config"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/job/jobwire"
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

// benchInspect is benchSnapshot's inspect answer, one for every table: the
// fake serves in the masters' process, and a copy per table would stay in
// their heap.
var benchInspect = jobwire.InspectResponse(&benchSnapshot)

// benchOptions lift every quota out of the way and allow the local-path root.
var benchOptions = [][2]string{
	{clusteropt.OptMaxUnresolvedGlobal, strconv.Itoa(1 << 30)},
	{clusteropt.OptMaxUnresolvedPerCatalog, strconv.Itoa(1 << 30)},
	{clusteropt.OptMaxUnresolvedPerTable, strconv.Itoa(1 << 30)},
	{clusteropt.OptEnableLocalFileMutation, "true"},
}

// admissionOptions (set after benchOptions): admission alone is measured,
// so the dispatcher (which every master runs) leaves the admitted jobs
// PENDING. The lifecycle sections need it running.
var admissionOptions = [][2]string{{clusteropt.OptDispatcherPaused, "true"}}

// runAdmission measures CreateIndex admissions at concurrency c on a fresh
// cluster. Client g admits a BTREE index on id of table t<g>_<seq>; before
// each request (untimed) the table's dataset is registered with the fake.
func runAdmission(o *options, c int) (loadResult, error) {
	mc, err := startMCluster(o, mclusterConfig{name: "admission", profile: config.RaftProfileDefault,
		options: admissionOptions})
	if err != nil {
		return loadResult{}, err
	}
	defer mc.close()
	_, leader, err := mc.leader(-1)
	if err != nil {
		return loadResult{}, err
	}
	term0 := mc.Term()
	mc.logs.reset()
	conns := newSharedConns(leader.RPCAddr())
	defer conns.close()
	res, err := closedLoop(c, o.warm, o.dur, func(g int) (worker, error) {
		cl := &admitClient{conns: conns, fake: mc.Backend, g: g}
		return worker{prepare: cl.prepare, do: cl.admit}, nil
	})
	res.JobsAtEnd = leader.FSM().State().LastJobID()
	res.Elections = int(mc.Term() - term0)
	res.MasterLog = mc.logs.snapshot()
	return res, err
}

// admitClient is one benchmark client; it calls over one of the load
// point's shared connections to the leader.
type admitClient struct {
	conns *sharedConns
	fake  *rpctest.FakeBackend
	g     int
	seq   int
	req   *adminapi.TCreateIndexRequest
}

func (a *admitClient) prepare() {
	a.seq++
	table := fmt.Sprintf("t%d_%d", a.g, a.seq)
	if loc, err := job.DatasetLocator(benchRoot, benchDB, table); err == nil {
		a.fake.SetInspectResponse(loc, benchInspect)
	}
	a.req = &adminapi.TCreateIndexRequest{
		Catalog: benchCatalog, Db: benchDB, Table: table, IndexName: benchIndexName,
		Column: "id", IndexType: "BTREE",
	}
}

func (a *admitClient) admit() error {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	client, err := a.conns.client(ctx, a.g)
	if err != nil {
		return err
	}
	resp, err := client.CreateIndex(ctx, a.req)
	var ae *adminapi.TAdminError
	switch {
	case errors.As(err, &ae) && ae.GetCode() == adminapi.TErrorCode_NOT_LEADER && ae.GetLeaderAddress() != "":
		a.conns.follow(ae.GetLeaderAddress()) // leadership moved (a stalled host): follow it, as the CLI does
		return err
	case err != nil:
		return err // an answer, or a broken connection, which the next call dials again
	case resp.GetJobID() <= 0:
		return fmt.Errorf("admission: no job admitted (noop=%v)", resp.GetNoop())
	}
	return nil
}
