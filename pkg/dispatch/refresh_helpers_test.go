package dispatch

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/pkg/testkit"

	"github.com/apache/thrift/lib/go/thrift"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/clocktest"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
	"github.com/lancemaster/lancemaster/pkg/raftfsm/raftfsmtest"
)

// Test helpers of the refresh driver, retention GC and R4 tests. Every name
// starts with rf: other test files of this package have helpers of their own.

const rfRoot = "s3://bucket/warehouse"

// rfProposer is a recording raftfsmtest.Proposer (leading at term 1) that
// refuses a cancelled context. hook, when set, sees each proposal first: it
// may apply other entries (applyLocked) and decide whether this one is
// applied and what error Propose returns.
type rfProposer struct {
	*raftfsmtest.Proposer
	mu   sync.Mutex // serialises hooks with the applies
	hook func(p *rfProposer, typ raftfsm.CommandType) (apply bool, err error)
}

func (p *rfProposer) Propose(ctx context.Context, cmd []byte) (*journal.TApplyResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if p.hook != nil {
		apply, err := p.hook(p, raftfsm.CommandType(cmd[0]))
		var resp *journal.TApplyResponse
		if apply {
			resp = p.applyLocked(cmd)
		}
		if err != nil || !apply {
			return nil, rfFirstErr(err, errors.New("rfProposer: not applied"))
		}
		return resp, nil
	}
	return p.applyLocked(cmd), nil
}

func rfFirstErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// applyLocked applies one entry; p.mu is held.
func (p *rfProposer) applyLocked(cmd []byte) *journal.TApplyResponse {
	resp, err := p.Proposer.Propose(context.Background(), cmd)
	if err != nil {
		panic(err)
	}
	return resp
}

func (p *rfProposer) count() int { return int(p.Index()) }

// rfFixture is a real FSM behind an rfProposer, a fake clock, one backend
// and an observed logger. Fixtures are built by proposing real commands.
type rfFixture struct {
	t      *testing.T
	fsm    *raftfsm.FSM
	p      *rfProposer
	clk    *clocktest.Clock
	be     int64
	logger *zap.Logger
	logs   *observer.ObservedLogs
}

func rfNew(t *testing.T) *rfFixture {
	t.Helper()
	core, logs := observer.New(zapcore.DebugLevel)
	fsm := raftfsm.New(nil)
	fsm.OnFatal = func(err error) { t.Errorf("FSM fatal: %v", err) }
	f := &rfFixture{t: t, fsm: fsm, p: &rfProposer{Proposer: &raftfsmtest.Proposer{FSM: fsm, Record: true}},
		clk: clocktest.New(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)), logger: zap.New(core), logs: logs}
	resp := f.apply(raftfsm.CmdAddBackend, &journal.TBackendCommand{NowMs: f.nowMs(), Address: "be1:9060"})
	f.be = resp.GetID()
	return f
}

func (f *rfFixture) nowMs() int64 { return f.clk.Now().UnixMilli() }

func (f *rfFixture) st() *raftfsm.State { return f.fsm.State() }

// apply proposes a fixture command and requires an OK response (items may
// still fail: callers check them).
func (f *rfFixture) apply(ct raftfsm.CommandType, cmd thrift.TStruct) *journal.TApplyResponse {
	f.t.Helper()
	resp, err := propose(context.Background(), f.p, ct, cmd)
	if err != nil {
		f.t.Fatalf("propose %d: %v", ct, err)
	}
	if resp.Code != journal.TApplyCode_OK {
		f.t.Fatalf("propose %d: %v %s", ct, resp.Code, resp.GetMessage())
	}
	for _, it := range resp.Items {
		if it.Code != journal.TApplyCode_OK {
			f.t.Fatalf("propose %d: job %d: %v %s", ct, it.JobID, it.Code, it.GetMessage())
		}
	}
	return resp
}

func (f *rfFixture) catalog(name, kind, url string) int64 {
	f.t.Helper()
	return f.apply(raftfsm.CmdCreateCatalog, &journal.TCatalogCommand{NowMs: f.nowMs(), Catalog: &journal.TCatalogRecord{
		Name: name, RootURI: thrift.StringPtr(rfRoot), RefreshKind: thrift.StringPtr(kind), RefreshURL: thrift.StringPtr(url)}}).GetID()
}

func (f *rfFixture) setOption(key, value string) {
	f.t.Helper()
	f.apply(raftfsm.CmdSetOption, &journal.TSetOptionCommand{NowMs: f.nowMs(), Key: key, Value: value})
}

