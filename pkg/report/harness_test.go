package report

import (
	"bytes"
	"context"
	"fmt"
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
	"github.com/lancemaster/lancemaster/pkg/admin"
	"github.com/lancemaster/lancemaster/pkg/cluster"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
	"github.com/lancemaster/lancemaster/pkg/raftfsm/raftfsmtest"
)

// The handler is what the admin API delegates reports to.
var _ admin.ReportHandler = (*Handler)(nil)

const (
	// testSecret is the canary: it must never show in a log line or a status.
	testSecret = "canary-secret-7f3a9c2e5b1d8f4a6c0e"
	testEpoch  = int64(42)
	testRoot   = "s3://bucket/warehouse"
)

// capturingProposer is a recording raftfsmtest.Proposer (a follower still
// applies what it is given, so a test counts proposals it should not have
// made) that can fail or hold proposals and counts those not made leader-only.
type capturingProposer struct {
	*raftfsmtest.Proposer

	mu   sync.Mutex    // held across each apply
	err  error         // when set, Propose fails with it and applies nothing
	gate chan struct{} // when set, Propose waits for it (batching tests)

	notLeaderOnly atomic.Int64 // proposals whose context was not cluster.LeaderOnly
}

// newCapturingProposer leads at term 1 over fsm.
func newCapturingProposer(fsm *raftfsm.FSM) *capturingProposer {
	return &capturingProposer{Proposer: &raftfsmtest.Proposer{FSM: fsm, Record: true, Forwards: true}}
}

// newFollowerProposer does not lead.
func newFollowerProposer(fsm *raftfsm.FSM) *capturingProposer {
	p := newCapturingProposer(fsm)
	p.SetLeader(false)
	return p
}

