package master_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/pkg/config"
	"github.com/lancemaster/lancemaster/pkg/master"
	"github.com/lancemaster/lancemaster/pkg/master/mastertest"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/pkg/backend"
	"github.com/lancemaster/lancemaster/pkg/backend/supervisor"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/options"
)

func TestMain(m *testing.M) {
	supervisor.MaybeRunHelper() // the supervisor may re-execute this binary (cgroup v1 placement)
	os.Exit(m.Run())
}

// builderDir is builders/lancedb of this checkout.
func builderDir(t *testing.T) string {
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "..", "..", "builders", "lancedb")
	// A real-builder test fails, never skips, when its prerequisite is
	// missing: `make test` installs the builder first (make setup).
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatal("node is not installed: install Node.js >= 20, then run make setup")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@lancedb", "lancedb")); err != nil {
		t.Fatal("the builder's packages are not installed: run make setup (make test does it for you)")
	}
	return dir
}

// startAgent runs a real backend agent in this process: the supervisor runs
// the real Node builder in isolated one-shot workers.
func startAgent(t *testing.T, c *mastertest.Cluster, builder string) string {
	t.Helper()
	return startAgentWith(t, c, builder, nil)
}

// startAgentWith is startAgent with the agent's config tweaked.
func startAgentWith(t *testing.T, c *mastertest.Cluster, builder string, tweak func(*backend.Config)) string {
	t.Helper()
	env := []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range backend.DefaultWorkerEnv(os.Getenv("PATH")) {
		if k != "PATH" {
			env = append(env, k+"="+v)
		}
	}
	sup, err := supervisor.New(supervisor.Config{Command: []string{"node", filepath.Join(builder, "builder.js")}, Env: env,
		MemoryLimitBytes: 2 << 30, PidsLimit: 512, Isolation: "best-effort", Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	cfg := backend.Config{ListenAddr: "127.0.0.1:0", DataDir: t.TempDir(), Masters: config.RPCAddresses(c.Nodes[0].Peers),
		Concurrency: 2, QueueSize: 16, Isolation: "best-effort",
		Logger: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))}
	if tweak != nil {
		tweak(&cfg)
	}
	a, err := backend.New(cfg, sup)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a.Addr()
}

