package admin

import (
	"context"
	"strings"
	"testing"

	"github.com/lancemaster/lancemaster/pkg/testkit"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/options"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

func TestAdmitCreateJournalsTheAdmissionSnapshot(t *testing.T) {
	h := newHarness(t)
	resp, err := h.srv.CreateIndex(context.Background(), createReq("items", "Vec_Idx", "vector", "ivf_pq", "Metric", "COSINE", "num_partitions", "4"))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Noop || resp.GetJobID() != 1 {
		t.Fatalf("response %+v", resp)
	}
	rec, ok := h.fsm.State().Job(1)
	if !ok {
		t.Fatal("job 1 not journaled")
	}
	want := job.Record{CatalogID: 1, DB: "db", Table: "items", Provider: job.ProviderDirectory, Locator: "/data/lake/db/items.lance",
		DisplayIndexName: "Vec_Idx", NormalizedIndexName: "vec_idx", MutationType: job.Create, IndexType: job.IndexIVFPQ, Column: "vector",
		PropertiesJSON: `{"metric":"cosine","num_partitions":4}`, AdmittedDatasetVersion: 7, MutationState: job.Pending,
		RefreshState: job.RefreshNotRequired, Creator: "operator", CreateTimeMs: 1_700_000_000_000,
		AdmitIndex: h.prop.Index()} // the admission was the last entry
	got := *rec
	got.JobID, got.Rev, got.UpdateTimeMs, got.SchemaContract, got.TerminationProof = 0, 0, 0, "", 0
	if got != want {
		t.Fatalf("record\n got %+v\nwant %+v", got, want)
	}
	if !strings.Contains(rec.SchemaContract, `"dim":8`) || !strings.Contains(rec.SchemaContract, `"elem":"float32"`) {
		t.Fatalf("schema contract %s", rec.SchemaContract)
	}
	// The storage credentials reached the backend inside the request...
	seen := h.backend.StorageOptionsSeen()
	if len(seen) != 1 || seen[0]["aws_secret_access_key"] != canarySecret {
		t.Fatalf("credentials did not reach the wire: %v", seen)
	}
	// ...and nothing else: not the journal, not the logs.
	testkit.NoSecretInLogs(t, h.logs, canarySecret)
	if strings.Contains(rec.PropertiesJSON+rec.SchemaContract+rec.Locator, canarySecret) {
		t.Fatal("credential journaled")
	}
}

// Every rejection of DESIGN.md §5 returns its typed error and journals nothing.
func TestAdmissionRejections(t *testing.T) {
	long := strings.Repeat("x", job.MaxNameBytes+1)
	cases := []struct {
		name  string
		setup func(h *harness)
		req   *adminapi.TCreateIndexRequest
		drop  *adminapi.TDropIndexRequest
		want  adminapi.TErrorCode
	}{
		{name: "gate off", setup: func(h *harness) { h.setOption(options.OptEnableMutation, "false") },
			req: createReq("items", "v", "vector", "IVF_PQ"), want: adminapi.TErrorCode_MUTATION_DISABLED},
		{name: "gate off drop", setup: func(h *harness) { h.setOption(options.OptEnableMutation, "false") },
			drop: &adminapi.TDropIndexRequest{Catalog: "lake", Db: "db", Table: "items", IndexName: "id_idx"}, want: adminapi.TErrorCode_MUTATION_DISABLED},
		{name: "unknown property", req: createReq("items", "v", "vector", "IVF_PQ", "nlist", "4"), want: adminapi.TErrorCode_INVALID},
		{name: "duplicate property", req: createReq("items", "v", "vector", "IVF_PQ", "metric", "l2", "METRIC", "dot"), want: adminapi.TErrorCode_INVALID},
		{name: "partitions over bound", req: createReq("items", "v", "vector", "IVF_PQ", "num_partitions", "4097"), want: adminapi.TErrorCode_INVALID},
		{name: "partitions over lowered bound", setup: func(h *harness) { h.setOption(options.OptMaxNumPartitions, "8") },
			req: createReq("items", "v", "vector", "IVF_PQ", "num_partitions", "9"), want: adminapi.TErrorCode_INVALID},
		{name: "sub-vectors over bound", req: createReq("items", "v", "vector", "IVF_PQ", "num_sub_vectors", "257"), want: adminapi.TErrorCode_INVALID},
		{name: "btree with properties", req: createReq("items", "b", "id", "BTREE", "metric", "l2"), want: adminapi.TErrorCode_INVALID},
		{name: "unknown type", req: createReq("items", "b", "id", "HNSW"), want: adminapi.TErrorCode_INVALID},
		{name: "reserved name", req: createReq("items", "__lance_x", "id", "BTREE"), want: adminapi.TErrorCode_INVALID},
		{name: "empty name", req: createReq("items", "", "id", "BTREE"), want: adminapi.TErrorCode_INVALID},
		{name: "db with separator", req: &adminapi.TCreateIndexRequest{Catalog: "lake", Db: "a/b", Table: "items", IndexName: "i", Column: "id", IndexType: "BTREE"}, want: adminapi.TErrorCode_INVALID},
		{name: "table dot-dot", req: &adminapi.TCreateIndexRequest{Catalog: "lake", Db: "db", Table: "..", IndexName: "i", Column: "id", IndexType: "BTREE"}, want: adminapi.TErrorCode_INVALID},
		{name: "oversized index name", req: createReq("items", long, "id", "BTREE"), want: adminapi.TErrorCode_INVALID},
		{name: "oversized creator", req: func() *adminapi.TCreateIndexRequest {
			r := createReq("items", "b", "id", "BTREE")
			r.Creator = &long
			return r
		}(), want: adminapi.TErrorCode_INVALID},
		{name: "oversized property value", req: createReq("items", "v", "vector", "IVF_PQ", "metric", strings.Repeat("l", job.MaxPropertiesBytes+1)), want: adminapi.TErrorCode_INVALID},
		{name: "too many properties", req: createReq("items", "v", "vector", "IVF_PQ", strings.Split(strings.Repeat("metric,l2,", maxProperties+1), ",")...), want: adminapi.TErrorCode_INVALID},
		{name: "replace with if not exists", req: func() *adminapi.TCreateIndexRequest {
			r := createReq("items", "b", "id", "BTREE")
			yes := true
			r.Replace, r.IfNotExists = &yes, &yes
			return r
		}(), want: adminapi.TErrorCode_INVALID},
		{name: "missing catalog", req: &adminapi.TCreateIndexRequest{Catalog: "nope", Db: "db", Table: "items", IndexName: "i", Column: "id", IndexType: "BTREE"}, want: adminapi.TErrorCode_NOT_FOUND},
		{name: "create existing", req: createReq("items", "ID_IDX", "id", "BTREE"), want: adminapi.TErrorCode_ALREADY_EXISTS},
		{name: "create if not exists, other definition", req: func() *adminapi.TCreateIndexRequest {
			r := createReq("items", "id_idx", "id", "BITMAP")
			yes := true
			r.IfNotExists = &yes
			return r
		}(), want: adminapi.TErrorCode_DEFINITION_MISMATCH},
		{name: "create if not exists, other column", req: func() *adminapi.TCreateIndexRequest {
			r := createReq("items", "id_idx", "text", "BTREE")
			yes := true
			r.IfNotExists = &yes
			return r
		}(), want: adminapi.TErrorCode_DEFINITION_MISMATCH},
		{name: "drop missing", drop: &adminapi.TDropIndexRequest{Catalog: "lake", Db: "db", Table: "items", IndexName: "nope"}, want: adminapi.TErrorCode_NOT_FOUND},
		{name: "drop reserved name", drop: &adminapi.TDropIndexRequest{Catalog: "lake", Db: "db", Table: "items", IndexName: "__lance_x"}, want: adminapi.TErrorCode_INVALID},
		{name: "replace onto another column", req: func() *adminapi.TCreateIndexRequest {
			r := createReq("items", "id_idx", "text", "BTREE")
			yes := true
			r.Replace = &yes
			return r
		}(), want: adminapi.TErrorCode_INVALID},
		{name: "case-only ambiguity", setup: func(h *harness) {
			h.setDataset("/data/lake/db/items.lance", 7, job.IndexInfo{Name: "Dup", IndexType: "BTREE", Columns: []string{"id"}},
				job.IndexInfo{Name: "dup", IndexType: "BTREE", Columns: []string{"text"}})
		}, req: createReq("items", "DUP", "id", "BTREE"), want: adminapi.TErrorCode_AMBIGUOUS},
		{name: "missing column", req: createReq("items", "v", "embedding", "IVF_PQ"), want: adminapi.TErrorCode_INVALID},
		{name: "vector index on scalar", req: createReq("items", "v", "text", "IVF_PQ"), want: adminapi.TErrorCode_INVALID},
		{name: "scalar index on vector", req: createReq("items", "v", "vector", "BTREE"), want: adminapi.TErrorCode_INVALID},
		{name: "dataset missing", req: createReq("other", "v", "vector", "IVF_PQ"), want: adminapi.TErrorCode_INSPECT_FAILED},
		{name: "inspect without version", setup: func(h *harness) {
			h.backend.SetInspectResponse("/data/lake/db/items.lance", &wire.TInspectDatasetResponse{Status: &wire.TStatus{StatusCode: wire.TStatusCode_OK}})
		}, req: createReq("items", "v", "vector", "IVF_PQ"), want: adminapi.TErrorCode_INSPECT_FAILED},
		{name: "no backend reachable", setup: func(h *harness) { h.backend.Close() },
			req: createReq("items", "v", "vector", "IVF_PQ"), want: adminapi.TErrorCode_UNAVAILABLE},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			if c.setup != nil {
				c.setup(h)
			}
			before := h.prop.Index()
			var err error
			if c.drop != nil {
				_, err = h.srv.DropIndex(context.Background(), c.drop)
			} else {
				_, err = h.srv.CreateIndex(context.Background(), c.req)
			}
			h.wantRefused(err, c.want, before)
		})
	}
}