func (p *capturingProposer) Propose(ctx context.Context, cmd []byte) (*journal.TApplyResponse, error) {
	if p.gate != nil {
		select {
		case <-p.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if !cluster.IsLeaderOnly(ctx) {
		p.notLeaderOnly.Add(1)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return nil, p.err
	}
	return p.Proposer.Propose(ctx, cmd)
}

// count is how many entries were written so far.
func (p *capturingProposer) count() int { return int(p.Index()) }

// reportItemsSince decodes the report items of the ReportBatch entries
// written after n, in order.
func (p *capturingProposer) reportItemsSince(t *testing.T, n int) []*journal.TReportItem {
	t.Helper()
	var out []*journal.TReportItem
	for _, e := range p.Since(n) {
		if e.Type() != raftfsm.CmdReportBatch {
			continue
		}
		b := journal.NewTReportBatch()
		d := thrift.NewTDeserializer()
		d.Protocol = thrift.NewTCompactProtocolFactoryConf(nil).GetProtocol(d.Transport)
		if err := d.Read(context.Background(), b, e.Data[1:]); err != nil {
			t.Fatalf("decode a report batch: %v", err)
		}
		out = append(out, b.Reports...)
	}
	return out
}

type countingWaker struct{ n atomic.Int64 }

func (w *countingWaker) Wake() { w.n.Add(1) }

// fixture is one leader master: a real FSM behind a capturing proposer and a
// Handler whose logs are observed.
type fixture struct {
	t         *testing.T
	fsm       *raftfsm.FSM
	prop      *capturingProposer
	h         *Handler
	waker     *countingWaker
	logs      *observer.ObservedLogs
	statuses  []*wire.TStatus // every status the handler returned through the helpers
	catalogID int64
	backendID int64
	now       int64
}

func newFixture(t *testing.T, tweak ...func(*Deps)) *fixture {
	t.Helper()
	core, logs := observer.New(zapcore.DebugLevel)
	f := &fixture{t: t, fsm: raftfsm.New(zap.NewNop()), waker: &countingWaker{}, logs: logs, now: 1_000_000}
	f.prop = newCapturingProposer(f.fsm)
	f.prop.SetTerm(3)
	d := Deps{Proposer: f.prop, Reader: f.fsm, Waker: f.waker, Logger: zap.New(core),
		Clock: func() time.Time { return time.UnixMilli(f.now) }}
	for _, fn := range tweak {
		fn(&d)
	}
	f.h = New(d)
	f.catalogID = f.apply(raftfsm.CmdCreateCatalog, &journal.TCatalogCommand{NowMs: f.now,
		Catalog: &journal.TCatalogRecord{Name: "lake", RootURI: thrift.StringPtr(testRoot)}}).GetID()
	f.backendID = f.apply(raftfsm.CmdAddBackend, &journal.TBackendCommand{NowMs: f.now, Address: "10.0.0.1:9070"}).GetID()
	return f
}

// apply writes a fixture command straight to the FSM (not through the
// handler) and wants OK.
func (f *fixture) apply(ct raftfsm.CommandType, cmd thrift.TStruct) *journal.TApplyResponse {
	f.t.Helper()
	data, err := raftfsm.Encode(ct, cmd)
	if err != nil {
		f.t.Fatalf("encode: %v", err)
	}
	resp, err := f.prop.Propose(cluster.LeaderOnly(context.Background()), data) // fixtures are not counted by notLeaderOnly
	if err != nil {
		f.t.Fatalf("propose: %v", err)
	}
	if resp.Code != journal.TApplyCode_OK {
		f.t.Fatalf("fixture command %d: %v %q", ct, resp.Code, resp.GetMessage())
	}
	for _, it := range resp.Items {
		if it.Code != journal.TApplyCode_OK {
			f.t.Fatalf("fixture command %d item: %v %q", ct, it.Code, it.GetMessage())
		}
	}
	return resp
}

// admit admits a CREATE BTREE job on db.tbl and returns its id (PENDING).
func (f *fixture) admit(table string) int64 {
	f.t.Helper()
	loc, err := job.DatasetLocator(testRoot, "db", table)
	if err != nil {
		f.t.Fatal(err)
	}
	r := &job.Record{Creator: "alice", CatalogID: f.catalogID, DB: "db", Table: table,
		Provider: job.ProviderDirectory, Locator: loc, DisplayIndexName: "idx", NormalizedIndexName: "idx",
		MutationType: job.Create, IndexType: job.IndexBTree, Column: "id", PropertiesJSON: "{}",
		AdmittedDatasetVersion: 7,
		SchemaContract:         `{"v":1,"fields":[{"id":0,"name":"id","type":"int64","nullable":false}]}`}
	return f.apply(raftfsm.CmdAdmit, &journal.TAdmitCommand{NowMs: f.now, Job: raftfsm.RecordToThrift(r)}).GetID()
}

// running admits a job and dispatches it (M1) with testSecret.
func (f *fixture) running(table string) *job.Record {
	f.t.Helper()
	return f.dispatch(f.admit(table))
}

// dispatch makes the PENDING job id RUNNING (M1) with testSecret.
func (f *fixture) dispatch(id int64) *job.Record {
	f.t.Helper()
	r := f.job(id)
	f.apply(raftfsm.CmdMarkRunningBatch, &journal.TMarkRunningBatch{NowMs: f.now, Jobs: []*journal.TMarkRunning{{
		JobID: id, ExpectedRev: r.Rev, BackendID: f.backendID, ProcessEpoch: testEpoch,
		InvocationID: fmt.Sprintf("inv-%d", id), InvocationSecret: testSecret, DeadlineMs: f.now + 3_600_000, LeaderTerm: 3}}})
	return f.job(id)
}

func (f *fixture) job(id int64) *job.Record {
	f.t.Helper()
	r, ok := f.fsm.State().Job(id)
	if !ok {
		f.t.Fatalf("job %d missing", id)
	}
	return r
}

// snapshot is the whole replicated state as bytes.
func (f *fixture) snapshot() []byte {
	f.t.Helper()
	var b bytes.Buffer
	if err := f.fsm.State().WriteSnapshot(&b); err != nil {
		f.t.Fatalf("snapshot: %v", err)
	}
	return b.Bytes()
}

func (f *fixture) result(r *wire.TLanceIndexJobReport) *wire.TStatus {
	st := f.h.HandleResult(context.Background(), r)
	f.statuses = append(f.statuses, st)
	return st
}

func (f *fixture) termination(r *wire.TLanceIndexJobTerminationReport) *wire.TStatus {
	st := f.h.HandleTermination(context.Background(), r)
	f.statuses = append(f.statuses, st)
	return st
}

// validReport is what an honest backend sends for rec's dispatch.
func validReport(rec *job.Record, code job.ResultCode) *wire.TLanceIndexJobReport {
	c := wire.TLanceIndexJobResultCode(code)
	return &wire.TLanceIndexJobReport{JobID: rec.JobID, DispatchRevision: rec.DispatchRevision,
		InvocationID: rec.InvocationID, BeProcessEpoch: rec.ProcessEpoch, ResultCode: &c,
		CompletionReason:         ptr(wire.TLanceIndexCompletionReason_NONE),
		SanitizedMessage:         thrift.StringPtr("index built"),
		ExternalMetadataAdvanced: thrift.BoolPtr(false),
		InvocationSecret:         thrift.StringPtr(testSecret)}
}

func validTermination(rec *job.Record, p wire.TLanceIndexTerminationProof) *wire.TLanceIndexJobTerminationReport {
	return &wire.TLanceIndexJobTerminationReport{JobID: rec.JobID, DispatchRevision: rec.DispatchRevision,
		InvocationID: rec.InvocationID, BeProcessEpoch: rec.ProcessEpoch, Proof: p,
		InvocationSecret: thrift.StringPtr(testSecret)}
}

func ptr[T any](v T) *T { return &v }

func wantStatus(t *testing.T, st *wire.TStatus, code wire.TStatusCode) {
	t.Helper()
	if st == nil {
		t.Fatalf("status = nil, want %v", code)
	}
	if st.StatusCode != code {
		t.Fatalf("status = %v %q, want %v", st.StatusCode, st.ErrorMsgs, code)
	}
}

// wantCounts checks the named counters' values (others are not checked).
func wantCounts(t *testing.T, h *Handler, want map[string]int64) {
	t.Helper()
	got := h.Counts()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("count[%s] = %d, want %d (all: %v)", k, got[k], v, got)
		}
	}
}
