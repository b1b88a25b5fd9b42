package supervisor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A worker killed mid-build (it ignores SIGTERM, so the supervisor's
// SIGKILL ends it) after writing shuffle files into its TMPDIR leaves
// nothing behind: the TMPDIR is its own, and it is removed after the reap.
func TestKilledWorkerLeavesNoTempFiles(t *testing.T) {
	forEachMode(t, func(t *testing.T, s *Supervisor) {
		req := request(t, "tmpfiles")
		out := runUntilReady(t, s, req)
		wantOutcome(t, out, ProofChildReaped, "canceled")
		if out.Signal != "SIGKILL" {
			t.Errorf("signal %q, want SIGKILL (the worker ignores TERM)", out.Signal)
		}
		b, err := os.ReadFile(filepath.Join(req.DatasetURI, "tmpdir"))
		if err != nil {
			t.Fatal(err)
		}
		vars := strings.Split(string(b), "\n")
		tmp := vars[0]
		if filepath.Dir(tmp) != s.cfg.TempRoot || !strings.HasPrefix(filepath.Base(tmp), tmpPrefix) {
			t.Fatalf("TMPDIR %q is not a fresh directory under %s", tmp, s.cfg.TempRoot)
		}
		if len(vars) != 3 || vars[1] != tmp || vars[2] != tmp {
			t.Errorf("TMP and TEMP %q, want both %q", vars[1:], tmp)
		}
		if _, err := os.Stat(tmp); !os.IsNotExist(err) {
			t.Errorf("the worker's TMPDIR %s is still there after the reap (err %v)", tmp, err)
		}
		if ents, _ := os.ReadDir(s.cfg.TempRoot); len(ents) != 0 {
			t.Errorf("left under the temp root: %v", ents)
		}
		assertClean(t, s, out)
	})
}

// Two runs never share a TMPDIR, and one that ends normally removes its own.
func TestEachRunGetsItsOwnTempDir(t *testing.T) {
	s := newSupervisor(t, modeCases[1])
	seen := map[string]bool{}
	for i := 0; i < 2; i++ {
		req := request(t, "tmpfiles")
		out := runUntilReady(t, s, req)
		b, _ := os.ReadFile(filepath.Join(req.DatasetURI, "tmpdir"))
		tmp, _, _ := strings.Cut(string(b), "\n")
		if tmp == "" || seen[tmp] {
			t.Fatalf("run %d: TMPDIR %q (seen %v)", i, tmp, seen)
		}
		seen[tmp] = true
		assertClean(t, s, out)
	}
	out := run(t, s, "echo")
	wantOutcome(t, out, ProofChildReaped, "")
	if ents, _ := os.ReadDir(s.cfg.TempRoot); len(ents) != 0 {
		t.Errorf("left under the temp root: %v", ents)
	}
}

// A TMPDIR a crashed agent left (its pid is gone) is removed at New; one
// of a live agent is not.
func TestStaleTempDirsRemovedAtNew(t *testing.T) {
	root := t.TempDir()
	dead := filepath.Join(root, tmpPrefix+"999999999-1")
	live := filepath.Join(root, tmpPrefix+"1-1") // pid 1 is alive
	other := filepath.Join(root, "unrelated")
	for _, d := range []string{dead, live, other} {
		if err := os.MkdirAll(filepath.Join(d, "x"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	_ = os.Chmod(filepath.Join(dead, "x"), 0o500)
	newSupervisor(t, modeCases[1], func(c *Config) { c.TempRoot = root })
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("stale TMPDIR of a dead agent kept (err %v)", err)
	}
	for _, d := range []string{live, other} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s removed: %v", d, err)
		}
	}
}

// Resources: start and finish times around the run, the wall time and a
// peak memory with its source.
func TestOutcomeCarriesResources(t *testing.T) {
	forEachMode(t, func(t *testing.T, s *Supervisor) {
		before := time.Now()
		out := run(t, s, "echo")
		after := time.Now()
		wantOutcome(t, out, ProofChildReaped, "")
		if out.StartTime.Before(before) || out.FinishTime.After(after) || !out.StartTime.Before(out.FinishTime) {
			t.Errorf("start %v finish %v, want within [%v, %v] and ordered", out.StartTime, out.FinishTime, before, after)
		}
		if out.PeakMemoryBytes <= 0 {
			t.Errorf("peak memory %d, want > 0", out.PeakMemoryBytes)
		}
		switch {
		case s.cg == nil && out.PeakMemorySource != PeakFromRusage:
			t.Errorf("peak memory source %q without a cgroup, want %q", out.PeakMemorySource, PeakFromRusage)
		case s.cg != nil && !s.cg.v2 && out.PeakMemorySource != PeakFromCgroup:
			t.Errorf("peak memory source %q on cgroup v1, want %q", out.PeakMemorySource, PeakFromCgroup)
		case out.PeakMemorySource != PeakFromCgroup && out.PeakMemorySource != PeakFromRusage:
			t.Errorf("peak memory source %q", out.PeakMemorySource)
		}
	})
}
