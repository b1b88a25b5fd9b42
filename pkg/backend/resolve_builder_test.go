package backend

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/backend/frame"
	"github.com/lancemaster/lancemaster/pkg/backend/supervisor"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/job/jobwire"
	"github.com/lancemaster/lancemaster/pkg/rpc"
)

// The supervisor may re-execute this test binary as its cgroup v1 placement
// helper; that must happen before any test runs.
func init() { supervisor.MaybeRunHelper() }

// realBuilder is builders/lancedb of this checkout. These tests FAIL when
// node or the builder's node_modules are missing: run `cd builders/lancedb
// && npm ci` (make setup does).
func realBuilder(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "..", "..", "builders", "lancedb")
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatal("node is not installed: install Node.js >= 20, then run make setup")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@lancedb", "lancedb")); err != nil {
		t.Fatalf("the builder's packages are not installed: run make setup (make test does it for you): %v", err)
	}
	return dir
}

// realSupervisor runs the real builder with the worker environment the
// agent uses, and LANCEDB_LOG = frame.LanceLogEnv.
func realSupervisor(t *testing.T, builder string, tune ...func(*supervisor.Config)) *supervisor.Supervisor {
	t.Helper()
	env := []string{"PATH=" + os.Getenv("PATH"), "LANCEDB_LOG=" + frame.LanceLogEnv}
	for k, v := range DefaultWorkerEnv(os.Getenv("PATH")) {
		if k != "PATH" && k != "LANCEDB_LOG" {
			env = append(env, k+"="+v)
		}
	}
	cfg := supervisor.Config{Command: []string{"node", filepath.Join(builder, "builder.js")}, Env: env,
		MemoryLimitBytes: 2 << 30, PidsLimit: 512, Isolation: "best-effort", Logger: zap.NewNop(), TempRoot: t.TempDir()}
	for _, f := range tune {
		f(&cfg)
	}
	sup, err := supervisor.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return sup
}

// builderContract is the schema contract admission computes (pkg/job),
// from a real inspect through run.
func builderContract(t *testing.T, run func(*frame.Request) Outcome, uri, column, indexType string) string {
	t.Helper()
	ins := run(&frame.Request{Protocol: 1, Mode: frame.ModeInspect, DatasetURI: uri}).Result
	resp := inspectResponse(Outcome{Result: ins}, newScrubber(nil), false)
	f, err := jobwire.Snapshot(resp).FindColumn(column)
	if err != nil {
		t.Fatal(err)
	}
	c, err := job.SchemaContract(f, indexType)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// progressOf parses every progress line of a worker's stderr.
func progressOf(stderr []byte) (uuids, phases []string) {
	sc := bufio.NewScanner(strings.NewReader(string(stderr)))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if u, p, ok := frame.ParseProgressLine(sc.Text()); ok {
			if u != "" {
				uuids = append(uuids, u)
			}
			if p != "" {
				phases = append(phases, p)
			}
		}
	}
	return uuids, phases
}

