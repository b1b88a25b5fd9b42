package backend

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/backend/frame"
	"github.com/lancemaster/lancemaster/pkg/backend/outbox"
	"github.com/lancemaster/lancemaster/pkg/backend/supervisor"
	"github.com/lancemaster/lancemaster/pkg/rpc"
	"github.com/lancemaster/lancemaster/pkg/testkit"
)

const (
	testSecret = "inv-secret-5d1e0c"
	testWait   = 10 * time.Second
)

// TestMain silences Thrift's default slog logger, which reports every
// connection a test closes mid-read as an error.
func TestMain(m *testing.M) {
	supervisor.MaybeRunHelper() // the real-supervisor tests may re-execute this binary (cgroup v1)
	slog.SetDefault(slog.New(slog.DiscardHandler))
	os.Exit(m.Run())
}

// fakeRunner is a scripted Runner. By default Run answers a NATIVE_OK build
// result (or an empty OK inspect) at once; hold makes builds block until
// released; script replaces the answer.
type fakeRunner struct {
	verified atomic.Bool

	mu       sync.Mutex
	runs     map[string]int // build runs per invocation id
	requests []*frame.Request
	deadline []time.Time
	script   func(ctx context.Context, req *frame.Request) Outcome
	holding  bool
	gate     chan struct{}             // closed to release held builds
	started  chan string               // invocation ids, as builds start
	onStart  func(ctx context.Context) // called as each build starts, before the hold
}

func newFakeRunner() *fakeRunner {
	r := &fakeRunner{runs: map[string]int{}, gate: make(chan struct{}), started: make(chan string, 256)}
	r.verified.Store(true)
	return r
}

func (r *fakeRunner) Verified() bool { return r.verified.Load() }

// hold makes later builds block until release (or their ctx ends).
func (r *fakeRunner) hold() { r.mu.Lock(); r.holding = true; r.mu.Unlock() }

func (r *fakeRunner) release() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.holding {
		r.holding = false
		close(r.gate)
	}
}

func (r *fakeRunner) setScript(f func(ctx context.Context, req *frame.Request) Outcome) {
	r.mu.Lock()
	r.script = f
	r.mu.Unlock()
}

func (r *fakeRunner) Run(ctx context.Context, req *frame.Request, deadline time.Time) Outcome {
	r.mu.Lock()
	r.requests = append(r.requests, req)
	r.deadline = append(r.deadline, deadline)
	if req.Mode == frame.ModeBuild {
		r.runs[req.InvocationID]++
	}
	holding, gate, script, onStart := r.holding, r.gate, r.script, r.onStart
	r.mu.Unlock()
	if req.Mode == frame.ModeBuild && onStart != nil {
		onStart(ctx)
	}
	if req.Mode == frame.ModeBuild {
		select {
		case r.started <- req.InvocationID:
		default: // nobody waits for it
		}
		if holding {
			select {
			case <-gate:
			case <-ctx.Done():
				return Outcome{Proof: ProofChildReaped, Failure: "cancelled: killed", Signal: "SIGTERM"}
			}
		}
	}
	if script != nil {
		return script(ctx, req)
	}
	if req.Mode == frame.ModeInspect {
		return Outcome{Result: &frame.Result{Protocol: 1, Mode: frame.ModeInspect, OK: true}, Proof: ProofChildReaped}
	}
	return Outcome{Proof: ProofChildReaped, Result: &frame.Result{Protocol: 1, Mode: frame.ModeBuild,
		ResultCode: "NATIVE_OK", Message: "index built", NewDatasetVersion: 7}}
}

func (r *fakeRunner) runCount(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.runs[id]
}

func (r *fakeRunner) lastRequest() (*frame.Request, time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests[len(r.requests)-1], r.deadline[len(r.deadline)-1]
}

// waitStarted waits until the build of id starts.
func (r *fakeRunner) waitStarted(t *testing.T, id string) {
	t.Helper()
	timer := time.NewTimer(testWait)
	defer timer.Stop()
	for {
		select {
		case got := <-r.started:
			if got == id {
				return
			}
		case <-timer.C:
			t.Fatalf("build %s did not start", id)
		}
	}
}

// harness is one agent over loopback with an observed logger.
type harness struct {
	t      *testing.T
	a      *Agent
	runner *fakeRunner
	logs   *observer.ObservedLogs
	client rpc.BackendClient
	cfg    Config
}