// admit admits a job (CREATE/REPLACE: a BTREE on column id) and returns its id.
func (f *rfFixture) admit(cat int64, db, table, index string, mt job.MutationType, ifExists bool) int64 {
	f.t.Helper()
	loc, err := job.DatasetLocator(rfRoot, db, table)
	if err != nil {
		f.t.Fatal(err)
	}
	r := &job.Record{Creator: "alice", CatalogID: cat, DB: db, Table: table, Provider: job.ProviderDirectory,
		Locator: loc, DisplayIndexName: index, NormalizedIndexName: job.NormalizeIndexName(index),
		MutationType: mt, IfExists: ifExists, AdmittedDatasetVersion: 7}
	if mt != job.Drop {
		r.IndexType, r.Column, r.PropertiesJSON = job.IndexBTree, "id", "{}"
		r.SchemaContract = `{"v":1,"fields":[{"id":0,"name":"id","type":"int64","nullable":false}]}`
	}
	return f.apply(raftfsm.CmdAdmit, &journal.TAdmitCommand{NowMs: f.nowMs(), Job: raftfsm.RecordToThrift(r)}).GetID()
}

func (f *rfFixture) job(id int64) *job.Record {
	f.t.Helper()
	r, ok := f.st().Job(id)
	if !ok {
		f.t.Fatalf("job %d does not exist", id)
	}
	return r
}

// finish makes PENDING jobs RUNNING (one M1 entry) and completes them with
// code (one M2 entry).
func (f *rfFixture) finish(code job.ResultCode, ema bool, ids ...int64) {
	f.t.Helper()
	marks := make([]*journal.TMarkRunning, len(ids))
	for i, id := range ids {
		r := f.job(id)
		marks[i] = &journal.TMarkRunning{JobID: id, ExpectedRev: r.Rev, BackendID: f.be, ProcessEpoch: 42,
			InvocationID: "inv-" + strconv.FormatInt(id, 10), InvocationSecret: "rf-secret",
			DeadlineMs: f.nowMs() + 3_600_000, LeaderTerm: 1}
	}
	f.apply(raftfsm.CmdMarkRunningBatch, &journal.TMarkRunningBatch{NowMs: f.nowMs(), Jobs: marks})
	comps := make([]*journal.TCompletion, len(ids))
	for i, id := range ids {
		r := f.job(id)
		comps[i] = &journal.TCompletion{JobID: id, DispatchRevision: r.DispatchRevision, InvocationID: r.InvocationID,
			ProcessEpoch: r.ProcessEpoch, Result_: &journal.TJobResult_{
				Code: rfPtr(journal.TResultCode(code)), ExternalMetadataAdvanced: thrift.BoolPtr(ema)}}
	}
	f.apply(raftfsm.CmdCompleteBatch, &journal.TCompleteBatch{NowMs: f.nowMs(), Completions: comps})
}

// committed admits a CREATE on db.table and completes it NATIVE_OK:
// COMMITTED with refresh REQUIRED.
func (f *rfFixture) committed(cat int64, table string) int64 {
	f.t.Helper()
	id := f.admit(cat, "db", table, "idx", job.Create, false)
	f.finish(job.NativeOK, false, id)
	return id
}

// refresh proposes refresh transitions of the given jobs at their current rev.
func (f *rfFixture) refresh(to job.RefreshState, ids ...int64) {
	f.t.Helper()
	trs := make([]*journal.TRefreshTransition, len(ids))
	for i, id := range ids {
		trs[i] = newRefreshTransition(id, f.job(id).Rev, to)
	}
	f.apply(raftfsm.CmdRefreshBatch, &journal.TRefreshBatch{NowMs: f.nowMs(), Transitions: trs})
}

func (f *rfFixture) proof(id int64, p job.TerminationProof) {
	f.t.Helper()
	r := f.job(id)
	f.apply(raftfsm.CmdRecordProofBatch, &journal.TRecordProofBatch{NowMs: f.nowMs(), Proofs: []*journal.TProof{{
		JobID: id, DispatchRevision: r.DispatchRevision, InvocationID: r.InvocationID,
		ProcessEpoch: r.ProcessEpoch, BackendID: r.BackendID, Proof: journal.TTerminationProof(p)}}})
}

// restoreEditing restores the FSM from its own snapshot with every job
// record passed through edit: how a test crafts a state that no sequence of
// commands produces.
func (f *rfFixture) restoreEditing(edit func(r *journal.TJobRecord)) {
	f.t.Helper()
	var snap bytes.Buffer
	if err := f.st().WriteSnapshot(&snap); err != nil {
		f.t.Fatal(err)
	}
	const magic = len("LMSNAP")
	b := snap.Bytes()
	var out bytes.Buffer
	out.Write(b[:magic])
	for pos, first := magic, true; pos < len(b); first = false {
		n := int(binary.BigEndian.Uint32(b[pos:]))
		frame := b[pos+4 : pos+4+n]
		pos += 4 + n
		if !first { // the header is kept as it is
			item := journal.NewTSnapshotItem()
			rfDecode(f.t, frame, item)
			if item.Job != nil {
				edit(item.Job)
				frame = rfEncode(f.t, item)
			}
		}
		out.Write(binary.BigEndian.AppendUint32(nil, uint32(len(frame))))
		out.Write(frame)
	}
	if err := f.fsm.Restore(io.NopCloser(&out)); err != nil {
		f.t.Fatalf("restore: %v", err)
	}
}