// With the real builder: a verified IVF_PQ CREATE carries its uuid and
// version in the frame (and so in the report), the uuid Lance announced on
// stderr is the committed one, a BTREE's uuid, if the builder's own line
// announces it, is the committed one, inspect reports the stats, and resolve_lance_index_job over
// Thrift answers COMMITTED / NOT_COMMITTED / UNKNOWN from the dataset.
func TestResolveWithTheRealBuilder(t *testing.T) {
	builder := realBuilder(t)
	lake := t.TempDir()
	if out, err := exec.Command("node", filepath.Join(builder, "make-dataset.js"), lake, "items", "--rows", "2000", "--dim", "16").CombinedOutput(); err != nil {
		t.Fatalf("make-dataset: %v\n%s", err, out)
	}
	uri := filepath.Join(lake, "items.lance")
	sup := realSupervisor(t, builder)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run := func(req *frame.Request) Outcome {
		t.Helper()
		out := sup.Run(ctx, req, time.Now().Add(time.Minute))
		if out.Result == nil {
			t.Fatalf("%s: no result: %s\n%s", req.Mode, out.Failure, out.Stderr)
		}
		return out
	}
	contract := func(column, indexType string) string { return builderContract(t, run, uri, column, indexType) }

	// 1. IVF_PQ CREATE at version 1 → 2: Lance's own line announces the uuid.
	out := run(&frame.Request{Protocol: 1, Mode: frame.ModeBuild, DatasetURI: uri, JobID: 1, InvocationID: "inv-1",
		MutationType: "CREATE", IndexName: "vec", ColumnName: "vector", IndexType: "IVF_PQ",
		PropertiesJSON: `{"num_bits":4,"num_partitions":2,"num_sub_vectors":2}`, AdmittedDatasetVersion: 1, SchemaContractJSON: contract("vector", "IVF_PQ")})
	r := out.Result
	if r.ResultCode != "NATIVE_OK" || r.DatasetVersion != 2 || r.NewDatasetVersion != 2 || !frame.IsUUID(r.IndexUUID) {
		t.Fatalf("IVF_PQ build: %+v", r)
	}
	uuids, phases := progressOf(out.Stderr)
	if len(uuids) != 1 || uuids[0] != r.IndexUUID {
		t.Fatalf("announced uuids %v; committed %s\n%s", uuids, r.IndexUUID, out.Stderr)
	}
	if !slices.Contains(phases, "building") || !slices.Contains(phases, "verifying") || !slices.Contains(phases, "ivf_training") {
		t.Fatalf("phases %v", phases)
	}
	rep := &wire.TLanceIndexJobReport{}
	frame.ApplyVerifiedCommit(rep, r)
	if rep.GetIndexUUID() != r.IndexUUID || rep.GetDatasetVersion() != 2 {
		t.Fatalf("report: %+v", rep)
	}
	vecUUID := r.IndexUUID

	// 2. BTREE CREATE 2 → 3: the builder's own line may announce it.
	out = run(&frame.Request{Protocol: 1, Mode: frame.ModeBuild, DatasetURI: uri, JobID: 2, InvocationID: "inv-2",
		MutationType: "CREATE", IndexName: "id_btree", ColumnName: "id", IndexType: "BTREE", AdmittedDatasetVersion: 2, SchemaContractJSON: contract("id", "BTREE")})
	if r := out.Result; r.ResultCode != "NATIVE_OK" || r.DatasetVersion != 3 || !frame.IsUUID(r.IndexUUID) {
		t.Fatalf("BTREE build: %+v", r)
	} else if uuids, _ := progressOf(out.Stderr); len(uuids) > 1 || (len(uuids) == 1 && uuids[0] != r.IndexUUID) {
		// The builder's own watch is best effort (docs/builder.md): at most
		// one uuid, and the verified one.
		t.Fatalf("announced %v; committed %s", uuids, r.IndexUUID)
	}

	// 3. Inspect: the stats reach the wire answer.
	ins := run(&frame.Request{Protocol: 1, Mode: frame.ModeInspect, DatasetURI: uri}).Result
	resp := inspectResponse(Outcome{Result: ins}, newScrubber(nil), false)
	frame.ApplyIndexStats(resp.Indexes, ins.IndexStats)
	snap := jobwire.Snapshot(resp)
	if len(snap.Indexes) != 2 {
		t.Fatalf("inspect: %+v", resp)
	}
	for _, ix := range resp.Indexes {
		if !frame.IsUUID(ix.GetIndexUUID()) || ix.GetIndexedRows() != 2000 || ix.UnindexedRows == nil || ix.GetUnindexedRows() != 0 ||
			ix.GetSegments() != 1 || ix.GetSizeBytes() <= 0 || ix.GetCreatedAtMs() <= 0 {
			t.Fatalf("index %+v", ix)
		}
		if ix.Name == "vec" && ix.GetIndexUUID() != vecUUID {
			t.Fatalf("vec uuid %s, built %s", ix.GetIndexUUID(), vecUUID)
		}
	}

	// 4. Resolve over Thrift through an agent on the real supervisor.
	cfg := testConfig(t)
	cfg.Isolation = "best-effort"
	h := startRealHarness(t, cfg, sup)
	res := func(mutation wire.TLanceIndexMutationType, name string, admitted int64, uuid string) *wire.TResolveJobResponse {
		t.Helper()
		req := &wire.TResolveJobRequest{JobID: 1, DatasetURI: uri, MutationType: mutation, IndexName: name, AdmittedDatasetVersion: admitted}
		if uuid != "" {
			req.IndexUUID = &uuid
		}
		resp, err := h.client.Resolve(ctx, h.a.Addr(), req)
		if err != nil || resp.Status.StatusCode != wire.TStatusCode_OK {
			t.Fatalf("resolve: %+v %v", resp, err)
		}
		return resp
	}
	if got := res(wire.TLanceIndexMutationType_CREATE, "vec", 1, vecUUID); got.GetOutcome() != wire.TLanceResolveOutcome_COMMITTED ||
		got.GetIndexUUID() != vecUUID || got.GetHeadVersion() != 3 || !strings.Contains(got.GetEvidence(), "version 2") {
		t.Fatalf("CREATE committed: %+v", got)
	}
	if got := res(wire.TLanceIndexMutationType_CREATE, "vec", 1, resolveOther); got.GetOutcome() != wire.TLanceResolveOutcome_NOT_COMMITTED {
		t.Fatalf("CREATE by another uuid: %+v", got)
	}
	if got := res(wire.TLanceIndexMutationType_CREATE, "vec", 1, ""); got.GetOutcome() != wire.TLanceResolveOutcome_UNKNOWN {
		t.Fatalf("CREATE without a uuid: %+v", got)
	}
	if got := res(wire.TLanceIndexMutationType_DROP, "vec", 2, ""); got.GetOutcome() != wire.TLanceResolveOutcome_NOT_COMMITTED {
		t.Fatalf("DROP of a present index: %+v", got)
	}
	// A missing dataset is a status, not an outcome.
	resp2, err := h.client.Resolve(ctx, h.a.Addr(), &wire.TResolveJobRequest{JobID: 1, DatasetURI: filepath.Join(lake, "gone.lance"),
		MutationType: wire.TLanceIndexMutationType_CREATE, IndexName: "vec", AdmittedDatasetVersion: 1})
	if err != nil || resp2.Status.StatusCode != wire.TStatusCode_NOT_FOUND || resp2.Outcome != nil {
		t.Fatalf("missing dataset: %+v %v", resp2, err)
	}
}

// startRealHarness is an agent over loopback on a real Runner.
func startRealHarness(t *testing.T, cfg Config, r Runner) *harness {
	t.Helper()
	cfg.Logger = zap.NewNop()
	a, err := New(cfg, r)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return &harness{t: t, a: a, client: rpc.NewThriftBackendClient(rpc.DefaultConfig()), cfg: cfg}
}
