package supervisor

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/pkg/backend/frame"
)

const parentEnv = "LM_SUPERVISOR_TEST_PARENT"

// A child the agent starts by other means (same session as the agent) is
// not an orphan: sweeps leave it alone and its own Wait still works.
func TestForeignChildSurvivesSweeps(t *testing.T) {
	forEachMode(t, func(t *testing.T, s *Supervisor) {
		exe, _ := os.Executable()
		foreign := exec.Command(exe)
		foreign.Env = []string{workerEnv + "=sleeper", "GORACE=atexit_sleep_ms=0"}
		if err := foreign.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = foreign.Process.Kill(); _ = foreign.Wait() })
		out := run(t, s, "linger") // its escapee makes the sweep work
		wantOutcome(t, out, ProofChildReaped, "")
		st, err := readStat(foreign.Process.Pid)
		if err != nil || st.state == 'Z' {
			t.Fatalf("the agent's own child was killed or reaped by a sweep: %v %c", err, st.state)
		}
		_ = foreign.Process.Kill()
		var ee *exec.ExitError
		if err := foreign.Wait(); !errors.As(err, &ee) {
			t.Fatalf("Wait on the agent's own child: %v (its status was stolen)", err)
		}
		assertClean(t, s, out)
	})
}

// Supervisors of one process share the subreaper: one's sweeps and another's
// start-up leave the others' workers alone.
func TestSupervisorsShareTheProcess(t *testing.T) {
	forEachMode(t, func(t *testing.T, a *Supervisor) {
		b := newSupervisor(t, modeCases[0])
		req := request(t, "hang-ready")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan Outcome, 1)
		go func() { done <- b.Run(ctx, req, time.Now().Add(time.Minute)) }()
		<-awaitFile(filepath.Join(req.DatasetURI, "ready"), 30*time.Second)
		for i := 0; i < 3; i++ {
			if out := run(t, a, "linger"); out.Proof != ProofChildReaped || out.Result == nil {
				t.Fatalf("linger: %+v", out)
			}
			if _, err := New(baseConfig(t)); err != nil {
				t.Fatal(err)
			}
		}
		select {
		case out := <-done:
			t.Fatalf("the other supervisor's worker was disturbed: %+v", out)
		default:
		}
		cancel()
		out := <-done
		wantOutcome(t, out, ProofChildReaped, "canceled")
		if out.Signal != "SIGTERM" {
			t.Errorf("signal %q, want SIGTERM", out.Signal)
		}
		assertClean(t, b, out)
	})
}

// SIGKILL to the supervising process kills the worker (Pdeathsig, set on
// the locked thread that forked it and kept across the v1 helper's execve),
// while thread churn in that process before the kill does not.
func TestWorkerDiesWithSupervisor(t *testing.T) {
	newSupervisor(t, modeCases[0]) // skips without cgroups; sets up the cleanup
	dir := t.TempDir()
	exe, _ := os.Executable()
	parent := exec.Command(exe, "-test.run=^$")
	parent.Env = []string{tokenEnv + "=" + token, "GORACE=atexit_sleep_ms=0", parentEnv + "=" + dir}
	parent.Stderr = os.Stderr
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = parent.Process.Kill(); _ = parent.Wait() })
	<-awaitFile(filepath.Join(dir, "churned"), 30*time.Second)
	var workerPid int
	for _, p := range tokenProcs() {
		if st, err := readStat(p); err == nil && st.ppid == parent.Process.Pid && st.state != 'Z' {
			workerPid = p
		}
	}
	if workerPid == 0 {
		t.Fatal("no live worker under the supervising process after its thread churn")
	}
	_ = parent.Process.Kill()
	_ = parent.Wait()
	dead := false
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end) && !dead; time.Sleep(5 * time.Millisecond) {
		st, err := readStat(workerPid)
		dead = err != nil || st.state == 'Z'
	}
	if !dead {
		t.Fatalf("worker %d survived its supervisor: %v", workerPid, describe([]int{workerPid}))
	}
	killLeftovers()
	// The dead agent's empty cgroup is what the next New removes.
	cfg := baseConfig(t)
	s2, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range s2.cg.dirs() {
		if m, _ := filepath.Glob(filepath.Join(d, cgroupPrefix+strconv.Itoa(parent.Process.Pid)+"-*")); len(m) > 0 {
			t.Errorf("stale cgroups of the dead agent left: %v", m)
		}
	}
}

// parentMain is the supervising process of TestWorkerDiesWithSupervisor.
func parentMain(dir string) {
	exe, _ := os.Executable()
	env := []string{workerEnv + "=1", tokenEnv + "=" + os.Getenv(tokenEnv), "GORACE=atexit_sleep_ms=0", "PATH=/usr/bin:/bin"}
	s, err := New(Config{Command: []string{exe}, Env: env, KillGrace: time.Second})
	if err != nil || !s.Verified() {
		os.Exit(4)
	}
	req := &frame.Request{Protocol: frame.Protocol, Mode: frame.ModeBuild, DatasetURI: dir, IndexName: "ignore-term"}
	go s.Run(context.Background(), req, time.Now().Add(time.Minute))
	for {
		if _, err := os.Stat(filepath.Join(dir, "ready")); err == nil {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	// Threads come and go: a locked goroutine that returns ends its thread.
	for i := 0; i < 32; i++ {
		done := make(chan struct{})
		go func() { runtime.LockOSThread(); close(done) }()
		<-done
	}
	runtime.GC()
	time.Sleep(50 * time.Millisecond) // give a misplaced Pdeathsig time to fire
	_ = os.WriteFile(filepath.Join(dir, "churned"), nil, 0o644)
	time.Sleep(time.Hour)
}
