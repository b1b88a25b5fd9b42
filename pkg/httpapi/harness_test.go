package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/admin"
	"github.com/lancemaster/lancemaster/pkg/config"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
	"github.com/lancemaster/lancemaster/pkg/raftfsm/raftfsmtest"
	"github.com/lancemaster/lancemaster/pkg/rpc"
)

// A single master over a real FSM: commands are applied as a one-node
// leader would; jobs are admitted and moved along with journal commands.

const (
	testNow       = 1_764_633_600_000
	storageCanary = "HTTPAPI-STORAGE-CANARY-51c0"
	secretCanary  = "HTTPAPI-INVOCATION-SECRET-8e2d"
)

type cluster struct{ p *raftfsmtest.Proposer }

func (c cluster) Leader() (string, string)             { return "m1", "127.0.0.1:1" }
func (c cluster) ConsistentRead(context.Context) error { return nil }
func (c cluster) ApplyLocal(ctx context.Context, cmd []byte) (*journal.TApplyResponse, error) {
	return c.p.Propose(ctx, cmd)
}
func (c cluster) Peers() ([]admin.PeerStatus, error) {
	return []admin.PeerStatus{{Peer: config.Peer{ID: "m1", RaftAddress: "127.0.0.1:2", RPCAddress: "127.0.0.1:1"}, Suffrage: "Voter", Leader: true}}, nil
}
func (c cluster) TransferLeadership(context.Context, string) (string, error) { return "m1", nil }
func (c cluster) RaftStats() (uint64, uint64, uint64)                        { i := c.p.Index(); return 1, i, i }

type leaderRaft struct{}

func (leaderRaft) IsLeader() bool           { return true }
func (leaderRaft) Leader() (string, string) { return "m1", "127.0.0.1:1" }
func (leaderRaft) LastContact() time.Time   { return time.Time{} }

type rig struct {
	t       *testing.T
	fsm     *raftfsm.FSM
	prop    *raftfsmtest.Proposer
	adm     *admin.Server
	srv     *httptest.Server
	catalog int64
	backend int64
}

func newRig(t *testing.T) *rig {
	t.Helper()
	fsm := raftfsm.New(zap.NewNop())
	p := &raftfsmtest.Proposer{FSM: fsm}
	clock := func() time.Time { return time.UnixMilli(testNow) }
	adm := admin.New(admin.Deps{
		Proposer: p, Reader: fsm, Cluster: cluster{p}, Backends: rpc.NewThriftBackendClient(rpc.DefaultConfig()),
		Credentials: config.StaticCredentials{"lake-creds": {"aws_secret_access_key": storageCanary}},
		Clock:       clock, NodeID: "m1",
	})
	r := &rig{t: t, fsm: fsm, prop: p, adm: adm}
	api := New(Deps{Admin: adm, Reader: fsm, Raft: leaderRaft{}, NodeID: "m1", Clock: clock, Access: Access{Plaintext: true}})
	r.srv = httptest.NewServer(api)
	t.Cleanup(r.srv.Close)
	ctx := context.Background()
	root, creds := "/data/lake", "lake-creds"
	cat, err := adm.CreateCatalog(ctx, &adminapi.TCatalog{Name: "lake", RootURI: &root, CredentialsRef: &creds}, "")
	if err != nil {
		t.Fatalf("create catalog: %v", err)
	}
	r.catalog = cat.GetCatalogID()
	be, err := adm.AddBackend(ctx, "127.0.0.1:9", "")
	if err != nil {
		t.Fatalf("add backend: %v", err)
	}
	r.backend = be.BackendID
	return r
}

// apply journals one command; its answer must be OK (items included).
func (r *rig) apply(ct raftfsm.CommandType, cmd thrift.TStruct) {
	r.t.Helper()
	data, err := raftfsm.Encode(ct, cmd)
	if err != nil {
		r.t.Fatal(err)
	}
	resp, err := r.prop.Propose(context.Background(), data)
	if err != nil {
		r.t.Fatal(err)
	}
	if resp.Code != journal.TApplyCode_OK {
		r.t.Fatalf("command %d: %s %s", ct, resp.Code, resp.GetMessage())
	}
	for _, it := range resp.Items {
		if it.Code != journal.TApplyCode_OK {
			r.t.Fatalf("command %d, job %d: %s %s", ct, it.JobID, it.Code, it.GetMessage())
		}
	}
}

// admit admits a CREATE of index name on lake.db.table at now.
func (r *rig) admit(table, name, indexType string, now int64) int64 {
	r.t.Helper()
	rec := &job.Record{Creator: "alice", CatalogID: r.catalog, DB: "db", Table: table, Provider: job.ProviderDirectory,
		Locator: "/data/lake/db/" + table + ".lance", DisplayIndexName: name, NormalizedIndexName: name,
		MutationType: job.Create, IndexType: indexType, Column: "vector", PropertiesJSON: "{}", AdmittedDatasetVersion: 1}
	r.apply(raftfsm.CmdAdmit, &journal.TAdmitCommand{NowMs: now, Job: raftfsm.RecordToThrift(rec)})
	return r.fsm.State().LastJobID()
}

func (r *rig) job(id int64) *job.Record {
	rec, ok := r.fsm.State().Job(id)
	if !ok {
		r.t.Fatalf("no job %d", id)
	}
	return rec
}

// dispatch is M1 of job id onto the rig's backend.
func (r *rig) dispatch(id int64, now int64) {
	rec := r.job(id)
	r.apply(raftfsm.CmdMarkRunningBatch, &journal.TMarkRunningBatch{NowMs: now, Jobs: []*journal.TMarkRunning{{
		JobID: id, ExpectedRev: rec.Rev, BackendID: r.backend, ProcessEpoch: 1,
		InvocationID:     "inv-" + strconv.FormatInt(id, 10) + "-" + strconv.FormatInt(rec.Rev, 10),
		InvocationSecret: secretCanary, DeadlineMs: now + 60_000, LeaderTerm: 1}}})
}

// complete is M2 with code (NATIVE_OK commits a CREATE).
func (r *rig) complete(id int64, code job.ResultCode, now int64) {
	rec := r.job(id)
	c := journal.TResultCode(code)
	r.apply(raftfsm.CmdCompleteBatch, &journal.TCompleteBatch{NowMs: now, Completions: []*journal.TCompletion{{
		JobID: id, DispatchRevision: rec.DispatchRevision, InvocationID: rec.InvocationID, ProcessEpoch: rec.ProcessEpoch,
		Result_: &journal.TJobResult_{Code: &c}}}})
}

func (r *rig) cancel(id int64, now int64) {
	r.apply(raftfsm.CmdCancel, &journal.TCancelCommand{NowMs: now, JobID: id, Actor: "bob"})
}

// get answers GET path with its status and decoded body.
func (r *rig) get(path string) (int, map[string]any, http.Header) {
	r.t.Helper()
	return getJSON(r.t, http.DefaultClient, r.srv.URL+path)
}

func getJSON(t *testing.T, c *http.Client, url string) (int, map[string]any, http.Header) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatalf("GET %s: %d, not a JSON object: %q", url, resp.StatusCode, b)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("GET %s: Content-Type %q", url, ct)
	}
	return resp.StatusCode, body, resp.Header
}

func toJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