func testConfig(t *testing.T) Config {
	return Config{
		ListenAddr: "127.0.0.1:0", DataDir: t.TempDir(), Concurrency: 1, QueueSize: 2,
		Isolation: IsolationRequired, ShutdownTimeout: 5 * time.Second, FlushTimeout: 50 * time.Millisecond,
		ReportTimeout: 2 * time.Second, BackoffMin: 5 * time.Millisecond, BackoffMax: 20 * time.Millisecond,
	}
}

func newHarness(t *testing.T, mod func(*Config)) *harness {
	t.Helper()
	return startHarness(t, testConfig(t), newFakeRunner(), mod)
}

func startHarness(t *testing.T, cfg Config, runner *fakeRunner, mod func(*Config)) *harness {
	t.Helper()
	core, logs := observer.New(zap.DebugLevel)
	cfg.Logger = zap.New(core)
	if mod != nil {
		mod(&cfg)
	}
	a, err := New(cfg, runner)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := a.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	h := &harness{t: t, a: a, runner: runner, logs: logs, client: rpc.NewThriftBackendClient(rpc.DefaultConfig()), cfg: cfg}
	t.Cleanup(func() { runner.release(); a.Close() })
	return h
}

func (h *harness) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	h.t.Cleanup(cancel)
	return ctx
}

func (h *harness) heartbeat(term int64, masters ...string) *wire.THeartbeatResponse {
	h.t.Helper()
	resp, err := h.client.Heartbeat(h.ctx(), h.a.Addr(), &wire.THeartbeatRequest{MasterID: "m1", LeaderTerm: &term, MasterAddresses: masters})
	if err != nil {
		h.t.Fatalf("heartbeat: %v", err)
	}
	return resp
}

// heartbeatCluster heartbeats as a leader of cluster at term.
func (h *harness) heartbeatCluster(cluster string, term int64, masters ...string) *wire.THeartbeatResponse {
	h.t.Helper()
	resp, err := h.client.Heartbeat(h.ctx(), h.a.Addr(), &wire.THeartbeatRequest{MasterID: "m-" + cluster, LeaderTerm: &term,
		MasterAddresses: masters, ClusterID: &cluster})
	if err != nil {
		h.t.Fatalf("heartbeat: %v", err)
	}
	return resp
}

func (h *harness) submit(d *wire.TLanceIndexJobDispatch) wire.TStatusCode {
	h.t.Helper()
	st, err := h.client.Submit(h.ctx(), h.a.Addr(), d)
	if err != nil {
		h.t.Fatalf("submit: %v", err)
	}
	return st.StatusCode
}

func (h *harness) query(term, epoch int64, ids ...string) *wire.TQueryInvocationsResponse {
	h.t.Helper()
	resp, err := h.client.Query(h.ctx(), h.a.Addr(), &wire.TQueryInvocationsRequest{LeaderTerm: term, BeProcessEpoch: epoch, InvocationIds: ids})
	if err != nil {
		h.t.Fatalf("query: %v", err)
	}
	return resp
}

// state returns the query state of id at term.
func (h *harness) state(term int64, id string) *wire.TInvocationStatus {
	h.t.Helper()
	resp := h.query(term, h.a.Epoch(), id)
	if resp.Status.StatusCode != wire.TStatusCode_OK || len(resp.Invocations) != 1 {
		h.t.Fatalf("query %s: %+v", id, resp)
	}
	return resp.Invocations[0]
}

// waitState waits until id reaches want.
func (h *harness) waitState(term int64, id string, want wire.TLanceInvocationState) *wire.TInvocationStatus {
	h.t.Helper()
	var st *wire.TInvocationStatus
	eventually(h.t, func() bool { st = h.state(term, id); return st.State == want }, "invocation %s never reached %s", id, want)
	return st
}

// dispatch is a valid dispatch for h's epoch at term.
func (h *harness) dispatch(id string, term int64) *wire.TLanceIndexJobDispatch {
	secret := testSecret
	props := `{"metric":"l2","num_partitions":4}`
	return &wire.TLanceIndexJobDispatch{
		JobID: 11, DispatchRevision: 2, InvocationID: id, BeProcessEpoch: h.a.Epoch(),
		DeadlineMs:   time.Now().Add(time.Hour).UnixMilli(),
		MutationType: wire.TLanceIndexMutationType_CREATE, IndexName: "vec_idx", ColumnName: "vector", IndexType: "IVF_PQ",
		PropertiesJSON: &props, DatasetURI: "/data/db/tbl.lance", AdmittedDatasetVersion: 3, SchemaContractJSON: `{"v":1}`,
		StorageOptions: map[string]string{"region": "us-east-1"}, InvocationSecret: &secret, LeaderTerm: &term,
	}
}

