package raftfsm

import (
	"bytes"
	"cmp"
	"io"
	"reflect"
	"slices"
	"strconv"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/hashicorp/raft"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
)

// harness drives an FSM through Apply only, like raft does.
type harness struct {
	t      testing.TB
	f      *FSM
	index  uint64
	now    int64
	fatals []error
	logs   *observer.ObservedLogs
	log    [][]byte // every entry applied, for replays
}

const (
	testRoot   = "s3://bucket/warehouse"
	testSecret = "s3cr3t-0123456789abcdef"
)

func newHarness(t testing.TB) *harness {
	core, logs := observer.New(zapcore.DebugLevel)
	h := &harness{t: t, now: 1_000_000, logs: logs}
	h.f = New(zap.New(core))
	h.f.OnFatal = func(err error) { h.fatals = append(h.fatals, err) }
	return h
}

// applyRaw hands raft-like log entries to the FSM.
func (h *harness) applyRaw(data []byte) any {
	h.index++
	h.log = append(h.log, data)
	return h.f.Apply(&raft.Log{Index: h.index, Term: 1, Type: raft.LogCommand, Data: data})
}

func (h *harness) apply(ct CommandType, cmd thrift.TStruct) *journal.TApplyResponse {
	h.t.Helper()
	data, err := Encode(ct, cmd)
	if err != nil {
		h.t.Fatalf("encode %d: %v", ct, err)
	}
	// Every command of every FSM test is previewed first: the preview must
	// answer exactly what Apply then answers, and (the random walks check
	// this against a brute-force model) must leave the state it ran on
	// untouched.
	pre, perr := h.st().Preview(data)
	out := h.applyRaw(data)
	resp, ok := out.(*journal.TApplyResponse)
	if !ok || resp == nil {
		h.t.Fatalf("Apply returned %T %v, want *journal.TApplyResponse", out, out)
	}
	if perr != nil || !pre.Equals(resp) {
		h.t.Fatalf("command %d: Preview answered %v (%v), Apply %v", ct, pre, perr, resp)
	}
	if len(h.fatals) > 0 {
		h.t.Fatalf("unexpected fatal: %v", h.fatals)
	}
	return resp
}

func (h *harness) st() *State { return h.f.State() }

func (h *harness) job(id int64) *job.Record {
	h.t.Helper()
	r, ok := h.st().Job(id)
	if !ok {
		h.t.Fatalf("job %d missing", id)
	}
	return r
}

// snapshotBytes is the whole replicated state as bytes: "nothing changed"
// means these are equal. The log position (applied index) is left out: a
// refused command still advances it.
func snapshotBytes(t testing.TB, s *State) []byte {
	t.Helper()
	m := *s.m
	m.appliedIndex = 0
	s = &State{t: s.t, m: &m}
	var b bytes.Buffer
	if err := s.WriteSnapshot(&b); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	return b.Bytes()
}

// unchanged asserts a failed guard left records, options and books alone.
func (h *harness) unchanged(before *State) {
	h.t.Helper()
	if !bytes.Equal(snapshotBytes(h.t, before), snapshotBytes(h.t, h.st())) {
		h.t.Fatalf("state changed after a failed guard")
	}
	if !reflect.DeepEqual(before.Books(), h.st().Books()) {
		h.t.Fatalf("books changed after a failed guard")
	}
}

func wantCode(t testing.TB, resp *journal.TApplyResponse, code journal.TApplyCode) {
	t.Helper()
	if resp.Code != code {
		t.Fatalf("code = %v (%q), want %v", resp.Code, resp.GetMessage(), code)
	}
}

func wantItem(t testing.TB, resp *journal.TApplyResponse, code journal.TApplyCode) {
	t.Helper()
	wantCode(t, resp, journal.TApplyCode_OK)
	if len(resp.Items) != 1 {
		t.Fatalf("items = %d, want 1", len(resp.Items))
	}
	if resp.Items[0].Code != code {
		t.Fatalf("item code = %v (%q), want %v", resp.Items[0].Code, resp.Items[0].GetMessage(), code)
	}
}

// ---- fixtures -----------------------------------------------------------------

