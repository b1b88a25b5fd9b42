package dispatch

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/clocktest"
	"github.com/lancemaster/lancemaster/pkg/config"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
	"github.com/lancemaster/lancemaster/pkg/raftfsm/raftfsmtest"
	"github.com/lancemaster/lancemaster/pkg/rpc"
)

const (
	testTerm = 7
	// canarySecret is a storage credential: it must reach the wire and
	// nothing else (no entry, snapshot or log line).
	canarySecret = "CANARY-9d2e41-storage-secret"
	credsRef     = "lake-creds"
	// oldSecret is the invocation secret of jobs env.markRunning dispatches.
	oldSecret = "old-secret"
	testRoot  = "s3://bucket/warehouse"
)

// ---- term ----------------------------------------------------------------------------

type termKey struct{}

func withTerm(ctx context.Context, term uint64) context.Context {
	return context.WithValue(ctx, termKey{}, term)
}

// termFromContext plays cluster.LeaderTermFromContext.
func termFromContext(ctx context.Context) (uint64, bool) {
	t, ok := ctx.Value(termKey{}).(uint64)
	return t, ok
}

// ---- the proposer seam --------------------------------------------------------------

// capturingProposer is a recording raftfsmtest.Proposer that refuses a
// cancelled context and may rewrite or fail a proposal.
type capturingProposer struct {
	*raftfsmtest.Proposer
	mu sync.Mutex // serialises rewrite and fault with the apply
	// rewrite, when set, may change an entry before it is applied (a CAS
	// lost to a concurrent change).
	rewrite func(cmd []byte) []byte
	// fault, when set, may fail a proposal: before the entry is applied
	// (apply false) or after it (a fate-unknown error, like a timeout).
	fault func(cmd []byte) (apply bool, err error)
}

func (p *capturingProposer) Propose(ctx context.Context, cmd []byte) (*journal.TApplyResponse, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !p.IsLeader() {
		return nil, raftfsm.ErrNotLeader
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rewrite != nil {
		cmd = p.rewrite(cmd)
	}
	var fault error
	if p.fault != nil {
		apply, err := p.fault(cmd)
		if !apply {
			return nil, err
		}
		fault = err
	}
	resp, err := p.Proposer.Propose(ctx, cmd)
	if err != nil {
		return nil, err
	}
	if fault != nil {
		return nil, fault
	}
	return resp, nil
}

func (p *capturingProposer) count() int { return int(p.Index()) }

// since returns the entries committed after the first n.
func (p *capturingProposer) since(n int) [][]byte {
	var out [][]byte
	for _, e := range p.Since(n) {
		out = append(out, e.Data)
	}
	return out
}

func decodeEntry[T thrift.TStruct](t testing.TB, entry []byte, into T) T {
	t.Helper()
	buf := thrift.NewTMemoryBufferLen(len(entry))
	buf.Buffer.Write(entry[1:])
	if err := into.Read(context.Background(), thrift.NewTCompactProtocolConf(buf, &thrift.TConfiguration{})); err != nil {
		t.Fatalf("decode entry type %d: %v", entry[0], err)
	}
	return into
}

// ---- the refresh seam ------------------------------------------------------------------

// fakeRefresh records when the round called it: the number of entries
// committed at that moment.
type fakeRefresh struct {
	p     *capturingProposer
	mu    sync.Mutex
	calls []int
}

func (r *fakeRefresh) Step(context.Context) error {
	n := r.p.count()
	r.mu.Lock()
	r.calls = append(r.calls, n)
	r.mu.Unlock()
	return nil
}

func (r *fakeRefresh) called() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int(nil), r.calls...)
}

// ---- the environment ----------------------------------------------------------------------

type env struct {
	t         *testing.T
	ctx       context.Context
	fsm       *raftfsm.FSM
	prop      *capturingProposer
	be        *fakeBackends
	clock     *clocktest.Clock
	waker     *Waker
	pool      *Pool
	d         *Dispatcher
	refresh   *fakeRefresh
	logs      *observer.ObservedLogs
	catalogID int64
	poolGen   uint64
	invSeq    atomic.Int64
}

