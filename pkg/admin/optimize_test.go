package admin

import (
	"context"
	"strings"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/options"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

func optimizeReq(table string) *adminapi.TOptimizeRequest {
	return &adminapi.TOptimizeRequest{Catalog: "lake", Db: "db", Table: table}
}

func TestOptimizeAdmitsADatasetScopedJob(t *testing.T) {
	h := newHarness(t)
	h.setDataset("/data/lake/db/items.lance", 9)
	resp, err := h.srv.OptimizeDataset(context.Background(), optimizeReq("items"))
	if err != nil {
		t.Fatal(err)
	}
	rec, ok := h.fsm.State().Job(resp.GetJobID())
	if !ok {
		t.Fatalf("job %d not journaled", resp.GetJobID())
	}
	want := job.Record{JobID: rec.JobID, CatalogID: 1, DB: "db", Table: "items", Provider: job.ProviderDirectory,
		Locator: "/data/lake/db/items.lance", NormalizedIndexName: job.OptimizeFenceName, MutationType: job.Optimize,
		AdmittedDatasetVersion: 9, MutationState: job.Pending, RefreshState: job.RefreshNotRequired, Creator: "operator",
		CreateTimeMs: 1_700_000_000_000, UpdateTimeMs: 1_700_000_000_000, TerminationProof: job.ProofNone,
		AdmitIndex: h.prop.Index()} // the admission was the last entry
	if *rec != want {
		t.Fatalf("record\n got %+v\nwant %+v", rec, &want)
	}
	// The storage credentials went to the backend only.
	if seen := h.backend.StorageOptionsSeen(); len(seen) != 1 || seen[0]["aws_secret_access_key"] != canarySecret {
		t.Fatalf("inspect did not carry the credentials: %v", seen)
	}
	// The creator is the caller's when given.
	alice := "policy:optimize"
	r := optimizeReq("items")
	r.Creator = &alice
	h.setDataset("/data/lake/db/other.lance", 3)
	r.Table = "other"
	resp, err = h.srv.OptimizeDataset(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	if rec, _ := h.fsm.State().Job(resp.GetJobID()); rec.Creator != alice {
		t.Fatalf("creator %q", rec.Creator)
	}
}

func TestOptimizeAndIndexJobsFenceEachOther(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	idx, err := h.srv.CreateIndex(ctx, createReq("items", "v", "vector", "IVF_PQ"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.srv.OptimizeDataset(ctx, optimizeReq("items"))
	if errCode(t, err) != adminapi.TErrorCode_FENCE_CONFLICT || !strings.Contains(err.Error(), "job "+itoa(idx.GetJobID())) {
		t.Fatalf("OPTIMIZE over an index job: %v", err)
	}
	if _, err := h.srv.CancelJob(ctx, &adminapi.TCancelRequest{JobID: idx.GetJobID()}); err != nil {
		t.Fatal(err)
	}
	opt, err := h.srv.OptimizeDataset(ctx, optimizeReq("items"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.srv.CreateIndex(ctx, createReq("items", "w", "vector", "IVF_PQ"))
	if errCode(t, err) != adminapi.TErrorCode_FENCE_CONFLICT || !strings.Contains(err.Error(), "OPTIMIZE (job "+itoa(opt.GetJobID())+")") {
		t.Fatalf("index job over an OPTIMIZE: %v", err)
	}
	_, err = h.srv.DropIndex(ctx, &adminapi.TDropIndexRequest{Catalog: "lake", Db: "db", Table: "items", IndexName: "id_idx"})
	if errCode(t, err) != adminapi.TErrorCode_FENCE_CONFLICT {
		t.Fatalf("drop over an OPTIMIZE: %v", err)
	}
	if strings.Contains(err.Error(), "/data/lake") {
		t.Fatalf("the message shows the locator: %v", err)
	}
}

func TestOptimizeRejections(t *testing.T) {
	long := strings.Repeat("x", job.MaxNameBytes+1)
	cases := []struct {
		name  string
		setup func(h *harness)
		req   *adminapi.TOptimizeRequest
		want  adminapi.TErrorCode
	}{
		{name: "nil", req: nil, want: adminapi.TErrorCode_INVALID},
		{name: "mutation disabled", setup: func(h *harness) { h.setOption(options.OptEnableMutation, "false") },
			req: optimizeReq("items"), want: adminapi.TErrorCode_MUTATION_DISABLED},
		{name: "bad table", req: optimizeReq("a/b"), want: adminapi.TErrorCode_INVALID},
		{name: "empty db", req: &adminapi.TOptimizeRequest{Catalog: "lake", Table: "items"}, want: adminapi.TErrorCode_INVALID},
		{name: "long creator", req: &adminapi.TOptimizeRequest{Catalog: "lake", Db: "db", Table: "items", Creator: &long},
			want: adminapi.TErrorCode_INVALID},
		{name: "missing catalog", req: &adminapi.TOptimizeRequest{Catalog: "nope", Db: "db", Table: "items"}, want: adminapi.TErrorCode_NOT_FOUND},
		{name: "dataset missing", req: optimizeReq("other"), want: adminapi.TErrorCode_INSPECT_FAILED},
		{name: "no backend reachable", setup: func(h *harness) { h.backend.Close() }, req: optimizeReq("items"),
			want: adminapi.TErrorCode_UNAVAILABLE},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			if c.setup != nil {
				c.setup(h)
			}
			before := h.prop.Index()
			_, err := h.srv.OptimizeDataset(context.Background(), c.req)
			h.wantRefused(err, c.want, before)
		})
	}
}

func TestShowJobOfAnOptimizeCarriesItsResult(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	resp, err := h.srv.OptimizeDataset(ctx, optimizeReq("items"))
	if err != nil {
		t.Fatal(err)
	}
	id := resp.GetJobID()
	rec, _ := h.fsm.State().Job(id)
	propose := func(ct raftfsm.CommandType, cmd thrift.TStruct) {
		t.Helper()
		data, err := raftfsm.Encode(ct, cmd)
		if err != nil {
			t.Fatal(err)
		}
		if r, err := h.prop.Propose(ctx, data); err != nil || r.Code != journal.TApplyCode_OK || r.Items[0].Code != journal.TApplyCode_OK {
			t.Fatalf("propose %d: %v %v", ct, r, err)
		}
	}
	propose(raftfsm.CmdMarkRunningBatch, &journal.TMarkRunningBatch{NowMs: 1, Jobs: []*journal.TMarkRunning{{JobID: id,
		ExpectedRev: rec.Rev, BackendID: 1, ProcessEpoch: 1, InvocationID: "inv", InvocationSecret: "s", DeadlineMs: 9, LeaderTerm: 1}}})
	code := journal.TResultCode_NATIVE_OK
	propose(raftfsm.CmdCompleteBatch, &journal.TCompleteBatch{NowMs: 2, Completions: []*journal.TCompletion{{JobID: id,
		DispatchRevision: rec.Rev + 1, InvocationID: "inv", ProcessEpoch: 1, Result_: &journal.TJobResult_{Code: &code},
		DatasetVersion: thrift.Int64Ptr(11), OptimizedIndexes: []*journal.TOptimizedIndexRecord{{Name: "id_idx",
			Before: &journal.TIndexCountsRecord{IndexedRows: thrift.Int64Ptr(90), UnindexedRows: thrift.Int64Ptr(10)},
			After:  &journal.TIndexCountsRecord{IndexUUID: thrift.StringPtr("u2"), IndexedRows: thrift.Int64Ptr(100)}}}}}})
	v, err := h.srv.ShowJob(ctx, id, false)
	if err != nil {
		t.Fatal(err)
	}
	if v.IsSetIndexName() || v.GetMutationType() != "OPTIMIZE" || v.GetResultDatasetVersion() != 11 || v.GetMutationState() != "COMMITTED" {
		t.Fatalf("view %+v", v)
	}
	if len(v.OptimizedIndexes) != 1 || v.OptimizedIndexes[0].Name != "id_idx" || v.OptimizedIndexes[0].Before.GetUnindexedRows() != 10 ||
		v.OptimizedIndexes[0].After.GetIndexUUID() != "u2" || !v.OptimizedIndexes[0].After.IsSetUnindexedRows() {
		t.Fatalf("optimized indexes %+v", v.OptimizedIndexes)
	}
}