func (h *harness) createCatalog(name, root string) int64 {
	h.t.Helper()
	resp := h.apply(CmdCreateCatalog, &journal.TCatalogCommand{NowMs: h.now,
		Catalog: &journal.TCatalogRecord{Name: name, RootURI: thrift.StringPtr(root)}})
	wantCode(h.t, resp, journal.TApplyCode_OK)
	return resp.GetID()
}

func (h *harness) addBackend(addr string) int64 {
	h.t.Helper()
	resp := h.apply(CmdAddBackend, &journal.TBackendCommand{NowMs: h.now, Address: addr})
	wantCode(h.t, resp, journal.TApplyCode_OK)
	return resp.GetID()
}

func (h *harness) setOption(key, value string) {
	h.t.Helper()
	wantCode(h.t, h.apply(CmdSetOption, &journal.TSetOptionCommand{NowMs: h.now, Key: key, Value: value}), journal.TApplyCode_OK)
}

// newJob is what a leader proposes after admission for index name on
// db.table of a catalog rooted at root.
func newJob(catalogID int64, root, db, table, name string, mt job.MutationType) *job.Record {
	loc, err := job.DatasetLocator(root, db, table)
	if err != nil {
		panic(err)
	}
	r := &job.Record{
		Creator: "alice", CatalogID: catalogID, DB: db, Table: table,
		Provider: job.ProviderDirectory, Locator: loc,
		DisplayIndexName: name, NormalizedIndexName: job.NormalizeIndexName(name),
		MutationType: mt, AdmittedDatasetVersion: 7,
	}
	if mt != job.Drop {
		r.IndexType, r.Column, r.PropertiesJSON = job.IndexBTree, "id", "{}"
		r.SchemaContract = `{"v":1,"fields":[{"id":0,"name":"id","type":"int64","nullable":false}]}`
	}
	return r
}

func (h *harness) admitRecord(r *job.Record) *journal.TApplyResponse {
	h.t.Helper()
	return h.apply(CmdAdmit, &journal.TAdmitCommand{NowMs: h.now, Job: RecordToThrift(r)})
}

// admitBatch proposes records as one CmdAdmitBatch entry.
func (h *harness) admitBatch(rs ...*job.Record) *journal.TApplyResponse {
	h.t.Helper()
	c := &journal.TAdmitBatch{NowMs: h.now, Jobs: []*journal.TJobRecord{}}
	for _, r := range rs {
		c.Jobs = append(c.Jobs, RecordToThrift(r))
	}
	return h.apply(CmdAdmitBatch, c)
}

func (h *harness) admit(catalogID int64, db, table, name string) int64 {
	h.t.Helper()
	resp := h.admitRecord(newJob(catalogID, testRoot, db, table, name, job.Create))
	wantCode(h.t, resp, journal.TApplyCode_OK)
	return resp.GetID()
}

func markCmd(r *job.Record, backendID int64) *journal.TMarkRunning {
	return &journal.TMarkRunning{JobID: r.JobID, ExpectedRev: r.Rev, BackendID: backendID, ProcessEpoch: 42,
		InvocationID: "inv-" + itoa(r.JobID) + "-" + itoa(r.Rev), InvocationSecret: testSecret,
		DeadlineMs: 5_000_000 + r.JobID, LeaderTerm: 3}
}

func (h *harness) markRunning(items ...*journal.TMarkRunning) *journal.TApplyResponse {
	h.t.Helper()
	return h.apply(CmdMarkRunningBatch, &journal.TMarkRunningBatch{NowMs: h.now, Jobs: items})
}

func (h *harness) run(id, backendID int64) *job.Record {
	h.t.Helper()
	wantItem(h.t, h.markRunning(markCmd(h.job(id), backendID)), journal.TApplyCode_OK)
	return h.job(id)
}

func completion(r *job.Record, code job.ResultCode, ema bool) *journal.TCompletion {
	return &journal.TCompletion{JobID: r.JobID, DispatchRevision: r.DispatchRevision, InvocationID: r.InvocationID,
		ProcessEpoch: r.ProcessEpoch, Result_: &journal.TJobResult_{
			Code: ptr(journal.TResultCode(code)), ExternalMetadataAdvanced: thrift.BoolPtr(ema),
			Message: thrift.StringPtr("done")}}
}

func (h *harness) complete(items ...*journal.TCompletion) *journal.TApplyResponse {
	h.t.Helper()
	return h.apply(CmdCompleteBatch, &journal.TCompleteBatch{NowMs: h.now, Completions: items})
}