func TestIfNoopsWriteNoJob(t *testing.T) {
	h := newHarness(t)
	yes := true
	r := createReq("items", "ID_IDX", "id", "BTREE")
	r.IfNotExists = &yes
	before := h.prop.Index()
	resp, err := h.srv.CreateIndex(context.Background(), r)
	if err != nil || !resp.Noop || resp.IsSetJobID() {
		t.Fatalf("CREATE IF NOT EXISTS of a matching index: %+v %v", resp, err)
	}
	resp, err = h.srv.DropIndex(context.Background(), &adminapi.TDropIndexRequest{Catalog: "lake", Db: "db", Table: "items", IndexName: "gone", IfExists: &yes})
	if err != nil || !resp.Noop || resp.IsSetJobID() {
		t.Fatalf("DROP IF EXISTS of a missing index: %+v %v", resp, err)
	}
	if h.prop.Index() != before {
		t.Fatal("a no-op journaled an entry")
	}
	// REPLACE proceeds whether or not the index exists; DROP of an existing one too.
	r = createReq("items", "id_idx", "id", "BITMAP")
	r.Replace = &yes
	if resp, err := h.srv.CreateIndex(context.Background(), r); err != nil || resp.GetJobID() != 1 {
		t.Fatalf("REPLACE: %+v %v", resp, err)
	}
	if _, err := h.srv.DropIndex(context.Background(), &adminapi.TDropIndexRequest{Catalog: "lake", Db: "db", Table: "other_table_missing", IndexName: "x"}); errCode(t, err) != adminapi.TErrorCode_INSPECT_FAILED {
		t.Fatal("drop on a missing dataset")
	}
}