// newEnv builds a dispatcher over a real FSM with one catalog (credentials
// carrying the canary) and a pool whose term-7 run has started (no pass yet).
func newEnv(t *testing.T, tweak ...func(*Deps)) *env {
	t.Helper()
	return newEnvWithClient(t, nil, tweak...)
}

// newEnvWithClient is newEnv with another BackendClient for the pool and the
// dispatcher (nil: the in-process fake, e.be).
func newEnvWithClient(t *testing.T, client rpc.BackendClient, tweak ...func(*Deps)) *env {
	t.Helper()
	core, logs := observer.New(zapcore.DebugLevel)
	logger := zap.New(core)
	e := &env{t: t, logs: logs, clock: clocktest.New(clocktest.Epoch), be: newFakeBackends(), waker: NewWaker()}
	ctx, cancel := context.WithCancel(withTerm(context.Background(), testTerm))
	t.Cleanup(cancel)
	e.ctx = ctx
	e.fsm = raftfsm.New(logger)
	e.fsm.OnFatal = func(err error) { t.Errorf("FSM fatal: %v", err) }
	e.prop = &capturingProposer{Proposer: &raftfsmtest.Proposer{FSM: e.fsm, Record: true}}
	e.prop.SetTerm(testTerm)
	e.refresh = &fakeRefresh{p: e.prop}
	if client == nil {
		client = e.be
	}
	e.pool = NewPool(PoolDeps{Reader: e.fsm, Backends: client, Clock: e.clock.Now, Term: termFromContext, Waker: e.waker,
		Logger: logger, MasterID: "m1", MasterAddresses: func() []string { return []string{"10.0.0.1:9020", "10.0.0.2:9020"} }})
	deps := Deps{
		Proposer: e.prop, Reader: e.fsm, Backends: client,
		Credentials: config.StaticCredentials{credsRef: {"aws_secret_access_key": canarySecret, "region": "eu-1"}},
		Pool:        e.pool, Refresh: e.refresh, Clock: e.clock.Now, Term: termFromContext,
		Invocations: func() (Invocation, error) {
			n := e.invSeq.Add(1)
			return Invocation{ID: fmt.Sprintf("inv-%d", n), Secret: fmt.Sprintf("invocation-secret-%d", n)}, nil
		},
		Waker: e.waker, Logger: logger,
	}
	for _, fn := range tweak {
		fn(&deps)
	}
	e.d = New(deps)
	e.catalogID = e.createCatalog("lake", testRoot)
	e.poolGen = e.pool.beginTerm(testTerm)
	return e
}

func (e *env) propose(ct raftfsm.CommandType, cmd thrift.TStruct) *journal.TApplyResponse {
	e.t.Helper()
	resp, err := propose(context.Background(), e.prop, ct, cmd)
	if err != nil {
		e.t.Fatalf("propose %d: %v", ct, err)
	}
	return resp
}

func (e *env) nowMs() int64 { return e.clock.Now().UnixMilli() }

func (e *env) createCatalog(name, root string) int64 {
	e.t.Helper()
	resp := e.propose(raftfsm.CmdCreateCatalog, &journal.TCatalogCommand{NowMs: e.nowMs(),
		Catalog: &journal.TCatalogRecord{Name: name, RootURI: thrift.StringPtr(root), CredentialsRef: thrift.StringPtr(credsRef)}})
	if resp.Code != journal.TApplyCode_OK {
		e.t.Fatalf("create catalog: %v %s", resp.Code, resp.GetMessage())
	}
	return resp.GetID()
}

// addBackend registers a backend whose heartbeats answer epoch (0: they fail).
func (e *env) addBackend(addr string, epoch int64) int64 {
	e.t.Helper()
	resp := e.propose(raftfsm.CmdAddBackend, &journal.TBackendCommand{NowMs: e.nowMs(), Address: addr})
	if resp.Code != journal.TApplyCode_OK {
		e.t.Fatalf("add backend: %v %s", resp.Code, resp.GetMessage())
	}
	e.be.setEpoch(addr, epoch)
	return resp.GetID()
}

