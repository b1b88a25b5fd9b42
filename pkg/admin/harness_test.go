package admin

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/config"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
	"github.com/lancemaster/lancemaster/pkg/raftfsm/raftfsmtest"
	"github.com/lancemaster/lancemaster/pkg/rpc"
	"github.com/lancemaster/lancemaster/pkg/rpc/rpctest"
)

type fakeCluster struct{ p *raftfsmtest.Proposer }

func (c fakeCluster) Leader() (string, string)             { return "m1", "127.0.0.1:1" }
func (c fakeCluster) ConsistentRead(context.Context) error { return nil }
func (c fakeCluster) ApplyLocal(ctx context.Context, cmd []byte) (*journal.TApplyResponse, error) {
	return c.p.Propose(ctx, cmd)
}
func (c fakeCluster) Peers() ([]PeerStatus, error) {
	return []PeerStatus{{Peer: config.Peer{ID: "m1", RaftAddress: "127.0.0.1:2", RPCAddress: "127.0.0.1:1"}, Suffrage: "Voter", Leader: true}}, nil
}
func (c fakeCluster) TransferLeadership(context.Context, string) (string, error) { return "m2", nil }
func (c fakeCluster) RaftStats() (uint64, uint64, uint64)                        { return 1, c.p.Index(), c.p.Index() }

// canarySecret is a storage credential that must reach the backend and
// nothing else.
const canarySecret = "CANARY-7f3a9c-secret-value"

type harness struct {
	t       testing.TB
	srv     *Server
	prop    *raftfsmtest.Proposer
	backend *rpctest.FakeBackend
	logs    *observer.ObservedLogs
	fsm     *raftfsm.FSM
}

// newHarness builds a Server over a real FSM, a fake Thrift backend on
// loopback (registered), and a catalog "lake" rooted at /data/lake whose
// dataset db.items has id, vector and text columns and one index.
func newHarness(t testing.TB) *harness {
	t.Helper()
	core, logs := observer.New(zap.DebugLevel)
	fsm := raftfsm.New(zap.New(core))
	p := &raftfsmtest.Proposer{FSM: fsm}
	fb := rpctest.NewFakeBackend(t)
	cfg := rpc.DefaultConfig()
	cfg.SocketTimeout = 5 * time.Second
	srv := New(Deps{
		Proposer: p, Reader: fsm, Cluster: fakeCluster{p}, Backends: rpc.NewThriftBackendClient(cfg),
		Credentials: config.StaticCredentials{"lake-creds": {"aws_secret_access_key": canarySecret}},
		Clock:       func() time.Time { return time.UnixMilli(1_700_000_000_000) },
		Logger:      zap.New(core), InspectTimeout: 5 * time.Second,
	})
	h := &harness{t: t, srv: srv, prop: p, backend: fb, logs: logs, fsm: fsm}
	ctx := context.Background()
	root, creds := "/data/lake", "lake-creds"
	if _, err := srv.CreateCatalog(ctx, &adminapi.TCatalog{Name: "lake", RootURI: &root, CredentialsRef: &creds}, ""); err != nil {
		t.Fatalf("create catalog: %v", err)
	}
	if _, err := srv.AddBackend(ctx, fb.Addr(), ""); err != nil {
		t.Fatalf("add backend: %v", err)
	}
	h.setDataset("/data/lake/db/items.lance", 7)
	return h
}

func (h *harness) setDataset(uri string, version int64, extra ...job.IndexInfo) {
	h.backend.SetDataset(uri, job.Snapshot{Version: version, Fields: []job.Field{
		{ID: 0, Name: "id", Type: "int32"},
		{ID: 1, Name: "vector", Type: "fixed_size_list", ListDimension: 8, ElementType: "float32"},
		{ID: 2, Name: "text", Type: "utf8", Nullable: true},
	}, Indexes: append([]job.IndexInfo{{Name: "id_idx", IndexType: "BTREE", Columns: []string{"id"}}}, extra...)})
}

func (h *harness) setOption(key, value string) {
	h.t.Helper()
	if _, err := h.srv.SetOption(context.Background(), key, value, ""); err != nil {
		h.t.Fatalf("set %s=%s: %v", key, value, err)
	}
}

func createReq(table, index, column, typ string, props ...string) *adminapi.TCreateIndexRequest {
	r := &adminapi.TCreateIndexRequest{Catalog: "lake", Db: "db", Table: table, IndexName: index, Column: column, IndexType: typ}
	for i := 0; i+1 < len(props); i += 2 {
		r.Properties = append(r.Properties, &adminapi.TProperty{Key: props[i], Value: props[i+1]})
	}
	return r
}

// errCode returns the TAdminError code of err, failing the test otherwise.
func errCode(t testing.TB, err error) adminapi.TErrorCode {
	t.Helper()
	var ae *adminapi.TAdminError
	if !errors.As(err, &ae) {
		t.Fatalf("want a *TAdminError, got %T %v", err, err)
	}
	return ae.Code
}

// wantRefused checks a rejected admission: its typed code, no entry
// journaled since before (h.prop.Index()), and neither a credential nor
// the locator in the error.
func (h *harness) wantRefused(err error, want adminapi.TErrorCode, before uint64) {
	h.t.Helper()
	if got := errCode(h.t, err); got != want {
		h.t.Fatalf("code %s (%v); want %s", got, err, want)
	}
	if h.prop.Index() != before {
		h.t.Fatalf("a rejected admission journaled %d entries", h.prop.Index()-before)
	}
	if strings.Contains(err.Error(), canarySecret) || strings.Contains(err.Error(), "/data/lake") {
		h.t.Fatalf("error leaks a credential or the locator: %v", err)
	}
}
