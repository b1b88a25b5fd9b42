package main

import (
	"bytes"
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/rpc"
)

// recorded is one admin call the fake received.
type recorded struct {
	method string
	req    any
	actor  string // the claim (--as) a method takes as an argument
}

// fakeMaster is an in-process LanceMasterService with canned answers that
// records every request. Set the canned fields before the first call.
type fakeMaster struct {
	admit    *adminapi.TAdmitResponse
	logs     *adminapi.TJobLogs
	pages    map[int64]*adminapi.TListJobsResponse // by after_job_id, or before_job_id when set
	job      *adminapi.TJobView
	resolve  *adminapi.TResolveResponse
	catalog  *adminapi.TCatalog
	catalogs []*adminapi.TCatalog
	backend  *adminapi.TBackend
	backends []*adminapi.TBackend
	option   *adminapi.TOption
	options  []*adminapi.TOption
	peers    *adminapi.TRaftPeersResponse
	leader   string
	err      error         // when set, every admin method fails with it
	block    chan struct{} // when set, every admin method waits for it

	mu    sync.Mutex
	calls []recorded
}

func (f *fakeMaster) record(method string, req any) error { return f.recordAs(method, req, "") }

// recordAs records a call of a method that takes the claim as an argument.
func (f *fakeMaster) recordAs(method string, req any, actor string) error {
	f.mu.Lock()
	f.calls = append(f.calls, recorded{method, req, actor})
	f.mu.Unlock()
	if f.block != nil {
		<-f.block
	}
	return f.err
}

// recordedCalls returns a copy of the calls received so far.
func (f *fakeMaster) recordedCalls() []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recorded(nil), f.calls...)
}

// onlyCall asserts exactly one call of method and returns its request.
func (f *fakeMaster) onlyCall(t *testing.T, method string) any {
	t.Helper()
	calls := f.recordedCalls()
	if len(calls) != 1 || calls[0].method != method {
		t.Fatalf("calls = %+v, want exactly one %s", calls, method)
	}
	return calls[0].req
}

func (f *fakeMaster) ReportLanceIndexJobResult_(context.Context, *wire.TLanceIndexJobReport) (*wire.TStatus, error) {
	return nil, thrift.NewTApplicationException(thrift.UNKNOWN_METHOD, "fake")
}

func (f *fakeMaster) ReportLanceIndexJobTermination(context.Context, *wire.TLanceIndexJobTerminationReport) (*wire.TStatus, error) {
	return nil, thrift.NewTApplicationException(thrift.UNKNOWN_METHOD, "fake")
}

func (f *fakeMaster) ReportLanceIndexJobProgress(context.Context, *wire.TLanceIndexJobProgressReport) (*wire.TStatus, error) {
	return nil, thrift.NewTApplicationException(thrift.UNKNOWN_METHOD, "fake")
}

func (f *fakeMaster) CreateIndex(_ context.Context, r *adminapi.TCreateIndexRequest) (*adminapi.TAdmitResponse, error) {
	return f.admit, f.record("CreateIndex", r)
}

func (f *fakeMaster) DropIndex(_ context.Context, r *adminapi.TDropIndexRequest) (*adminapi.TAdmitResponse, error) {
	return f.admit, f.record("DropIndex", r)
}

func (f *fakeMaster) OptimizeDataset(_ context.Context, r *adminapi.TOptimizeRequest) (*adminapi.TAdmitResponse, error) {
	return f.admit, f.record("OptimizeDataset", r)
}

func (f *fakeMaster) JobLogs(_ context.Context, id int64, maxBytes int32) (*adminapi.TJobLogs, error) {
	return f.logs, f.record("JobLogs", [2]any{id, maxBytes})
}

func (f *fakeMaster) ListJobs(_ context.Context, r *adminapi.TListJobsRequest) (*adminapi.TListJobsResponse, error) {
	if err := f.record("ListJobs", r); err != nil {
		return nil, err
	}
	cursor := r.GetAfterJobID()
	if r.IsSetBeforeJobID() {
		cursor = r.GetBeforeJobID()
	}
	if p, ok := f.pages[cursor]; ok {
		return p, nil
	}
	return &adminapi.TListJobsResponse{Jobs: []*adminapi.TJobView{}}, nil
}

func (f *fakeMaster) ShowJob(_ context.Context, id int64, consistent bool) (*adminapi.TJobView, error) {
	return f.job, f.record("ShowJob", [2]any{id, consistent})
}

func (f *fakeMaster) ResolveJob(_ context.Context, r *adminapi.TResolveRequest) (*adminapi.TResolveResponse, error) {
	return f.resolve, f.record("ResolveJob", r)
}

func (f *fakeMaster) CancelJob(_ context.Context, r *adminapi.TCancelRequest) (*adminapi.TJobView, error) {
	return f.job, f.record("CancelJob", r)
}