func (e *env) setOption(key, value string) {
	e.t.Helper()
	resp := e.propose(raftfsm.CmdSetOption, &journal.TSetOptionCommand{NowMs: e.nowMs(), Key: key, Value: value})
	if resp.Code != journal.TApplyCode_OK {
		e.t.Fatalf("set option %s: %v %s", key, resp.Code, resp.GetMessage())
	}
}

// admitIn admits a CREATE BTREE job on db.<table> of a catalog.
func (e *env) admitIn(catalogID int64, root, table string) int64 {
	e.t.Helper()
	return e.admitWith(catalogID, root, table, nil)
}

// admitWith is admitIn with the record changed by edit (nil: as admitIn)
// before it is journaled.
func (e *env) admitWith(catalogID int64, root, table string, edit func(*job.Record)) int64 {
	e.t.Helper()
	loc, err := job.DatasetLocator(root, "db", table)
	if err != nil {
		e.t.Fatal(err)
	}
	r := &job.Record{Creator: "alice", CatalogID: catalogID, DB: "db", Table: table,
		Provider: job.ProviderDirectory, Locator: loc, DisplayIndexName: "Idx_" + table,
		NormalizedIndexName: job.NormalizeIndexName("Idx_" + table), MutationType: job.Create,
		AdmittedDatasetVersion: 7, IndexType: job.IndexBTree, Column: "id", PropertiesJSON: "{}",
		SchemaContract: `{"v":1,"fields":[{"id":0,"name":"id","type":"int64","nullable":false}]}`}
	if edit != nil {
		edit(r)
	}
	resp := e.propose(raftfsm.CmdAdmit, &journal.TAdmitCommand{NowMs: e.nowMs(), Job: raftfsm.RecordToThrift(r)})
	if resp.Code != journal.TApplyCode_OK {
		e.t.Fatalf("admit: %v %s", resp.Code, resp.GetMessage())
	}
	return resp.GetID()
}

// admit admits n jobs on the default catalog, each on its own table.
func (e *env) admit(n int) []int64 {
	e.t.Helper()
	var ids []int64
	for range n {
		ids = append(ids, e.admitIn(e.catalogID, testRoot, fmt.Sprintf("t%d", e.fsm.State().LastJobID()+1)))
	}
	return ids
}

// markRunning makes a PENDING job RUNNING as some leader of term did,
// outside the dispatcher, and returns the record.
func (e *env) markRunning(id, backendID, epoch, deadlineMs int64, term int64) *job.Record {
	e.t.Helper()
	r := e.job(id)
	inv := fmt.Sprintf("old-inv-%d", id)
	resp := e.propose(raftfsm.CmdMarkRunningBatch, &journal.TMarkRunningBatch{NowMs: e.nowMs(), Jobs: []*journal.TMarkRunning{{
		JobID: id, ExpectedRev: r.Rev, BackendID: backendID, ProcessEpoch: epoch, InvocationID: inv,
		InvocationSecret: oldSecret, DeadlineMs: deadlineMs, LeaderTerm: term}}})
	if resp.Items[0].Code != journal.TApplyCode_OK {
		e.t.Fatalf("mark running %d: %v", id, resp.Items[0].GetMessage())
	}
	return e.job(id)
}

// report journals what a backend's report of the job's current dispatch
// would: P CHILD_REAPED (the slot is released) and M2 with code.
func (e *env) report(id int64, code job.ResultCode) {
	e.t.Helper()
	r := e.job(id)
	ident := recordIdentity(r)
	if resp := e.propose(raftfsm.CmdRecordProofBatch, &journal.TRecordProofBatch{NowMs: e.nowMs(),
		Proofs: []*journal.TProof{ident.proof(r.BackendID, job.ProofChildReaped)}}); resp.Items[0].Code != journal.TApplyCode_OK {
		e.t.Fatalf("proof for job %d: %v %s", id, resp.Items[0].Code, resp.Items[0].GetMessage())
	}
	if resp := e.propose(raftfsm.CmdCompleteBatch, &journal.TCompleteBatch{NowMs: e.nowMs(),
		Completions: []*journal.TCompletion{ident.completion(code, "reported", false)}}); resp.Items[0].Code != journal.TApplyCode_OK {
		e.t.Fatalf("result for job %d: %v %s", id, resp.Items[0].Code, resp.Items[0].GetMessage())
	}
}

