package backend

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/pkg/backend/frame"
	"github.com/lancemaster/lancemaster/pkg/backend/supervisor"
)

// With the real builder held mid-build (LANCEMASTER_BUILDER_HOLD, hold.js):
// the worker runs with its own fresh TMPDIR under the temp root, and when
// the build is killed there, what was written into that TMPDIR (here: a
// spill file planted while it is held, as Lance's shuffle leaves them) is
// gone once Run returns; the outcome carries the worker's resources.
func TestRealBuilderKilledMidBuildLeavesNoTempFiles(t *testing.T) {
	builder := realBuilder(t)
	lake, hold, tmpRoot := t.TempDir(), t.TempDir(), t.TempDir()
	if out, err := exec.Command("node", filepath.Join(builder, "make-dataset.js"), lake, "items", "--rows", "2000", "--dim", "16").CombinedOutput(); err != nil {
		t.Fatalf("make-dataset: %v\n%s", err, out)
	}
	uri := filepath.Join(lake, "items.lance")
	sup := realSupervisor(t, builder, func(c *supervisor.Config) {
		c.TempRoot, c.KillGrace = tmpRoot, 200*time.Millisecond
		c.Env = append(c.Env, "LANCEMASTER_BUILDER_HOLD="+hold)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run := func(req *frame.Request) Outcome { return sup.Run(ctx, req, time.Now().Add(time.Minute)) }
	contract := builderContract(t, run, uri, "vector", "IVF_PQ")
	if err := os.WriteFile(filepath.Join(hold, "before-commit"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	buildCtx, kill := context.WithCancel(ctx)
	done := make(chan Outcome, 1)
	go func() {
		done <- sup.Run(buildCtx, &frame.Request{Protocol: 1, Mode: frame.ModeBuild, DatasetURI: uri, JobID: 1, InvocationID: "inv-held",
			MutationType: "CREATE", IndexName: "vec", ColumnName: "vector", IndexType: "IVF_PQ",
			PropertiesJSON: `{"num_partitions":2,"num_sub_vectors":2}`, AdmittedDatasetVersion: 1, SchemaContractJSON: contract},
			time.Now().Add(time.Minute))
	}()
	var pid []byte
	eventually(t, func() bool {
		b, err := os.ReadFile(filepath.Join(hold, "before-commit.reached"))
		pid = b
		return err == nil && len(b) > 0
	}, "the builder never reached the hold")
	ents, err := os.ReadDir(tmpRoot)
	if err != nil || len(ents) != 1 {
		t.Fatalf("temp root while held: %v %v", ents, err)
	}
	tmp := filepath.Join(tmpRoot, ents[0].Name())
	environ, _ := os.ReadFile("/proc/" + strings.TrimSpace(string(pid)) + "/environ")
	if n, _ := strconv.Atoi(strings.TrimSpace(string(pid))); n <= 0 || !bytes.Contains(environ, []byte("\x00TMPDIR="+tmp+"\x00")) &&
		!bytes.HasPrefix(environ, []byte("TMPDIR="+tmp+"\x00")) {
		t.Fatalf("the held builder (pid %s) does not run with TMPDIR=%s", pid, tmp)
	}
	if err := os.WriteFile(filepath.Join(tmp, "shuffle-spill-0.arrow"), make([]byte, 1<<16), 0o644); err != nil {
		t.Fatal(err)
	}
	kill()
	out := <-done
	if out.Result != nil || out.Proof != ProofChildReaped || out.StartTime.IsZero() || out.PeakMemorySource == "" {
		t.Fatalf("outcome %+v", out)
	}
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Fatalf("the killed builder's TMPDIR %s is still there (err %v)", tmp, err)
	}
}