func proofCmd(r *job.Record, p job.TerminationProof) *journal.TProof {
	return &journal.TProof{JobID: r.JobID, DispatchRevision: r.DispatchRevision, InvocationID: r.InvocationID,
		ProcessEpoch: r.ProcessEpoch, BackendID: r.BackendID, Proof: journal.TTerminationProof(p)}
}

func (h *harness) proof(items ...*journal.TProof) *journal.TApplyResponse {
	h.t.Helper()
	return h.apply(CmdRecordProofBatch, &journal.TRecordProofBatch{NowMs: h.now, Proofs: items})
}

func (h *harness) report(items ...*journal.TReportItem) *journal.TApplyResponse {
	h.t.Helper()
	return h.apply(CmdReportBatch, &journal.TReportBatch{NowMs: h.now, Reports: items})
}

func (h *harness) refresh(id, rev int64, to job.RefreshState) *journal.TApplyResponse {
	h.t.Helper()
	return h.apply(CmdRefreshBatch, &journal.TRefreshBatch{NowMs: h.now, Transitions: []*journal.TRefreshTransition{
		{JobID: id, ExpectedRev: rev, ToState: journal.TRefreshState(to)}}})
}

func (h *harness) forceRelease(id int64, note string) *journal.TApplyResponse {
	h.t.Helper()
	return h.apply(CmdForceRelease, &journal.TForceReleaseCommand{NowMs: h.now, JobID: id, Actor: "ops",
		Note: note, Warning: "the old worker may still change the index"})
}

func (h *harness) cancel(id int64) *journal.TApplyResponse {
	h.t.Helper()
	return h.apply(CmdCancel, &journal.TCancelCommand{NowMs: h.now, JobID: id, Actor: "ops"})
}

// recomputeBooks books every record from scratch, as Restore does.
func recomputeBooks(s *State) Books {
	b := newBooks()
	all, _ := s.ListJobs(JobFilter{}, 0, 0)
	for _, r := range all {
		book(b, nil, r)
	}
	return *b
}

func ptr[T any](v T) *T { return &v }

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// writeSnapshotFrom writes a snapshot stream of the given rows with m's ids
// and options: how tests craft states Apply would never produce.
func writeSnapshotFrom(t testing.TB, w io.Writer, m *meta, cats []*Catalog, bes []*Backend, recs []*job.Record) {
	t.Helper()
	hm := *m
	hm.jobs, hm.catalogs, hm.backends = int64(len(recs)), int64(len(cats)), int64(len(bes))
	sw := newSnapshotWriter(w)
	must := func(err error) {
		if err != nil {
			t.Fatalf("write snapshot: %v", err)
		}
	}
	must(sw.frame(snapshotHeader(&hm)))
	for _, c := range cats {
		must(sw.frame(&journal.TSnapshotItem{Catalog: CatalogToThrift(c)}))
	}
	for _, b := range bes {
		must(sw.frame(&journal.TSnapshotItem{Backend: BackendToThrift(b)}))
	}
	for _, r := range recs {
		must(sw.frame(&journal.TSnapshotItem{Job: RecordToThrift(r)}))
	}
	must(sw.frame(&journal.TSnapshotItem{Last: thrift.BoolPtr(true)}))
	must(sw.flush())
}

// restoreWith restores the harness's FSM from its own state with the job
// records edited by edit.
func (h *harness) restoreWith(t testing.TB, edit func([]*job.Record) []*job.Record) {
	t.Helper()
	s := h.st()
	all, _ := s.ListJobs(JobFilter{}, 0, 0)
	recs := edit(all)
	slices.SortFunc(recs, func(a, b *job.Record) int { return cmp.Compare(a.JobID, b.JobID) })
	var buf bytes.Buffer
	writeSnapshotFrom(t, &buf, s.m, s.Catalogs(), s.Backends(), recs)
	if err := h.f.Restore(io.NopCloser(&buf)); err != nil {
		t.Fatalf("restore: %v", err)
	}
}

// equalBooks reports whether the maintained books equal a recomputation.
func equalBooks(s *State) bool { return reflect.DeepEqual(s.Books(), recomputeBooks(s)) }

func equalBooksTo(a, b Books) bool { return reflect.DeepEqual(a, b) }