// roundWithin runs one round (not waiting for its sends) and fails the
// test if it does not return within a bounded time: a round must never
// wait for a backend.
func (e *env) roundWithin() {
	e.t.Helper()
	done := make(chan error, 1)
	go func() { done <- e.d.RunRound(e.ctx) }()
	select {
	case err := <-done:
		if err != nil {
			e.t.Fatalf("round: %v", err)
		}
	case <-time.After(5 * time.Second):
		e.t.Fatal("the round is held by a backend")
	}
}

// hang makes an address's submits block until the call's context ends or
// the returned release is called (also at cleanup); the others answer OK.
// started receives the job id of every hung submit.
func (e *env) hang(addr string, other func(addr string, d *wire.TLanceIndexJobDispatch) (*wire.TStatus, error)) (started chan int64, release func()) {
	started = make(chan int64, 64)
	gate := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(gate) }) }
	e.t.Cleanup(func() { release(); e.d.Wait() })
	e.be.setSubmitCtx(func(ctx context.Context, a string, d *wire.TLanceIndexJobDispatch) (*wire.TStatus, error) {
		if a != addr {
			if other != nil {
				return other(a, d)
			}
			return &wire.TStatus{StatusCode: wire.TStatusCode_OK}, nil
		}
		started <- d.JobID
		select {
		case <-gate:
			return &wire.TStatus{StatusCode: wire.TStatusCode_OK}, nil
		case <-ctx.Done():
			return nil, bytesLeftErr(a)
		}
	})
	return started, release
}

func (e *env) job(id int64) *job.Record {
	e.t.Helper()
	r, ok := e.fsm.State().Job(id)
	if !ok {
		e.t.Fatalf("job %d missing", id)
	}
	return r
}

// heartbeat runs one pool pass of the current run.
func (e *env) heartbeat() { e.pool.heartbeatPass(e.ctx, e.poolGen, testTerm) }

// round runs one round and waits for the sends and resolves it started
// (and their journal writes) to return.
func (e *env) round() {
	e.t.Helper()
	e.roundNoWait()
	e.d.Wait()
}

// roundNoWait runs one round; its sends and resolves may still be in flight.
func (e *env) roundNoWait() {
	e.t.Helper()
	if err := e.d.RunRound(e.ctx); err != nil {
		e.t.Fatalf("round: %v", err)
	}
}

func (e *env) wantState(id int64, want job.MutationState) *job.Record {
	e.t.Helper()
	r := e.job(id)
	if r.MutationState != want {
		e.t.Fatalf("job %d is %s, want %s (result %s %q)", id, r.MutationState, want, r.Result.Code, r.Result.Message)
	}
	return r
}

func wantTypes(t *testing.T, got []raftfsm.CommandType, want ...raftfsm.CommandType) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("journaled entry types %v, want %v", got, want)
	}
}

// logText is every log line with its fields, for searching.
func (e *env) logText() string {
	var b strings.Builder
	for _, l := range e.logs.All() {
		fmt.Fprintf(&b, "%s %v\n", l.Message, l.ContextMap())
	}
	return b.String()
}

func (e *env) snapshot() []byte {
	e.t.Helper()
	var b bytes.Buffer
	if err := e.fsm.State().WriteSnapshot(&b); err != nil {
		e.t.Fatal(err)
	}
	return b.Bytes()
}

// restoreHeld replaces the FSM's state with itself as an operator restore
// from a file nothing vouches for installs it (raftfsm.PrepareRestore with
// no current journal): every PENDING, RUNNING or RESOLVING job held. It
// returns how many were held.
func (e *env) restoreHeld() int {
	e.t.Helper()
	prepared, ev, err := raftfsm.PrepareRestore(e.fsm.State(), nil, e.nowMs())
	if err != nil {
		e.t.Fatal(err)
	}
	var b bytes.Buffer
	if err := prepared.WriteSnapshot(&b); err != nil {
		e.t.Fatal(err)
	}
	if err := e.fsm.Restore(io.NopCloser(&b)); err != nil {
		e.t.Fatal(err)
	}
	return len(ev.Held)
}
