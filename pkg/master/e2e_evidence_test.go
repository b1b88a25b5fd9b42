package master_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/pkg/master"
	"github.com/lancemaster/lancemaster/pkg/master/mastertest"

	"github.com/lancemaster/lancemaster/pkg/options"
	"github.com/lancemaster/lancemaster/pkg/testkit"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/pkg/backend"
	"github.com/lancemaster/lancemaster/pkg/job"
)

// End to end with the real builder and a real `lancemaster backend`
// process (DESIGN.md §13.3, §13.4): the backend is killed with SIGKILL while
// its worker holds a build at a chosen point (the builder's test hold,
// LANCEMASTER_BUILDER_HOLD), then restarted. The job must not wait for its
// execute deadline: the new process's first heartbeats prove the old one
// gone, its outbox is delivered, the job is RESOLVING, and its outcome is
// read from the dataset's retained versions.

// evidenceRig is three in-process masters, the real builder, and one
// backend process that the test can kill and restart on the same address
// and data dir.
type evidenceRig struct {
	t       *testing.T
	c       *mastertest.Cluster
	l       int
	builder string
	lake    string
	hold    string // the builder's hold directory
	bin     string
	cfg     string
	addr    string
	proc    *exec.Cmd
	logs    *lockedBuffer
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *lockedBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *lockedBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// buildBinary builds cmd/lancemaster once per test binary.
var buildBinary = sync.OnceValues(func() (string, error) {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	dir, err := os.MkdirTemp("", "lancemaster-e2e-bin-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "lancemaster")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/lancemaster")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

func newEvidenceRig(t *testing.T) *evidenceRig {
	t.Helper()
	builder := builderDir(t)
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	r := &evidenceRig{t: t, builder: builder, lake: t.TempDir(), hold: t.TempDir(), bin: bin, logs: &lockedBuffer{}}
	r.makeDataset()
	r.c = mastertest.NewWith(t, nil, func(int) master.Options {
		return master.Options{Knobs: &master.Knobs{HeartbeatInterval: 100 * time.Millisecond, OptimizePolicyInterval: testPolicyInterval}}
	})
	r.l = r.c.Leader()
	r.addr = testkit.Addr(freePorts(t, 1)[0])
	data := t.TempDir()
	var masters []string
	for _, p := range r.c.Nodes[0].Peers {
		masters = append(masters, p.RPCAddress)
	}
	r.cfg = filepath.Join(t.TempDir(), "backend.yaml")
	body := fmt.Sprintf("listen: %s\ndata_dir: %s\nmasters: [%s]\nisolation: best-effort\nconcurrency: 2\n"+
		"worker: [node, %s]\nworker_env: {LANCEMASTER_BUILDER_HOLD: %q}\nlog_format: json\nlog_level: info\n",
		r.addr, data, strings.Join(masters, ", "), filepath.Join(builder, "builder.js"), r.hold)
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
	r.call(func(ctx context.Context, a *adminapi.LanceMasterServiceClient) error {
		if _, err := a.CreateCatalog(ctx, &adminapi.TCatalog{Name: "lake", RootURI: &r.lake}, ""); err != nil {
			return err
		}
		if _, err := a.AddBackend(ctx, r.addr, ""); err != nil {
			return err
		}
		_, err := a.SetOption(ctx, options.OptEnableLocalFileMutation, "true", "")
		return err
	})
	r.waitAlive()
	return r
}

// waitAlive waits until the leader has heard the backend accept work.
func (r *evidenceRig) waitAlive() {
	r.t.Helper()
	eventually(r.t, 60*time.Second, "the backend to be alive", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		alive := false
		_ = r.c.Client(r.l).Call(ctx, func(ctx context.Context, a *adminapi.LanceMasterServiceClient) error {
			bs, err := a.ListBackends(ctx)
			for _, b := range bs {
				alive = alive || b.GetAlive()
			}
			return err
		})
		return alive
	})
}

func (r *evidenceRig) makeDataset() {
	r.t.Helper()
	args := []string{filepath.Join(r.builder, "make-dataset.js"), filepath.Join(r.lake, "db"), "items", "--rows", "2000", "--dim", "16", "--overwrite"}
	if out, err := exec.Command("node", args...).CombinedOutput(); err != nil {
		r.t.Fatalf("make-dataset: %v\n%s", err, out)
	}
}

func (r *evidenceRig) startBackend() {
	r.t.Helper()
	cmd := exec.Command(r.bin, "backend", "--config", r.cfg)
	cmd.Stdout, cmd.Stderr = r.logs, r.logs
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	r.proc = cmd
}

// killBackend is kill -9 of the agent: its workers die with it (their
// parent-death signal), nothing is flushed.
func (r *evidenceRig) killBackend() {
	if r.proc == nil || r.proc.ProcessState != nil {
		return
	}
	_ = r.proc.Process.Kill()
	_ = r.proc.Wait()
}

func (r *evidenceRig) call(fn func(ctx context.Context, a *adminapi.LanceMasterServiceClient) error) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := r.c.Client(r.l).Call(ctx, fn); err != nil {
		r.t.Fatal(err)
	}
}

func (r *evidenceRig) job(id int64) *job.Record {
	rec, _ := r.c.Masters[r.l].FSM().State().Job(id)
	return rec
}

// waitJob waits (bounded) until cond holds for the job on the leader.
func (r *evidenceRig) waitJob(id int64, what string, cond func(*job.Record) bool) *job.Record {
	r.t.Helper()
	var rec *job.Record
	eventually(r.t, 90*time.Second, what, func() bool {
		rec = r.job(id)
		return rec != nil && cond(rec)
	})
	return rec
}

// hold makes the builder stop at point ("before-commit" or
// "after-commit") until release; the builder announces it has reached it
// by creating <point>.reached.
func (r *evidenceRig) holdAt(point string) {
	r.t.Helper()
	if err := os.WriteFile(filepath.Join(r.hold, point), nil, 0o644); err != nil {
		r.t.Fatal(err)
	}
}

func (r *evidenceRig) release(point string) {
	_ = os.Remove(filepath.Join(r.hold, point))
	_ = os.Remove(filepath.Join(r.hold, point+".reached"))
}

func (r *evidenceRig) waitReached(point string) {
	r.t.Helper()
	eventually(r.t, 90*time.Second, "the builder to reach "+point, func() bool {
		_, err := os.Stat(filepath.Join(r.hold, point+".reached"))
		return err == nil
	})
}

func (r *evidenceRig) admit(req func(a *adminapi.LanceMasterServiceClient, ctx context.Context) (*adminapi.TAdmitResponse, error)) int64 {
	r.t.Helper()
	var id int64
	r.call(func(ctx context.Context, a *adminapi.LanceMasterServiceClient) error {
		resp, err := req(a, ctx)
		if err != nil {
			return err
		}
		id = resp.GetJobID()
		return nil
	})
	return id
}

func (r *evidenceRig) createIVFPQ(name string, replace bool) int64 {
	return r.admit(func(a *adminapi.LanceMasterServiceClient, ctx context.Context) (*adminapi.TAdmitResponse, error) {
		return a.CreateIndex(ctx, &adminapi.TCreateIndexRequest{Catalog: "lake", Db: "db", Table: "items", IndexName: name,
			Column: "vector", IndexType: "IVF_PQ", Replace: &replace, Properties: []*adminapi.TProperty{
				{Key: "num_partitions", Value: "2"}, {Key: "num_sub_vectors", Value: "2"}, {Key: "num_bits", Value: "4"}}})
	})
}

func (r *evidenceRig) drop(name string) int64 {
	return r.admit(func(a *adminapi.LanceMasterServiceClient, ctx context.Context) (*adminapi.TAdmitResponse, error) {
		return a.DropIndex(ctx, &adminapi.TDropIndexRequest{Catalog: "lake", Db: "db", Table: "items", IndexName: name})
	})
}

// crashAt holds the job's worker at point, kills the backend, restarts it
// and returns the job once it is terminal, with the seconds from the
// restart to the outcome.
func (r *evidenceRig) crashAt(id int64, point string) (*job.Record, time.Duration) {
	r.t.Helper()
	r.waitReached(point)
	if point == "after-commit" {
		// A vector build's uuid is announced at its start, through the
		// backend's outbox and the progress report.
		r.waitJob(id, "the announced index uuid to be journaled", func(j *job.Record) bool { return j.IndexUUID != "" })
	}
	r.killBackend()
	r.release(point)
	restart := time.Now()
	r.startBackend()
	rec := r.waitJob(id, "the job to end", func(j *job.Record) bool { return j.MutationState.IsOutcome() })
	return rec, time.Since(restart)
}

func TestEndToEndBackendKill9DuringBuild(t *testing.T) {
	r := newEvidenceRig(t)

	// Killed before the commit: NOT_COMMITTED, proven from the dataset.
	r.holdAt("before-commit")
	id := r.createIVFPQ("vec", false)
	rec, took := r.crashAt(id, "before-commit")
	t.Logf("figure: backend kill -9 mid-build -> job terminal %.1f s after the restart", took.Seconds())
	if rec.MutationState != job.NotCommitted || rec.Result.Reason != job.ReasonResolvedFromDataset || rec.HoldsPossibleLiveSlot() {
		t.Fatalf("killed before the commit: %s %s %s %q slot=%v", rec.MutationState, rec.Result.Code, rec.Result.Reason, rec.Result.Message, rec.HoldsPossibleLiveSlot())
	}
	if rec.Unresolved() {
		t.Fatalf("the fence is still held")
	}
	// The fence is free: the same CREATE is admitted and commits.
	id = r.createIVFPQ("vec", false)
	rec = r.waitJob(id, "the second CREATE to commit", func(j *job.Record) bool { return j.MutationState.IsOutcome() && !j.Unresolved() })
	if rec.MutationState != job.Committed || rec.IndexUUID == "" {
		t.Fatalf("second CREATE: %s %q uuid %q", rec.MutationState, rec.Result.Message, rec.IndexUUID)
	}
	// §13.7: inspect reports the verified uuid and the index's statistics.
	built := rec.IndexUUID
	r.call(func(ctx context.Context, a *adminapi.LanceMasterServiceClient) error {
		view, err := a.InspectDataset(ctx, "lake", "db", "items")
		if err != nil {
			return err
		}
		for _, ix := range view.Indexes {
			if ix.Name == "vec" && (ix.GetIndexUUID() != built || ix.GetIndexedRows() != 2000 || ix.GetUnindexedRows() != 0) {
				t.Errorf("inspect of vec: uuid %q (built %q), indexed %d, unindexed %d", ix.GetIndexUUID(), built, ix.GetIndexedRows(), ix.GetUnindexedRows())
			}
		}
		return nil
	})

	// REPLACE killed after its commit: COMMITTED from the dataset, by the
	// uuid its worker announced; refresh DONE.
	r.holdAt("after-commit")
	id = r.createIVFPQ("vec", true)
	if got := r.job(id).AdmittedIndexUUID; got != built {
		t.Fatalf("REPLACE admitted with index uuid %q, want the existing index's %q", got, built)
	}
	rec, took = r.crashAt(id, "after-commit")
	t.Logf("figure: backend kill -9 just after the commit -> job terminal %.1f s after the restart", took.Seconds())
	if rec.MutationState != job.Committed || rec.Result.Reason != job.ReasonResolvedFromDataset {
		t.Fatalf("REPLACE killed after the commit: %s %s %q", rec.MutationState, rec.Result.Reason, rec.Result.Message)
	}
	r.waitJob(id, "its refresh", func(j *job.Record) bool { return j.RefreshState == job.RefreshDone })

	// DROP killed before its commit: the index is still there in every
	// later version: NOT_COMMITTED.
	r.holdAt("before-commit")
	id = r.drop("vec")
	rec, _ = r.crashAt(id, "before-commit")
	if rec.MutationState != job.NotCommitted || rec.Result.Reason != job.ReasonResolvedFromDataset {
		t.Fatalf("DROP killed before the commit: %s %s %q", rec.MutationState, rec.Result.Reason, rec.Result.Message)
	}

	// The versions of the window are pruned while the backend is down: the
	// dataset proves nothing, so UNKNOWN at once, saying why.
	r.holdAt("before-commit")
	id = r.createIVFPQ("vec_pruned", false)
	r.waitReached("before-commit")
	r.killBackend()
	r.release("before-commit")
	r.prune()
	r.startBackend()
	rec = r.waitJob(id, "the pruned job to end", func(j *job.Record) bool { return j.MutationState.IsOutcome() })
	if rec.MutationState != job.Unknown || !strings.Contains(rec.Result.Message, "pruned") {
		t.Fatalf("pruned window: %s %s %q", rec.MutationState, rec.Result.Reason, rec.Result.Message)
	}
}

// prune writes two new versions (a delete, then optimize) and removes every
// older one (optimize's cleanup), as maintenance outside lancemaster might:
// a version after the admitted one is then gone.
func (r *evidenceRig) prune() {
	r.t.Helper()
	script := `const lancedb = require("@lancedb/lancedb");
(async () => {
  const db = await lancedb.connect(process.argv[1]);
  const tbl = await db.openTable("items");
  await tbl.delete("id = 0");
  await tbl.optimize({ cleanupOlderThan: new Date(Date.now() + 1000), deleteUnverified: true });
  tbl.close();
})().catch((e) => { console.error(e); process.exit(1); });`
	cmd := exec.Command("node", "-e", script, filepath.Join(r.lake, "db"))
	cmd.Dir = r.builder
	if out, err := cmd.CombinedOutput(); err != nil {
		r.t.Fatalf("prune: %v\n%s", err, out)
	}
}

// A worker killed without a result (what the kernel's OOM killer does: a
// SIGKILL) leaves RUNNING as soon as the backend reports it: the
// termination report carries the cause and no_result, the job is RESOLVING
// in that entry and its outcome is read from the dataset. The backend keeps
// running.
func TestEndToEndWorkerKilledWithoutResult(t *testing.T) {
	r := newEvidenceRig(t)
	r.holdAt("before-commit")
	id := r.createIVFPQ("vec", false)
	pid := r.heldWorker("before-commit")
	killed := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	r.release("before-commit")
	rec := r.waitJob(id, "the job to end", func(j *job.Record) bool { return j.MutationState.IsOutcome() })
	t.Logf("figure: worker killed (SIGKILL, as by the OOM killer) -> job terminal %.2f s after the kill", time.Since(killed).Seconds())
	if rec.MutationState != job.NotCommitted || rec.Result.Reason != job.ReasonResolvedFromDataset {
		t.Fatalf("killed worker: %s %s %q", rec.MutationState, rec.Result.Reason, rec.Result.Message)
	}
	if rec.TerminationMessage == "" || rec.TerminationProof != job.ProofChildReaped {
		t.Fatalf("the cause did not reach the journal: message %q proof %s", rec.TerminationMessage, rec.TerminationProof)
	}
	t.Logf("termination message: %s", rec.TerminationMessage)
}

// Disaster recovery (DESIGN.md §13.1): a snapshot of cluster A, whose term
// has climbed, is restored into fresh masters B, whose terms start low. The
// backend that served A keeps running. B has its own cluster id, so the
// backend fences B's terms from scratch once A has gone quiet, and builds
// run; before cluster ids, it refused every B dispatch (STALE_LEADER_TERM)
// while its heartbeats looked alive. A job PENDING in the file is held:
// B cannot know whether A ran it after the save.
func TestEndToEndRestoreIntoFreshMastersWithTheOldBackend(t *testing.T) {
	builder := builderDir(t)
	lake := t.TempDir()
	if out, err := exec.Command("node", filepath.Join(builder, "make-dataset.js"), filepath.Join(lake, "db"), "items",
		"--rows", "2000", "--dim", "16").CombinedOutput(); err != nil {
		t.Fatalf("make-dataset: %v\n%s", err, out)
	}
	fast := func(int) master.Options {
		return master.Options{Knobs: &master.Knobs{HeartbeatInterval: 100 * time.Millisecond}}
	}
	a := mastertest.NewWith(t, nil, fast)
	addr := startAgentWith(t, a, builder, func(c *backend.Config) { c.ClusterRebindAfter = time.Second })
	call := func(c *mastertest.Cluster, fn func(ctx context.Context, cl *adminapi.LanceMasterServiceClient) error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := c.Client(c.Leader()).Call(ctx, fn); err != nil {
			t.Fatal(err)
		}
	}
	create := func(c *mastertest.Cluster, name string) int64 {
		var id int64
		call(c, func(ctx context.Context, cl *adminapi.LanceMasterServiceClient) error {
			resp, err := cl.CreateIndex(ctx, &adminapi.TCreateIndexRequest{Catalog: "lake", Db: "db", Table: "items",
				IndexName: name, Column: "id", IndexType: "BTREE"})
			id = resp.GetJobID()
			return err
		})
		return id
	}
	committed := func(c *mastertest.Cluster, id int64) {
		t.Helper()
		eventually(t, 60*time.Second, fmt.Sprintf("job %d to commit", id), func() bool {
			r, ok := c.Masters[c.Leader()].FSM().State().Job(id)
			return ok && r.MutationState == job.Committed
		})
	}
	call(a, func(ctx context.Context, cl *adminapi.LanceMasterServiceClient) error {
		if _, err := cl.CreateCatalog(ctx, &adminapi.TCatalog{Name: "lake", RootURI: &lake}, ""); err != nil {
			return err
		}
		if _, err := cl.AddBackend(ctx, addr, ""); err != nil {
			return err
		}
		_, err := cl.SetOption(ctx, options.OptEnableLocalFileMutation, "true", "")
		return err
	})
	// A's terms climb well above what fresh masters start with.
	for i := 0; i < 4; i++ {
		l := a.Leader()
		to := a.Nodes[(l+1)%3].NodeID
		call(a, func(ctx context.Context, cl *adminapi.LanceMasterServiceClient) error {
			_, err := cl.TransferLeader(ctx, to, "")
			return err
		})
		eventually(t, 15*time.Second, "the transfer", func() bool { return a.Leader() != l })
	}
	committed(a, create(a, "before"))
	// A job A admitted but had not dispatched when the file was saved: A
	// may have run it after the save, and nothing in B can tell, so B's
	// restore holds it (raftfsm.PrepareRestore) and never dispatches it.
	call(a, func(ctx context.Context, cl *adminapi.LanceMasterServiceClient) error {
		_, err := cl.SetOption(ctx, options.OptDispatcherPaused, "true", "")
		return err
	})
	pending := create(a, "pending")
	file := saveSnapshot(t, a.Client(a.Leader()))
	aTerm := a.Masters[a.Leader()].Node().LeaderTerm()
	aID := a.Masters[a.Leader()].FSM().State().ClusterID()
	for i := range a.Masters {
		a.Kill(i)
	}

	b := mastertest.NewWith(t, nil, fast)
	bl := b.Leader()
	res, err := restoreSnapshot(t, b.Client(bl), file)
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	if res.GetHeld() != 1 || res.GetCarriedForward() != 0 {
		t.Fatalf("restore into fresh masters: held %d, carried forward %d; want the PENDING job held", res.GetHeld(), res.GetCarriedForward())
	}
	bID := b.Masters[b.Leader()].FSM().State().ClusterID()
	if bTerm := b.Masters[b.Leader()].Node().LeaderTerm(); bTerm >= aTerm || bID == aID || bID == "" {
		t.Fatalf("the test needs B's term (%d) below A's (%d) and B's own cluster id (%q vs %q)", bTerm, aTerm, bID, aID)
	}
	call(b, func(ctx context.Context, cl *adminapi.LanceMasterServiceClient) error {
		_, err := cl.SetOption(ctx, options.OptDispatcherPaused, "false", "") // the restore left it paused
		return err
	})
	committed(b, create(b, "after"))
	r, _ := b.Masters[b.Leader()].FSM().State().Job(pending)
	if r == nil || r.MutationState != job.Pending || !r.RestoreHold {
		t.Fatalf("the job PENDING in the file: %+v, want PENDING and held", r)
	}
	call(b, func(ctx context.Context, cl *adminapi.LanceMasterServiceClient) error {
		v, err := cl.CancelJob(ctx, &adminapi.TCancelRequest{JobID: pending})
		if err == nil && (v.GetMutationState() != "CANCELLED" || !v.GetRestoreHold()) {
			err = fmt.Errorf("cancelled held job: %s, held %v", v.GetMutationState(), v.GetRestoreHold())
		}
		return err
	})
}
