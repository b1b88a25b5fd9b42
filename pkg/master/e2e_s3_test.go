package master_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/pkg/master"
	"github.com/lancemaster/lancemaster/pkg/master/mastertest"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/config"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/rpc"
	"github.com/lancemaster/lancemaster/pkg/s3test"
	"github.com/lancemaster/lancemaster/pkg/testkit"
)

// s3Canary is the secret access key of the object-store tests: it must
// reach the builder inside the requests and appear nowhere else.
const s3Canary = "S3-CANARY-SECRET-4b9e0d27c1f3"

// s3Rig is the evidence rig (three masters, a real `lancemaster backend`
// process with the builder's hold) on a catalog rooted at
// s3://lake/prefix on the in-process S3 fake, with its credentials in the
// masters' secrets directory.
type s3Rig struct {
	*evidenceRig
	store       *s3test.Server
	secrets     string
	mlogs       *observer.ObservedLogs
	backendData string
	backendHTTP string
}

// credentialsFile writes the credentials file ref for store (JSON, as an
// operator would): keys, endpoint, allow_http and region.
func writeS3Credentials(t *testing.T, dir, ref string, store *s3test.Server) {
	t.Helper()
	b, err := json.Marshal(store.StorageOptions(s3Canary))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ref), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// makeS3Dataset writes db/items.lance under store's prefix: the builder's
// make-dataset.js writes it locally, and it is uploaded file for file.
func makeS3Dataset(t *testing.T, builder string, store *s3test.Server) {
	t.Helper()
	local := t.TempDir()
	if out, err := exec.Command("node", filepath.Join(builder, "make-dataset.js"), local, "items", "--rows", "1000", "--dim", "16").CombinedOutput(); err != nil {
		t.Fatalf("make-dataset: %v\n%s", err, out)
	}
	if n := store.Upload(t, filepath.Join(local, "items.lance"), "prefix/db/items.lance"); n < 3 {
		t.Fatalf("uploaded %d files of the dataset", n)
	}
}

func newS3Rig(t *testing.T) *s3Rig {
	t.Helper()
	builder := builderDir(t)
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	r := &s3Rig{evidenceRig: &evidenceRig{t: t, builder: builder, hold: t.TempDir(), bin: bin, logs: &lockedBuffer{}},
		store: s3test.Start(t), secrets: t.TempDir(), backendData: t.TempDir()}
	makeS3Dataset(t, builder, r.store)
	writeS3Credentials(t, r.secrets, "s3-creds", r.store)
	core, logs := observer.New(zapcore.DebugLevel)
	r.mlogs = logs
	r.c = mastertest.NewWith(t, withHTTP(t, func(n *config.Node) {
		n.SecretsDir = r.secrets
		n.SnapshotThreshold, n.TrailingLogs = 16, 4
	}), func(int) master.Options {
		return master.Options{Logger: zap.New(core), Knobs: &master.Knobs{HeartbeatInterval: 100 * time.Millisecond}, Credentials: config.DirCredentials{Dir: r.secrets}}
	})
	r.l = r.c.Leader()
	ports := freePorts(t, 2)
	r.addr, r.backendHTTP = fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1])
	r.cfg = filepath.Join(t.TempDir(), "backend.yaml")
	body := fmt.Sprintf("listen: %s\nhttp_listen: %s\ndata_dir: %s\nmasters: [%s]\nisolation: best-effort\nconcurrency: 2\n"+
		"worker: [node, %s]\nworker_env: {LANCEMASTER_BUILDER_HOLD: %q}\nlog_format: json\nlog_level: debug\n",
		r.addr, r.backendHTTP, r.backendData, strings.Join(config.RPCAddresses(r.c.Nodes[0].Peers), ", "), filepath.Join(builder, "builder.js"), r.hold)
	if err := os.WriteFile(r.cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	r.startBackend()
	t.Cleanup(func() {
		r.killBackend()
		if t.Failed() {
			t.Logf("backend log:\n%s", r.logs.String())
		}
	})
	// The backend first: a catalog on an object store needs a live one to
	// vouch for the store.
	r.call(func(ctx context.Context, a *adminapi.LanceMasterServiceClient) error {
		_, err := a.AddBackend(ctx, r.addr, "")
		return err
	})
	r.waitAlive()
	root, creds := r.store.Root("prefix"), "s3-creds"
	r.call(func(ctx context.Context, a *adminapi.LanceMasterServiceClient) error {
		_, err := a.CreateCatalog(ctx, &adminapi.TCatalog{Name: "lake", RootURI: &root, CredentialsRef: &creds}, "")
		return err
	})
	return r
}