func (f *fakeMaster) CreateCatalog(_ context.Context, c *adminapi.TCatalog, actor string) (*adminapi.TCatalog, error) {
	return f.catalog, f.recordAs("CreateCatalog", c, actor)
}

func (f *fakeMaster) ListCatalogs(context.Context) ([]*adminapi.TCatalog, error) {
	return f.catalogs, f.record("ListCatalogs", nil)
}

func (f *fakeMaster) UpdateCatalog(_ context.Context, r *adminapi.TUpdateCatalogRequest) (*adminapi.TCatalog, error) {
	return f.catalog, f.record("UpdateCatalog", r)
}

func (f *fakeMaster) RemoveCatalog(_ context.Context, name, actor string) error {
	return f.recordAs("RemoveCatalog", name, actor)
}

func (f *fakeMaster) AddBackend(_ context.Context, addr, actor string) (*adminapi.TBackend, error) {
	return f.backend, f.recordAs("AddBackend", addr, actor)
}

func (f *fakeMaster) ListBackends(context.Context) ([]*adminapi.TBackend, error) {
	return f.backends, f.record("ListBackends", nil)
}

func (f *fakeMaster) InspectDataset(_ context.Context, catalog, db, table string) (*adminapi.TDatasetView, error) {
	dim, elem := int32(4), "float32"
	p := `{"metric":"l2"}`
	v := &adminapi.TDatasetView{DatasetVersion: 3,
		Fields: []*wire.TLanceField{{FieldID: 0, Name: "id", DataType: "int32"},
			{FieldID: 1, Name: "vector", DataType: "fixed_size_list", ListDimension: &dim, ElementType: &elem}},
		Indexes: []*wire.TLanceIndexInfo{{Name: "vec_idx", IndexType: "IVF_PQ", Columns: []string{"vector"}, PropertiesJSON: &p,
			IndexUUID: thrift.StringPtr("93b84c52-b470-46bd-bde2-5cc7c768a4ff"), IndexedRows: thrift.Int64Ptr(2000),
			UnindexedRows: thrift.Int64Ptr(16), Segments: thrift.Int32Ptr(1)}}}
	return v, f.record("InspectDataset", []string{catalog, db, table})
}

func (f *fakeMaster) RemoveBackend(_ context.Context, ref, actor string) error {
	return f.recordAs("RemoveBackend", ref, actor)
}

func (f *fakeMaster) GetOption(_ context.Context, key string) (*adminapi.TOption, error) {
	return f.option, f.record("GetOption", key)
}

func (f *fakeMaster) SetOption(_ context.Context, key, value, actor string) (*adminapi.TOption, error) {
	return f.option, f.recordAs("SetOption", [2]string{key, value}, actor)
}

func (f *fakeMaster) ListOptions(context.Context) ([]*adminapi.TOption, error) {
	return f.options, f.record("ListOptions", nil)
}

func (f *fakeMaster) ListPeers(context.Context) (*adminapi.TRaftPeersResponse, error) {
	return f.peers, f.record("ListPeers", nil)
}

func (f *fakeMaster) TransferLeader(_ context.Context, target, actor string) (string, error) {
	return f.leader, f.recordAs("TransferLeader", target, actor)
}

func (f *fakeMaster) ForwardApply(context.Context, []byte) ([]byte, error) {
	return nil, thrift.NewTApplicationException(thrift.UNKNOWN_METHOD, "fake")
}

// serve runs the admin API h (a fake master) on a loopback port with
// pkg/rpc's Server (framed transport, binary protocol) and returns its
// address.
func serve(t *testing.T, h adminapi.LanceMasterService) string {
	t.Helper()
	srv, err := rpc.NewServer("127.0.0.1:0", adminapi.NewLanceMasterServiceProcessor(h), rpc.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv.Addr().String()
}

// deadAddress is a loopback address nobody listens on.
func deadAddress(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// testNow is the CLI's clock in tests: 3h25m after the update time of
// testJobs' first job (2023-11-14T22:13:20Z).
var testNow = time.UnixMilli(1_700_000_000_000).Add(3*time.Hour + 25*time.Minute)

// runCLI runs the CLI in-process with env as its whole environment, at
// testNow.
func runCLI(t *testing.T, env map[string]string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	getenv := func(k string) string { return env[k] }
	code = executeAt(t.Context(), func() time.Time { return testNow }, args, &out, &errb, getenv)
	return out.String(), errb.String(), code
}

// cli runs the CLI against addr as user alice.
func cli(t *testing.T, addr string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return runCLI(t, map[string]string{"USER": "alice"}, append([]string{"--address", addr}, args...)...)
}

// mustOK returns a check, for the results of cli, that fails the test
// unless the CLI exited 0; the check returns stdout.
func mustOK(t *testing.T) func(stdout, stderr string, code int) string {
	return func(stdout, stderr string, code int) string {
		t.Helper()
		if code != exitOK {
			t.Fatalf("exit %d, stderr:\n%s\nstdout:\n%s", code, stderr, stdout)
		}
		return stdout
	}
}
