package master_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/pkg/master"
	"github.com/lancemaster/lancemaster/pkg/master/mastertest"

	"github.com/lancemaster/lancemaster/pkg/testkit"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/pkg/backend"
	"github.com/lancemaster/lancemaster/pkg/backend/supervisor"
	"github.com/lancemaster/lancemaster/pkg/config"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/options"
)

const lifecycleCanary = "LIFECYCLE-CANARY-5e0c2f9a71d4"

// The secrets canary over the whole lifecycle (issue 5): three masters, a
// real backend agent and the real builder build an index with a storage
// secret read from the secrets dir. The secret must appear in no raft log,
// stable store or snapshot file, no log line of any master or of the
// backend (stderr tails included), no admin API output (what the CLI prints,
// -o json included), no /metrics scrape, and not in the backend's outbox.
// Invocation secrets may live only in the journal: they must not be in the
// logs or the admin output either.
func TestSecretsCanaryWholeLifecycle(t *testing.T) {
	builder := builderDir(t)
	lake := t.TempDir()
	if out, err := exec.Command("node", filepath.Join(builder, "make-dataset.js"), filepath.Join(lake, "db"), "items",
		"--rows", "500", "--dim", "8").CombinedOutput(); err != nil {
		t.Fatalf("make-dataset: %v\n%s", err, out)
	}
	secrets := t.TempDir()
	// aws_* options are ignored for a local dataset but travel like real ones.
	if err := os.WriteFile(filepath.Join(secrets, "lake-creds"),
		[]byte(`{"aws_secret_access_key":"`+lifecycleCanary+`","aws_access_key_id":"AKIA-`+lifecycleCanary+`"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.DebugLevel)
	logger := zap.New(core)
	c := mastertest.NewWith(t, withHTTP(t, func(n *config.Node) {
		n.SecretsDir = secrets
		n.SnapshotThreshold, n.TrailingLogs = 16, 4
	}), func(int) master.Options {
		return master.Options{Logger: logger, Knobs: &master.Knobs{HeartbeatInterval: 100 * time.Millisecond}, Credentials: config.DirCredentials{Dir: secrets}}
	})
	l := c.Leader()

	env := []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range backend.DefaultWorkerEnv(os.Getenv("PATH")) {
		if k != "PATH" {
			env = append(env, k+"="+v)
		}
	}
	sup, err := supervisor.New(supervisor.Config{Command: []string{"node", filepath.Join(builder, "builder.js")}, Env: env,
		Isolation: "best-effort", Logger: logger.Named("supervisor")})
	if err != nil {
		t.Fatal(err)
	}
	agentDir := t.TempDir()
	agent, err := backend.New(backend.Config{ListenAddr: "127.0.0.1:0", HTTPListen: "127.0.0.1:0", DataDir: agentDir,
		Masters: config.RPCAddresses(c.Nodes[0].Peers), Isolation: "best-effort", Logger: logger.Named("backend")}, sup)
	if err != nil {
		t.Fatal(err)
	}
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	defer agent.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	call := func(fn func(ctx context.Context, a *adminapi.LanceMasterServiceClient) error) {
		t.Helper()
		if err := c.Client(l).Call(ctx, fn); err != nil {
			t.Fatal(err)
		}
	}
	creds := "lake-creds"
	var ids []int64
	call(func(ctx context.Context, a *adminapi.LanceMasterServiceClient) error {
		if _, err := a.CreateCatalog(ctx, &adminapi.TCatalog{Name: "lake", RootURI: &lake, CredentialsRef: &creds}, ""); err != nil {
			return err
		}
		if _, err := a.AddBackend(ctx, agent.Addr(), ""); err != nil {
			return err
		}
		if _, err := a.SetOption(ctx, options.OptEnableLocalFileMutation, "true", ""); err != nil {
			return err
		}
		for _, ix := range []struct{ name, col, typ string }{{"id_btree", "id", "BTREE"}, {"text_btree", "text", "BTREE"}} {
			resp, err := a.CreateIndex(ctx, &adminapi.TCreateIndexRequest{Catalog: "lake", Db: "db", Table: "items",
				IndexName: ix.name, Column: ix.col, IndexType: ix.typ})
			if err != nil {
				return err
			}
			ids = append(ids, resp.GetJobID())
		}
		return nil
	})
	c.WaitSettled(l, ids)
	st := c.Masters[l].FSM().State()
	var invocationSecrets []string
	for _, id := range ids {
		r, _ := st.Job(id)
		if r.MutationState != job.Committed {
			t.Fatalf("job %d is %s (%s %q)", id, r.MutationState, r.Result.Code, r.Result.Message)
		}
		invocationSecrets = append(invocationSecrets, r.InvocationSecret)
	}
	for _, m := range c.Masters {
		_ = m.Node().Snapshot() // "nothing new to snapshot" is fine
	}

	check := func(where string, b []byte) {
		t.Helper()
		if bytes.Contains(b, []byte(lifecycleCanary)) {
			t.Errorf("%s holds the storage secret", where)
		}
	}
	checkNoInvocationSecret := func(where string, b []byte) {
		t.Helper()
		for _, s := range invocationSecrets {
			if s != "" && bytes.Contains(b, []byte(s)) {
				t.Errorf("%s holds an invocation secret", where)
			}
		}
	}
	// raft.db, stable store, snapshots of every master.
	files := 0
	for _, n := range c.Nodes {
		_ = filepath.Walk(n.DataDir, func(p string, info os.FileInfo, err error) error {
			if err == nil && !info.IsDir() {
				b, _ := os.ReadFile(p)
				check(p, b)
				files++
			}
			return nil
		})
	}
	if files < 6 {
		t.Fatalf("only %d master files searched", files)
	}
	// The backend's outbox (it may hold invocation secrets, never storage ones).
	_ = filepath.Walk(agentDir, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			b, _ := os.ReadFile(p)
			check(p, b)
		}
		return nil
	})
	// What the CLI prints: the admin API's answers as JSON.
	call(func(ctx context.Context, a *adminapi.LanceMasterServiceClient) error {
		list, err := a.ListJobs(ctx, &adminapi.TListJobsRequest{})
		if err != nil {
			return err
		}
		cats, _ := a.ListCatalogs(ctx)
		bes, _ := a.ListBackends(ctx)
		opts, _ := a.ListOptions(ctx)
		view, _ := a.InspectDataset(ctx, "lake", "db", "items")
		for _, v := range []any{list, cats, bes, opts, view} {
			b, _ := json.Marshal(v)
			check("admin output", b)
			checkNoInvocationSecret("admin output", b)
		}
		for _, id := range ids {
			show, err := a.ShowJob(ctx, id, false)
			if err != nil {
				return err
			}
			b, _ := json.Marshal(show)
			check("jobs show", b)
			checkNoInvocationSecret("jobs show", b)
		}
		return nil
	})
	// /metrics of every master and of the backend.
	get := func(url string) []byte {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return b
	}
	for _, m := range c.Masters {
		b := get("http://" + m.HTTPAddr() + "/metrics")
		check("master /metrics", b)
		checkNoInvocationSecret("master /metrics", b)
	}
	b := get("http://" + agent.HTTPAddr() + "/metrics")
	check("backend /metrics", b)
	checkNoInvocationSecret("backend /metrics", b)
	// Every log line of every master, the backend and its supervisor.
	for _, line := range testkit.LogLines(logs) {
		check("log line", []byte(line))
		checkNoInvocationSecret("log line", []byte(line))
	}
	if logs.Len() == 0 {
		t.Fatal("no log lines captured")
	}
	// And the secret did travel: the builder got it and the build succeeded.
}