// committed waits for job id to reach COMMITTED and leave its fence.
func (r *s3Rig) committed(what string, id int64) *job.Record {
	r.t.Helper()
	rec := r.waitJob(id, what+" to end", func(j *job.Record) bool { return j.MutationState.IsOutcome() && !j.Unresolved() })
	if rec.MutationState != job.Committed || rec.Result.Code != job.NativeOK {
		r.t.Fatalf("%s: job %d %s %s %q", what, id, rec.MutationState, rec.Result.Code, rec.Result.Message)
	}
	return rec
}

// procHasCanary reads /proc/PID/cmdline and /proc/PID/environ.
func procHasCanary(t *testing.T, pid int) []string {
	t.Helper()
	var where []string
	for _, f := range []string{"cmdline", "environ"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, f))
		if err != nil {
			t.Fatalf("read /proc/%d/%s: %v", pid, f, err)
		}
		if len(b) == 0 && f == "cmdline" {
			t.Fatalf("/proc/%d/cmdline is empty: the process is gone", pid)
		}
		if bytes.Contains(b, []byte(s3Canary)) {
			where = append(where, fmt.Sprintf("/proc/%d/%s", pid, f))
		}
	}
	return where
}

// End to end on object storage: a catalog rooted at s3://lake/prefix on
// the S3 fake, whose credentials file holds the keys, the endpoint,
// allow_http and the region. CREATE, REPLACE and DROP of IVF_PQ and BTREE
// go through the real backend and builder to COMMITTED (the builder's
// commits on the fake carried If-None-Match). The secret is in no raft
// log or snapshot, no master or backend log line, no CLI output, no
// /metrics, not in the backend's outbox, and not in the worker's (or the
// agent's) command line or environment while it builds.
func TestEndToEndOnObjectStorage(t *testing.T) {
	r := newS3Rig(t)
	putsBefore := r.store.ConditionalPuts()

	r.holdAt("before-commit")
	id := r.createIVFPQ("vec", false)
	r.waitReached("before-commit")
	pidText, err := os.ReadFile(filepath.Join(r.hold, "before-commit.reached"))
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	if _, err := fmt.Sscan(string(pidText), &pid); err != nil || pid <= 1 {
		t.Fatalf("worker pid %q: %v", pidText, err)
	}
	leaks := append(procHasCanary(t, pid), procHasCanary(t, r.proc.Process.Pid)...)
	r.release("before-commit")
	if len(leaks) > 0 {
		t.Fatalf("the secret is in %v", leaks)
	}
	ids := []int64{r.committed("IVF_PQ CREATE", id).JobID}
	ids = append(ids, r.committed("BTREE CREATE", r.admit(func(a *adminapi.LanceMasterServiceClient, ctx context.Context) (*adminapi.TAdmitResponse, error) {
		return a.CreateIndex(ctx, &adminapi.TCreateIndexRequest{Catalog: "lake", Db: "db", Table: "items", IndexName: "id_btree",
			Column: "id", IndexType: "BTREE"})
	})).JobID)
	ids = append(ids, r.committed("IVF_PQ REPLACE", r.createIVFPQ("vec", true)).JobID)
	ids = append(ids, r.committed("IVF_PQ DROP", r.drop("vec")).JobID)
	ids = append(ids, r.committed("BTREE DROP", r.drop("id_btree")).JobID)
	// Each commit wrote its manifest with If-None-Match: * (the probe's
	// verdict was cached since the catalog was created: no PUT of its own).
	t.Logf("figure: 5 builds on the S3 fake sent %d conditional PUTs", r.store.ConditionalPuts()-putsBefore)
	if n := r.store.ConditionalPuts() - putsBefore; n < 5 {
		t.Fatalf("5 commits sent %d conditional PUTs", n)
	}
	var view *adminapi.TDatasetView
	r.call(func(ctx context.Context, a *adminapi.LanceMasterServiceClient) (err error) {
		view, err = a.InspectDataset(ctx, "lake", "db", "items")
		return err
	})
	if len(view.Indexes) != 0 {
		t.Fatalf("indexes after the drops: %+v", view.Indexes)
	}

	// The probe refuses a store that ignores If-None-Match: a catalog on
	// it is refused (through the CLI, whose words are checked below), and
	// a request that reaches the backend for it is refused there: the
	// catalog's credentials rotated to point at that store make the next
	// admission's inspect fail.
	bad := s3test.StartIgnoringConditionalPut(t)
	writeS3Credentials(t, r.secrets, "bad-creds", bad)
	const why = "does not honour conditional PUT (If-None-Match); Lance would lose concurrent commits"
	master := r.c.Nodes[r.l].RPCAdvertise
	cli := func(args ...string) (string, error) {
		out, err := exec.Command(r.bin, append([]string{"--address", master}, args...)...).CombinedOutput()
		return string(out), err
	}
	out, err := cli("catalogs", "create", "badlake", "--root", bad.Root("prefix"), "--credentials", "bad-creds")
	if err == nil || !strings.Contains(out, why) {
		t.Fatalf("catalog on a store that ignores If-None-Match: %v\n%s", err, out)
	}
	cliOut := out
	t.Logf("catalogs create on a store that ignores If-None-Match: %s", strings.TrimSpace(out))
	writeS3Credentials(t, r.secrets, "s3-creds", bad)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = r.c.Client(r.l).Call(ctx, func(ctx context.Context, a *adminapi.LanceMasterServiceClient) error {
		_, err := a.CreateIndex(ctx, &adminapi.TCreateIndexRequest{Catalog: "lake", Db: "db", Table: "items", IndexName: "late",
			Column: "id", IndexType: "BTREE"})
		return err
	})
	if err == nil || !strings.Contains(err.Error(), why) {
		t.Fatalf("admission against a store that ignores If-None-Match: %v", err)
	}
	t.Logf("admission after the credentials were rotated onto that store: %v", err)
	writeS3Credentials(t, r.secrets, "s3-creds", r.store)

	r.checkNoCanary(ids, cliOut, cli)
}