// ready heartbeats at term so submits pass the first guard.
func (h *harness) ready(term int64) { h.t.Helper(); h.heartbeat(term) }

// eventually polls cond until it holds; after testWait the test fails with
// the message format and args make.
func eventually(t *testing.T, cond func() bool, format string, args ...any) {
	t.Helper()
	if !testkit.Poll(testWait, cond) {
		t.Fatalf(format, args...)
	}
}

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// fakeMaster is a master that only takes reports: answers are scripted per
// call (the last one repeats), every report received is recorded.
type fakeMaster struct {
	adminapi.LanceMasterService // nil: other methods are never called
	srv                         *rpc.Server

	mu           sync.Mutex
	answers      []wire.TStatusCode
	calls        int
	results      []*wire.TLanceIndexJobReport
	terminations []*wire.TLanceIndexJobTerminationReport
	progress     []*wire.TLanceIndexJobProgressReport
	onReport     func()
	// progressAnswer answers progress reports (OK when zero); they do not
	// consume the scripted answers.
	progressAnswer wire.TStatusCode
}

func newFakeMaster(t *testing.T, answers ...wire.TStatusCode) *fakeMaster {
	t.Helper()
	if len(answers) == 0 {
		answers = []wire.TStatusCode{wire.TStatusCode_OK}
	}
	m := &fakeMaster{answers: answers}
	srv, err := rpc.NewServer("127.0.0.1:0", adminapi.NewLanceMasterServiceProcessor(m), rpc.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(); err != nil {
		t.Fatal(err)
	}
	m.srv = srv
	t.Cleanup(func() { srv.Close() })
	return m
}

func (m *fakeMaster) Addr() string { return m.srv.Addr().String() }

func (m *fakeMaster) answer() *wire.TStatus {
	i := min(m.calls, len(m.answers)-1)
	m.calls++
	return &wire.TStatus{StatusCode: m.answers[i], ErrorMsgs: []string{fmt.Sprintf("scripted %s", m.answers[i])}}
}

func (m *fakeMaster) ReportLanceIndexJobResult_(_ context.Context, r *wire.TLanceIndexJobReport) (*wire.TStatus, error) {
	m.mu.Lock()
	hook := m.onReport
	m.results = append(m.results, r)
	st := m.answer()
	m.mu.Unlock()
	if hook != nil {
		hook()
	}
	return st, nil
}

func (m *fakeMaster) ReportLanceIndexJobTermination(_ context.Context, r *wire.TLanceIndexJobTerminationReport) (*wire.TStatus, error) {
	m.mu.Lock()
	hook := m.onReport
	m.terminations = append(m.terminations, r)
	st := m.answer()
	m.mu.Unlock()
	if hook != nil {
		hook()
	}
	return st, nil
}

func (m *fakeMaster) ReportLanceIndexJobProgress(_ context.Context, r *wire.TLanceIndexJobProgressReport) (*wire.TStatus, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.progress = append(m.progress, r)
	return &wire.TStatus{StatusCode: m.progressAnswer}, nil
}

func (m *fakeMaster) progressReports() []*wire.TLanceIndexJobProgressReport {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]*wire.TLanceIndexJobProgressReport(nil), m.progress...)
}

func (m *fakeMaster) callCount() int { m.mu.Lock(); defer m.mu.Unlock(); return m.calls }

func (m *fakeMaster) received() ([]*wire.TLanceIndexJobReport, []*wire.TLanceIndexJobTerminationReport) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]*wire.TLanceIndexJobReport(nil), m.results...), append([]*wire.TLanceIndexJobTerminationReport(nil), m.terminations...)
}

// outboxIDs lists the ids of the reports the agent's outbox holds.
func outboxIDs(t *testing.T, a *Agent) []string {
	return outboxKindIDs(t, a, outbox.KindReport)
}

// outboxKindIDs lists the ids of the entries of kind k the outbox holds.
func outboxKindIDs(t *testing.T, a *Agent, k outbox.Kind) []string {
	t.Helper()
	pending, _, err := a.outbox.Pending()
	if err != nil {
		t.Fatalf("outbox: %v", err)
	}
	var ids []string
	for _, e := range pending {
		if e.Kind == k {
			ids = append(ids, e.ID)
		}
	}
	return ids
}