func TestFenceConflictNamesTheJobNotTheLocator(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	if _, err := h.srv.CreateIndex(ctx, createReq("items", "v", "vector", "IVF_PQ")); err != nil {
		t.Fatal(err)
	}
	before := h.prop.Index()
	_, err := h.srv.CreateIndex(ctx, createReq("items", "V", "vector", "IVF_PQ", "metric", "dot"))
	if errCode(t, err) != adminapi.TErrorCode_FENCE_CONFLICT {
		t.Fatalf("got %v", err)
	}
	ae := err.(*adminapi.TAdminError)
	if ae.GetJobID() != 1 || !strings.Contains(ae.Message, "job 1") || strings.Contains(ae.Message, "/data/lake") {
		t.Fatalf("conflict error %q (job %d)", ae.Message, ae.GetJobID())
	}
	if !strings.Contains(ae.Message, `"V"`) || !strings.Contains(ae.Message, "force-release") {
		t.Fatalf("conflict error should name the display name and how to resolve it: %q", ae.Message)
	}
	// The FSM wrote a CAS-failure response but no state change.
	if n := len(h.fsm.State().UnresolvedForFence(job.FenceKey{CatalogID: 1, Provider: job.ProviderDirectory, Locator: "/data/lake/db/items.lance", NormalizedIndexName: "v"})); n != 1 {
		t.Fatalf("fence holders %d", n)
	}
	if h.prop.Index() != before+1 { // the refused admit is one entry answering FENCE_CONFLICT
		t.Fatalf("entries +%d", h.prop.Index()-before)
	}
	// Cancelling the PENDING job frees the fence.
	if v, err := h.srv.CancelJob(ctx, &adminapi.TCancelRequest{JobID: 1}); err != nil || v.GetMutationState() != "CANCELLED" {
		t.Fatalf("cancel: %+v %v", v, err)
	}
	if resp, err := h.srv.CreateIndex(ctx, createReq("items", "V", "vector", "IVF_PQ")); err != nil || resp.GetJobID() != 2 {
		t.Fatalf("after cancel: %+v %v", resp, err)
	}
	// Cancelling twice is a no-op; cancelling a missing job is NOT_FOUND.
	if _, err := h.srv.CancelJob(ctx, &adminapi.TCancelRequest{JobID: 1}); err != nil {
		t.Fatalf("second cancel: %v", err)
	}
	if _, err := h.srv.CancelJob(ctx, &adminapi.TCancelRequest{JobID: 99}); errCode(t, err) != adminapi.TErrorCode_NOT_FOUND {
		t.Fatalf("cancel missing: %v", err)
	}
	// A job in the wrong state is the same code for cancel as for resolve
	// (a PENDING job force-released / a job that is not PENDING cancelled).
	before = h.prop.Index()
	if _, err := h.srv.ResolveJob(ctx, &adminapi.TResolveRequest{JobID: 2, ForceRelease: true, Comment: "x"}); errCode(t, err) != adminapi.TErrorCode_INVALID {
		t.Fatalf("resolve of a PENDING job: %v", err)
	}
	markRunningForTest(t, h, 2)
	if _, err := h.srv.CancelJob(ctx, &adminapi.TCancelRequest{JobID: 2}); errCode(t, err) != adminapi.TErrorCode_INVALID {
		t.Fatalf("cancel of a RUNNING job: %v", err)
	}
	if h.prop.Index() != before+1 { // only the test's own M1
		t.Fatalf("refusals journaled %d entries", h.prop.Index()-before-1)
	}
}