// checkNoCanary searches every place the secret must not be.
func (r *s3Rig) checkNoCanary(ids []int64, extra string, cli func(...string) (string, error)) {
	t := r.t
	t.Helper()
	check := func(where string, b []byte) {
		t.Helper()
		if bytes.Contains(b, []byte(s3Canary)) {
			t.Errorf("%s holds the storage secret", where)
		}
	}
	check("CLI output of the refused catalog", []byte(extra))
	for _, m := range r.c.Masters {
		_ = m.Node().Snapshot() // "nothing new to snapshot" is fine
	}
	files := 0
	for _, dir := range append(dataDirs(r.c), r.backendData) {
		_ = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
			if err == nil && !info.IsDir() {
				b, _ := os.ReadFile(p)
				check(p, b)
				files++
			}
			return nil
		})
	}
	if files < 7 {
		t.Fatalf("only %d files searched", files)
	}
	for _, args := range [][]string{{"jobs", "list"}, {"catalogs", "list"}, {"backends", "list"}, {"config", "list"},
		{"datasets", "inspect", "lake.db.items"}} {
		for _, format := range []string{"table", "json"} {
			out, err := cli(append([]string{"-o", format}, args...)...)
			if err != nil {
				t.Fatalf("%v: %v\n%s", args, err, out)
			}
			check("CLI "+strings.Join(args, " "), []byte(out))
		}
	}
	for _, id := range ids {
		out, err := cli("-o", "json", "jobs", "show", fmt.Sprint(id))
		if err != nil {
			t.Fatalf("jobs show %d: %v\n%s", id, err, out)
		}
		check("CLI jobs show", []byte(out))
	}
	// The worker's stderr as the backend keeps it (the job log; a backend
	// without it answers NOT_IMPLEMENTED, which carries nothing either).
	bc := rpc.NewThriftBackendClient(rpc.DefaultConfig())
	for _, id := range ids {
		rec := r.job(id)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := bc.JobLog(ctx, r.addr, &wire.TJobLogRequest{InvocationID: rec.InvocationID})
		cancel()
		if err == nil {
			b, _ := json.Marshal(resp)
			check("the backend's job log", b)
		}
		b, _ := json.Marshal(rec) // the whole journaled record, a log tail included
		check("the journaled job record", b)
	}
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
	for _, m := range r.c.Masters {
		check("master /metrics", get("http://"+m.HTTPAddr()+"/metrics"))
	}
	check("backend /metrics", get("http://"+r.backendHTTP+"/metrics"))
	check("backend log", []byte(r.logs.String()))
	if !strings.Contains(r.logs.String(), "object store probed") {
		t.Errorf("the backend log does not show the probe")
	}
	for _, line := range testkit.LogLines(r.mlogs) {
		check("master log line", []byte(line))
	}
	if r.mlogs.Len() == 0 {
		t.Fatal("no master log lines captured")
	}
}

func dataDirs(c *mastertest.Cluster) []string {
	var out []string
	for _, n := range c.Nodes {
		out = append(out, n.DataDir)
	}
	return out
}