func rfDecode(t testing.TB, b []byte, s thrift.TStruct) {
	t.Helper()
	buf := thrift.NewTMemoryBufferLen(len(b))
	_, _ = buf.Write(b)
	if err := s.Read(context.Background(), thrift.NewTCompactProtocolConf(buf, nil)); err != nil {
		t.Fatalf("decode %T: %v", s, err)
	}
}

func rfEncode(t testing.TB, s thrift.TStruct) []byte {
	t.Helper()
	buf := thrift.NewTMemoryBuffer()
	p := thrift.NewTCompactProtocolConf(buf, nil)
	if err := s.Write(context.Background(), p); err != nil {
		t.Fatalf("encode %T: %v", s, err)
	}
	_ = p.Flush(context.Background())
	return buf.Bytes()
}

// rfRefreshBatch decodes a RefreshBatch entry.
func rfRefreshBatch(t testing.TB, e raftfsmtest.Entry) *journal.TRefreshBatch {
	t.Helper()
	if e.Type() != raftfsm.CmdRefreshBatch {
		t.Fatalf("entry type %d, want RefreshBatch (%d)", e.Type(), raftfsm.CmdRefreshBatch)
	}
	c := journal.NewTRefreshBatch()
	rfDecode(t, e.Data[1:], c)
	return c
}

// rfWantTransitions checks an entry's transitions: ids, expected revs and
// target state, in order.
func rfWantTransitions(t testing.TB, e raftfsmtest.Entry, to job.RefreshState, ids []int64, revs []int64) {
	t.Helper()
	c := rfRefreshBatch(t, e)
	if len(c.Transitions) != len(ids) {
		t.Fatalf("entry has %d transitions %v, want jobs %v", len(c.Transitions), rfTransitionIDs(c), ids)
	}
	for i, tr := range c.Transitions {
		if tr.JobID != ids[i] || tr.ExpectedRev != revs[i] || job.RefreshState(tr.ToState) != to {
			t.Fatalf("transition %d = job %d rev %d → %s, want job %d rev %d → %s",
				i, tr.JobID, tr.ExpectedRev, job.RefreshState(tr.ToState), ids[i], revs[i], to)
		}
	}
}

func rfTransitionIDs(c *journal.TRefreshBatch) []int64 {
	ids := make([]int64, len(c.Transitions))
	for i, tr := range c.Transitions {
		ids[i] = tr.JobID
	}
	return ids
}

// rfRevs returns the current revs of jobs.
func (f *rfFixture) revs(ids ...int64) []int64 {
	out := make([]int64, len(ids))
	for i, id := range ids {
		out[i] = f.job(id).Rev
	}
	return out
}

func rfPlus(revs []int64, n int64) []int64 {
	out := make([]int64, len(revs))
	for i, r := range revs {
		out[i] = r + n
	}
	return out
}

// rfRefresher records every request. fail[id] is returned for job id;
// block makes it wait for ctx; hang makes it ignore ctx until the test ends.
type rfRefresher struct {
	mu    sync.Mutex
	calls []RefreshRequest
	fail  map[int64]error
	block bool
	hang  chan struct{}
}

func (r *rfRefresher) Refresh(ctx context.Context, req RefreshRequest) error {
	r.mu.Lock()
	r.calls = append(r.calls, req)
	err, block, hang := r.fail[req.JobID], r.block, r.hang
	r.mu.Unlock()
	if hang != nil {
		<-hang
		return nil
	}
	if block {
		<-ctx.Done()
		return ctx.Err()
	}
	return err
}

func (r *rfRefresher) called() []RefreshRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]RefreshRequest(nil), r.calls...)
}

func (r *rfRefresher) calledIDs() []int64 {
	var ids []int64
	for _, c := range r.called() {
		ids = append(ids, c.JobID)
	}
	return ids
}

// driver returns a refresh driver over the fixture; every kind refreshes
// through rec unless kinds says otherwise.
func (f *rfFixture) driver(rec Refresher, tune func(d *RefreshDeps)) *RefreshDriver {
	d := RefreshDeps{Proposer: f.p, Reader: f.fsm, Clock: f.clk.Now, Logger: f.logger,
		Refreshers: Refreshers{raftfsm.RefreshNone: rec, raftfsm.RefreshWebhook: rec}}
	if tune != nil {
		tune(&d)
	}
	return NewRefreshDriver(d)
}

func rfPtr[T any](v T) *T { return &v }

// rfDeadAddress returns a loopback address nothing listens on.
func rfDeadAddress(t *testing.T) string {
	t.Helper()
	return testkit.Addr(testkit.Ports(t, 1)[0]) // reserved: nothing binds it
}