func TestQuotaLevels(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		opt    string
		tables []string // each admission's table; the last one must be refused
	}{
		{options.OptMaxUnresolvedPerTable, []string{"items", "items"}},
		{options.OptMaxUnresolvedPerCatalog, []string{"items", "t2"}},
		{options.OptMaxUnresolvedGlobal, []string{"items", "t2"}},
	}
	for _, c := range cases {
		t.Run(c.opt, func(t *testing.T) {
			h := newHarness(t)
			h.setDataset("/data/lake/db/t2.lance", 1)
			h.setOption(c.opt, "1")
			if _, err := h.srv.CreateIndex(ctx, createReq(c.tables[0], "a", "id", "BTREE")); err != nil {
				t.Fatal(err)
			}
			_, err := h.srv.CreateIndex(ctx, createReq(c.tables[1], "b", "id", "BTREE"))
			if errCode(t, err) != adminapi.TErrorCode_QUOTA_EXCEEDED {
				t.Fatalf("got %v", err)
			}
			if _, ok := h.fsm.State().Job(2); ok {
				t.Fatal("refused admission allocated a job")
			}
		})
	}
}

func TestCatalogGuard(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	if _, err := h.srv.CreateIndex(ctx, createReq("items", "v", "vector", "IVF_PQ")); err != nil {
		t.Fatal(err)
	}
	if err := h.srv.RemoveCatalog(ctx, "lake", ""); errCode(t, err) != adminapi.TErrorCode_CATALOG_IN_USE {
		t.Fatalf("remove: %v", err)
	}
	root := "/elsewhere"
	if _, err := h.srv.UpdateCatalog(ctx, &adminapi.TUpdateCatalogRequest{Name: "lake", RootURI: &root}); errCode(t, err) != adminapi.TErrorCode_CATALOG_IN_USE {
		t.Fatalf("change root: %v", err)
	}
	creds := "rotated"
	c, err := h.srv.UpdateCatalog(ctx, &adminapi.TUpdateCatalogRequest{Name: "lake", CredentialsRef: &creds})
	if err != nil || c.GetCredentialsRef() != "rotated" || c.GetRootURI() != "/data/lake" {
		t.Fatalf("rotate credentials: %+v %v", c, err)
	}
	if _, err := h.srv.CancelJob(ctx, &adminapi.TCancelRequest{JobID: 1}); err != nil {
		t.Fatal(err)
	}
	if err := h.srv.RemoveCatalog(ctx, "lake", ""); err != nil {
		t.Fatalf("remove once resolved: %v", err)
	}
	// Bad catalog input.
	bad := []*adminapi.TCatalog{
		{Name: "x"}, // no root
		{Name: "x", RootURI: strp("relative")},
		{Name: "x", RootURI: strp("s3://user:pw@bucket/p")},
		{Name: "x", RootURI: strp("/r"), Provider: strp("GLUE")},
		{Name: "x", RootURI: strp("/r"), CredentialsRef: strp("../etc/passwd")},
		{Name: "x", RootURI: strp("/r"), RefreshKind: strp("webhook")},
		{Name: "x", RootURI: strp("/r"), RefreshKind: strp("webhook"), RefreshURL: strp("ftp://h/")},
		{Name: "x", RootURI: strp("/r"), RefreshKind: strp("webhook"), RefreshURL: strp("http://u:p@h/")},
		{Name: "a/b", RootURI: strp("/r")},
	}
	before := h.prop.Index()
	for _, c := range bad {
		if _, err := h.srv.CreateCatalog(ctx, c, ""); errCode(t, err) != adminapi.TErrorCode_INVALID {
			t.Errorf("catalog %+v: %v", c, err)
		}
	}
	if h.prop.Index() != before {
		t.Fatal("a rejected catalog journaled an entry")
	}
	if _, err := h.srv.CreateCatalog(ctx, &adminapi.TCatalog{Name: "LAKE2", RootURI: strp("/r")}, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := h.srv.CreateCatalog(ctx, &adminapi.TCatalog{Name: "lake2", RootURI: strp("/r")}, ""); errCode(t, err) != adminapi.TErrorCode_ALREADY_EXISTS {
		t.Fatalf("case-insensitive duplicate: %v", err)
	}
}

func strp(s string) *string { return &s }

// driveToUnknown dispatches job id and gives it up with NO_TRUSTED_RESULT, as
// the dispatcher's deadline sweep would.
func driveToUnknown(t *testing.T, h *harness, id int64) {
	t.Helper()
	ctx := context.Background()
	rec, _ := h.fsm.State().Job(id)
	b := h.fsm.State().Backends()[0]
	cmd, _ := raftfsm.Encode(raftfsm.CmdMarkRunningBatch, &journal.TMarkRunningBatch{NowMs: 1, Jobs: []*journal.TMarkRunning{{
		JobID: id, ExpectedRev: rec.Rev, BackendID: b.ID, ProcessEpoch: 5, InvocationID: "inv-1", InvocationSecret: "s", DeadlineMs: 10, LeaderTerm: 1}}})
	if _, err := h.prop.Propose(ctx, cmd); err != nil {
		t.Fatal(err)
	}
	rec, _ = h.fsm.State().Job(id)
	code := journal.TResultCode_NO_TRUSTED_RESULT
	cmd, _ = raftfsm.Encode(raftfsm.CmdCompleteBatch, &journal.TCompleteBatch{NowMs: 2, Completions: []*journal.TCompletion{{
		JobID: id, DispatchRevision: rec.DispatchRevision, InvocationID: "inv-1", ProcessEpoch: 5, Result_: &journal.TJobResult_{Code: &code}}}})
	if _, err := h.prop.Propose(ctx, cmd); err != nil {
		t.Fatal(err)
	}
	if rec, _ = h.fsm.State().Job(id); rec.MutationState != job.Unknown {
		t.Fatalf("job %d is %s", id, rec.MutationState)
	}
}

func TestForceRelease(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	if _, err := h.srv.CreateIndex(ctx, createReq("items", "v", "vector", "IVF_PQ")); err != nil {
		t.Fatal(err)
	}
	bad := []*adminapi.TResolveRequest{
		{JobID: 1, ForceRelease: true, Comment: "ok"},                                    // PENDING, not UNKNOWN
		{JobID: 1, ForceRelease: false, Comment: "ok"},                                   // no --force-release
		{JobID: 1, ForceRelease: true, Comment: "  "},                                    // no comment
		{JobID: 1, ForceRelease: true, Comment: strings.Repeat("c", job.MaxNoteBytes+1)}, // oversized
	}
	for _, r := range bad {
		if _, err := h.srv.ResolveJob(ctx, r); errCode(t, err) != adminapi.TErrorCode_INVALID {
			t.Errorf("resolve %+v: %v", r, err)
		}
	}
	if _, err := h.srv.ResolveJob(ctx, &adminapi.TResolveRequest{JobID: 42, ForceRelease: true, Comment: "x"}); errCode(t, err) != adminapi.TErrorCode_NOT_FOUND {
		t.Fatal(err)
	}
	driveToUnknown(t, h, 1)
	if h.fsm.State().HeldSlots(1) != 1 {
		t.Fatal("UNKNOWN job should hold its slot")
	}
	actor := "alice"
	resp, err := h.srv.ResolveJob(ctx, &adminapi.TResolveRequest{JobID: 1, ForceRelease: true, Comment: "worker host wiped", Actor: &actor})
	if err != nil || resp.AlreadyReleased || !resp.Job.GetForceReleased() || resp.Job.GetForceActor() != "alice" ||
		resp.Job.GetForceNote() != "worker host wiped" || resp.Job.GetMutationState() != "UNKNOWN" || resp.Job.GetForceWarning() == "" {
		t.Fatalf("resolve: %+v %v", resp, err)
	}
	if h.fsm.State().HeldSlots(1) != 0 || len(h.fsm.State().UnresolvedForFence(job.FenceKey{CatalogID: 1, Provider: job.ProviderDirectory, Locator: "/data/lake/db/items.lance", NormalizedIndexName: "v"})) != 0 {
		t.Fatal("force-release did not release slot and fence")
	}
	before := h.prop.Index()
	resp, err = h.srv.ResolveJob(ctx, &adminapi.TResolveRequest{JobID: 1, ForceRelease: true, Comment: "again"})
	if err != nil || !resp.AlreadyReleased || h.prop.Index() != before {
		t.Fatalf("retry: %+v %v (entries +%d)", resp, err, h.prop.Index()-before)
	}
}

// IF NOT EXISTS compares only the parameters the backend can read back:
// Lance does not report num_partitions, so naming it must not make a
// matching index look different.
func TestIfNotExistsIgnoresUnreportedParameters(t *testing.T) {
	h := newHarness(t)
	h.setDataset("/data/lake/db/items.lance", 7, job.IndexInfo{Name: "vec", IndexType: "IVF_PQ", Columns: []string{"vector"},
		PropertiesJSON: `{"metric":"l2","num_bits":8,"num_sub_vectors":2}`})
	yes := true
	r := createReq("items", "vec", "vector", "IVF_PQ", "metric", "l2", "num_partitions", "64", "num_sub_vectors", "2")
	r.IfNotExists = &yes
	if resp, err := h.srv.CreateIndex(context.Background(), r); err != nil || !resp.Noop {
		t.Fatalf("matching index with an unreported parameter: %+v %v", resp, err)
	}
	r = createReq("items", "vec", "vector", "IVF_PQ", "metric", "cosine")
	r.IfNotExists = &yes
	if _, err := h.srv.CreateIndex(context.Background(), r); errCode(t, err) != adminapi.TErrorCode_DEFINITION_MISMATCH {
		t.Fatalf("a reported parameter that differs: %v", err)
	}
}

// markRunningForTest dispatches job id as the leader's M1 would.
func markRunningForTest(t *testing.T, h *harness, id int64) {
	t.Helper()
	rec, _ := h.fsm.State().Job(id)
	b := h.fsm.State().Backends()[0]
	cmd, _ := raftfsm.Encode(raftfsm.CmdMarkRunningBatch, &journal.TMarkRunningBatch{NowMs: 1, Jobs: []*journal.TMarkRunning{{
		JobID: id, ExpectedRev: rec.Rev, BackendID: b.ID, ProcessEpoch: 5, InvocationID: "inv-c", InvocationSecret: "s", DeadlineMs: 10, LeaderTerm: 1}}})
	if _, err := h.prop.Propose(context.Background(), cmd); err != nil {
		t.Fatal(err)
	}
	if rec, _ := h.fsm.State().Job(id); rec.MutationState != job.Running {
		t.Fatalf("job %d is %s after M1", id, rec.MutationState)
	}
}