// End to end with the real builder on a small dataset: BTREE and IVF_PQ
// CREATE reach COMMITTED/DONE; CREATE of an existing name is an admission
// error; REPLACE; DROP; DROP IF EXISTS of a missing index is a no-op without
// a job; a dataset changed between admission and build ends NOT_COMMITTED
// with PRE_INVOCATION_STALE_ADMISSION, while other commits since admission
// (the earlier builds) do not make a job stale.
func TestEndToEndWithTheRealBuilder(t *testing.T) {
	builder := builderDir(t)
	lake := t.TempDir()
	mkdata := func(extra ...string) {
		t.Helper()
		args := append([]string{filepath.Join(builder, "make-dataset.js"), filepath.Join(lake, "db"), "items", "--rows", "2000", "--dim", "16"}, extra...)
		if out, err := exec.Command("node", args...).CombinedOutput(); err != nil {
			t.Fatalf("make-dataset: %v\n%s", err, out)
		}
	}
	mkdata()

	c := mastertest.NewWith(t, nil, func(int) master.Options {
		return master.Options{Knobs: &master.Knobs{HeartbeatInterval: 100 * time.Millisecond}}
	})
	l := c.Leader()
	addr := startAgent(t, c, builder)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	call := func(fn func(ctx context.Context, a *adminapi.LanceMasterServiceClient) error) error {
		return c.Client(l).Call(ctx, fn)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(call(func(ctx context.Context, a *adminapi.LanceMasterServiceClient) error {
		if _, err := a.CreateCatalog(ctx, &adminapi.TCatalog{Name: "lake", RootURI: &lake}, ""); err != nil {
			return err
		}
		if _, err := a.AddBackend(ctx, addr, ""); err != nil {
			return err
		}
		_, err := a.SetOption(ctx, options.OptEnableLocalFileMutation, "true", "")
		return err
	}))
	create := func(name, column, typ string, replace bool, props ...string) (*adminapi.TAdmitResponse, error) {
		r := &adminapi.TCreateIndexRequest{Catalog: "lake", Db: "db", Table: "items", IndexName: name, Column: column, IndexType: typ, Replace: &replace}
		for i := 0; i+1 < len(props); i += 2 {
			r.Properties = append(r.Properties, &adminapi.TProperty{Key: props[i], Value: props[i+1]})
		}
		var resp *adminapi.TAdmitResponse
		err := call(func(ctx context.Context, a *adminapi.LanceMasterServiceClient) (err error) {
			resp, err = a.CreateIndex(ctx, r)
			return err
		})
		return resp, err
	}
	drop := func(name string, ifExists bool) (*adminapi.TAdmitResponse, error) {
		var resp *adminapi.TAdmitResponse
		err := call(func(ctx context.Context, a *adminapi.LanceMasterServiceClient) (err error) {
			resp, err = a.DropIndex(ctx, &adminapi.TDropIndexRequest{Catalog: "lake", Db: "db", Table: "items", IndexName: name, IfExists: &ifExists})
			return err
		})
		return resp, err
	}
	settle := func(id int64) *job.Record {
		t.Helper()
		c.WaitSettled(l, []int64{id})
		r, _ := c.Masters[l].FSM().State().Job(id)
		return r
	}
	committed := func(what string, resp *adminapi.TAdmitResponse, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		r := settle(resp.GetJobID())
		if r.MutationState != job.Committed || r.RefreshState != job.RefreshDone || r.Result.Code != job.NativeOK || r.HoldsPossibleLiveSlot() {
			t.Fatalf("%s: job %d %s/%s %s %q slot=%v", what, r.JobID, r.MutationState, r.RefreshState, r.Result.Code, r.Result.Message, r.HoldsPossibleLiveSlot())
		}
	}

	resp, err := create("id_btree", "id", "BTREE", false)
	committed("BTREE create", resp, err)
	resp, err = create("vec_ivfpq", "vector", "IVF_PQ", false, "metric", "l2", "num_partitions", "2", "num_sub_vectors", "2", "num_bits", "4")
	committed("IVF_PQ create", resp, err)

	if _, err := create("id_btree", "id", "BTREE", false); errCode(t, err) != adminapi.TErrorCode_ALREADY_EXISTS {
		t.Fatalf("CREATE of an existing index: %v", err)
	}
	resp, err = create("id_btree", "id", "BITMAP", true)
	committed("REPLACE", resp, err)
	resp, err = drop("vec_ivfpq", false)
	committed("DROP", resp, err)
	resp, err = drop("vec_ivfpq", true)
	if err != nil || !resp.Noop || resp.IsSetJobID() {
		t.Fatalf("DROP IF EXISTS of a missing index: %+v %v", resp, err)
	}

	var view *adminapi.TDatasetView
	must(call(func(ctx context.Context, a *adminapi.LanceMasterServiceClient) (err error) {
		view, err = a.InspectDataset(ctx, "lake", "db", "items")
		return err
	}))
	if len(view.Indexes) != 1 || view.Indexes[0].Name != "id_btree" || view.Indexes[0].IndexType != "BITMAP" {
		t.Fatalf("indexes after REPLACE and DROP: %+v", view.Indexes)
	}

	// The dataset changes between admission and build.
	must(call(func(ctx context.Context, a *adminapi.LanceMasterServiceClient) error {
		_, err := a.SetOption(ctx, options.OptDispatcherPaused, "true", "")
		return err
	}))
	resp, err = create("vec_late", "vector", "IVF_PQ", false, "num_partitions", "2", "num_sub_vectors", "2", "num_bits", "4")
	if err != nil {
		t.Fatal(err)
	}
	mkdata("--overwrite", "--dim", "32") // the table is rewritten: the vector column changed
	must(call(func(ctx context.Context, a *adminapi.LanceMasterServiceClient) error {
		_, err := a.SetOption(ctx, options.OptDispatcherPaused, "false", "")
		return err
	}))
	r := settle(resp.GetJobID())
	if r.MutationState != job.NotCommitted || r.Result.Code != job.PreInvocationStaleAdmission {
		t.Fatalf("stale admission: %s %s %q", r.MutationState, r.Result.Code, r.Result.Message)
	}
}

func errCode(t *testing.T, err error) adminapi.TErrorCode {
	t.Helper()
	ae, ok := err.(*adminapi.TAdminError)
	if !ok {
		t.Fatalf("want a *TAdminError, got %T %v", err, err)
	}
	return ae.Code
}
