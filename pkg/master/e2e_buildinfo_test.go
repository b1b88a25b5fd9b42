package master_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/pkg/job"
)

// End to end with the real backend agent and builder: a build's log is
// answered by its backend while it runs (with its phase), the worker runs
// with its own TMPDIR, which a SIGKILL mid-build does not leave behind,
// and every report's resources and log tail reach the journal and jobs
// show; a finished build's phases (Lance's stage lines) were journaled
// with their elapsed time.
func TestEndToEndBuildLogsPhasesAndResources(t *testing.T) {
	r := newEvidenceRig(t)
	r.holdAt("before-commit")
	id := r.createIVFPQ("vec", false)
	pid := r.heldWorker("before-commit")
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		t.Fatal(err)
	}
	var tmp string
	for _, kv := range bytes.Split(environ, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("TMPDIR=")); ok {
			tmp = string(v)
		}
	}
	if !strings.Contains(tmp, filepath.Join("worker-tmp", "lancemaster-tmp-")) {
		t.Fatalf("the worker's TMPDIR is %q, not its own under the backend's data dir", tmp)
	}
	if err := os.WriteFile(filepath.Join(tmp, "shuffle-0.arrow"), make([]byte, 1<<16), 0o644); err != nil {
		t.Fatal(err)
	}

	logs := func(id int64) *adminapi.TJobLogs {
		var out *adminapi.TJobLogs
		r.call(func(ctx context.Context, a *adminapi.LanceMasterServiceClient) (err error) {
			out, err = a.JobLogs(ctx, id, 0)
			return err
		})
		return out
	}
	running := logs(id)
	if running.Source != "backend" || running.GetPhase() != "building" || !running.IsSetElapsedMs() ||
		!strings.Contains(running.Log, `lancemaster-progress {"phase":"building"}`) {
		t.Fatalf("jobs logs while held: %+v", running)
	}

	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	r.release("before-commit")
	rec := r.waitJob(id, "the killed job to end", func(j *job.Record) bool { return j.MutationState.IsOutcome() })
	if rec.Resources.StartTimeMs == 0 || rec.Resources.FinishTimeMs < rec.Resources.StartTimeMs || rec.Resources.PeakMemoryBytes <= 0 ||
		rec.Resources.PeakMemorySource == "" || rec.DispatchTimeMs == 0 || !strings.Contains(rec.LogTail, "lancemaster-progress") {
		t.Fatalf("killed job: resources %+v dispatch %d tail %q", rec.Resources, rec.DispatchTimeMs, rec.LogTail)
	}
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Fatalf("the killed worker's TMPDIR %s is still there (err %v)", tmp, err)
	}

	id2 := r.createIVFPQ("vec2", false)
	rec2 := r.waitJob(id2, "the build to commit", func(j *job.Record) bool { return j.MutationState.IsOutcome() })
	if rec2.MutationState != job.Committed || rec2.BuildPhase == "" || rec2.ProgressTimeMs == 0 || rec2.BuildElapsedMs < 0 ||
		!strings.Contains(rec2.LogTail, "merging") || rec2.Resources.WallMs <= 0 || rec2.LeftoverIndexUUID != "" {
		t.Fatalf("committed job: %s phase %q elapsed %d at %d, resources %+v, leftover %q, tail %q", rec2.MutationState,
			rec2.BuildPhase, rec2.BuildElapsedMs, rec2.ProgressTimeMs, rec2.Resources, rec2.LeftoverIndexUUID, rec2.LogTail)
	}
	finished := logs(id2)
	if finished.Source != "backend" || !strings.Contains(finished.Log, "Start to train IVF model") || finished.IsSetPhase() {
		t.Fatalf("jobs logs of the finished build: source %s phase %v log %.200q", finished.Source, finished.Phase, finished.Log)
	}
	var show *adminapi.TJobView
	r.call(func(ctx context.Context, a *adminapi.LanceMasterServiceClient) (err error) {
		show, err = a.ShowJob(ctx, id2, true)
		return err
	})
	if show.GetDispatchTimeMs() == 0 || show.GetStartTimeMs() == 0 || show.GetFinishTimeMs() == 0 || show.GetPeakMemorySource() == "" {
		t.Fatalf("jobs show: %+v", show)
	}
	t.Logf("figure: IVF_PQ build wall %d ms, peak memory %d bytes (%s), last phase %s at %d ms",
		rec2.Resources.WallMs, rec2.Resources.PeakMemoryBytes, rec2.Resources.PeakMemorySource, rec2.BuildPhase, rec2.BuildElapsedMs)
}

// heldWorker waits until the builder holds at point and returns its pid.
func (r *evidenceRig) heldWorker(point string) int {
	r.t.Helper()
	r.waitReached(point)
	pidText, err := os.ReadFile(filepath.Join(r.hold, point+".reached"))
	if err != nil {
		r.t.Fatal(err)
	}
	var pid int
	if _, err := fmt.Sscan(string(pidText), &pid); err != nil || pid <= 1 {
		r.t.Fatalf("worker pid %q: %v", pidText, err)
	}
	return pid
}
