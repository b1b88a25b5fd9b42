package supervisor

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/lancemaster/lancemaster/pkg/backend/frame"
)

// token marks every process this test binary starts (it is in their
// environment), so leaks can be found whatever their pid or session.
var token = func() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}()

func baseConfig(t *testing.T) Config {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return Config{
		Command: []string{exe},
		// GORACE: a race-built worker would otherwise sleep 1 s at exit.
		Env:              []string{workerEnv + "=1", tokenEnv + "=" + token, "PATH=/usr/bin:/bin", "GORACE=atexit_sleep_ms=0"},
		Dir:              t.TempDir(),
		TempRoot:         t.TempDir(),
		MemoryLimitBytes: 512 << 20,
		PidsLimit:        256,
		Isolation:        IsolationRequired,
		KillGrace:        300 * time.Millisecond,
	}
}

// modeCase is one isolation mode the behaviour tests run under.
type modeCase struct {
	name string
	tune func(t *testing.T, c *Config) // may t.Skip when the host lacks the mode
	want string
}

var modeCases = []modeCase{
	{name: "auto", tune: func(*testing.T, *Config) {}},
	{name: "process-group", want: ModeProcessGroup, tune: func(t *testing.T, c *Config) {
		c.Isolation, c.CgroupParent = IsolationBestEffort, t.TempDir() // not a cgroup fs
	}},
	{name: "cgroup-v2-kill-only", want: ModeCgroupV2, tune: func(t *testing.T, c *Config) {
		mounts, _ := readMountInfo()
		for _, m := range mounts {
			if m.fstype == "cgroup2" {
				c.CgroupParent, c.v2WithoutLimits = m.point, true
				return
			}
		}
		t.Skip("no cgroup2 mount on this host")
	}},
}

// newSupervisor builds a Supervisor whose isolation must be verified (or
// the test is skipped with the exact reason).
func newSupervisor(t *testing.T, mc modeCase, tune ...func(*Config)) *Supervisor {
	t.Helper()
	cfg := baseConfig(t)
	mc.tune(t, &cfg)
	for _, f := range tune {
		f(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ok := s.Verified() && (mc.want == "" || s.Mode() == mc.want) && (mc.name != "auto" || s.Mode() != ModeProcessGroup)
	if !ok {
		// A skip must mean the host lacks the capability, never that the
		// supervisor failed to use it: ask the host directly.
		if why := hostLacks(mc.name); why != "" {
			t.Skipf("isolation %q unavailable here (%s): %s", mc.name, why, s.Reason())
		}
		t.Fatalf("the host offers %q but the supervisor runs %s, verified %v: %s", mc.name, s.Mode(), s.Verified(), s.Reason())
	}
	t.Cleanup(killLeftovers)
	return s
}

// hostLacks checks, independently of the supervisor, whether this host lets
// the test make cgroups for a mode; "" means it does.
func hostLacks(mode string) string {
	mounts, err := readMountInfo()
	self, err2 := selfCgroups()
	if err != nil || err2 != nil {
		return "cannot read mountinfo or /proc/self/cgroup"
	}
	try := func(dir string) string {
		d := filepath.Join(dir, "lm-host-check-"+token)
		if err := os.Mkdir(d, 0o755); err != nil {
			return "cannot create a cgroup in " + dir + ": " + err.Error()
		}
		_ = os.Remove(d)
		return ""
	}
	switch mode {
	case "process-group":
		return "" // always available
	case "cgroup-v2-kill-only":
		for _, m := range mounts {
			if m.fstype == "cgroup2" {
				return try(m.point)
			}
		}
		return "no cgroup2 mount"
	}
	for _, m := range mounts { // auto: a v2 cgroup with memory and pids, or v1 memory and pids
		if m.fstype == "cgroup2" {
			d := hostDir(m, self[""])
			if c, _ := os.ReadFile(filepath.Join(d, "cgroup.controllers")); strings.Contains(string(c), "memory") && strings.Contains(string(c), "pids") {
				return try(d)
			}
		}
	}
	mem, ok1 := v1Mount(mounts, "memory")
	pids, ok2 := v1Mount(mounts, "pids")
	if !ok1 || !ok2 {
		return "neither cgroup v2 memory+pids nor v1 memory and pids hierarchies"
	}
	if why := try(hostDir(mem, self["memory"])); why != "" {
		return why
	}
	return try(hostDir(pids, self["pids"]))
}

// forEachMode runs f under every available isolation mode.
func forEachMode(t *testing.T, f func(t *testing.T, s *Supervisor)) {
	for _, mc := range modeCases {
		t.Run(mc.name, func(t *testing.T) { f(t, newSupervisor(t, mc)) })
	}
}

func request(t *testing.T, behaviour string) *frame.Request {
	return &frame.Request{
		Protocol: frame.Protocol, Mode: frame.ModeBuild, DatasetURI: t.TempDir(),
		InvocationID: "inv-" + behaviour + "-" + strconv.FormatInt(time.Now().UnixNano(), 36),
		IndexName:    behaviour, JobID: 7,
	}
}

func run(t *testing.T, s *Supervisor, behaviour string) Outcome {
	t.Helper()
	return s.Run(context.Background(), request(t, behaviour), time.Now().Add(time.Minute))
}

// runUntilReady starts a worker, waits for its ready file, then cancels it.
func runUntilReady(t *testing.T, s *Supervisor, req *frame.Request) Outcome {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan Outcome, 1)
	go func() { done <- s.Run(ctx, req, time.Now().Add(time.Minute)) }()
	select {
	case <-awaitFile(filepath.Join(req.DatasetURI, "ready"), 30*time.Second):
	case out := <-done:
		t.Fatalf("worker ended before it was ready: %+v\nstderr: %s", out, out.Stderr)
	}
	cancel()
	return <-done
}

func awaitFile(path string, bound time.Duration) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		for end := time.Now().Add(bound); time.Now().Before(end); time.Sleep(2 * time.Millisecond) {
			if _, err := os.Stat(path); err == nil {
				return
			}
		}
	}()
	return ch
}

// tokenProcs lists live processes carrying this test binary's token.
func tokenProcs() []int {
	pids, _ := allPids()
	var out []int
	needle := []byte(tokenEnv + "=" + token)
	for _, p := range pids {
		if p == os.Getpid() {
			continue
		}
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p))
		if err == nil && bytes.Contains(env, needle) {
			out = append(out, p)
		}
	}
	return out
}

// assertClean checks, without waiting, that nothing of the run is left:
// no child (live or zombie) of the test process, no member of the worker's
// process group, no process carrying the token, no invocation cgroup.
func assertClean(t *testing.T, s *Supervisor, out Outcome) {
	t.Helper()
	if kids, _ := childrenOf(os.Getpid()); len(kids) > 0 {
		t.Errorf("children of the test process left: %v", describe(kids))
	}
	if out.PID > 0 {
		if m, _ := sessionMembers(out.PID, -1); len(m) > 0 {
			t.Errorf("process group or session %d not empty: %v", out.PID, describe(m))
		}
	}
	if p := tokenProcs(); len(p) > 0 {
		t.Errorf("worker processes left: %v", describe(p))
	}
	if s.cg != nil {
		for _, d := range s.cg.dirs() {
			m, _ := filepath.Glob(filepath.Join(d, fmt.Sprintf("%s%d-*", cgroupPrefix, os.Getpid())))
			if len(m) > 0 {
				t.Errorf("invocation cgroups left: %v", m)
			}
		}
	}
}

func describe(pids []int) []string {
	var out []string
	for _, p := range pids {
		st, err := readStat(p)
		out = append(out, fmt.Sprintf("%d(state=%c ppid=%d pgrp=%d err=%v)", p, st.state, st.ppid, st.pgrp, err))
	}
	return out
}

// killLeftovers is the safety net run after every test, passing or not.
func killLeftovers() {
	for _, p := range tokenProcs() {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		kids, _ := childrenOf(os.Getpid())
		if len(kids) == 0 {
			return
		}
		for _, k := range kids {
			_ = syscall.Kill(k, syscall.SIGKILL)
			var ws syscall.WaitStatus
			_, _ = syscall.Wait4(k, &ws, syscall.WNOHANG, nil)
		}
	}
}

var sleeperLine = regexp.MustCompile(`sleeper (\d+) (group|setpgid|setsid)`)

// sleeperPids parses the pids a worker reported on stderr, and how many
// left the worker's process group (setpgid) or session (setsid).
func sleeperPids(stderr []byte) (pids []int, escaped int) {
	for _, m := range sleeperLine.FindAllSubmatch(stderr, -1) {
		p, _ := strconv.Atoi(string(m[1]))
		pids = append(pids, p)
		if string(m[2]) != "group" {
			escaped++
		}
	}
	return pids, escaped
}

func assertGone(t *testing.T, pids []int) {
	t.Helper()
	for _, p := range pids {
		st, err := readStat(p)
		if err != nil {
			continue // gone
		}
		env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p))
		if bytes.Contains(env, []byte(token)) || (st.state == 'Z' && st.ppid == os.Getpid()) {
			t.Errorf("descendant %d still exists: %v", p, describe([]int{p}))
		}
	}
}

func wantOutcome(t *testing.T, out Outcome, proof Proof, failure string) {
	t.Helper()
	if out.Proof != proof || out.Failure != failure {
		t.Fatalf("got proof %v failure %q, want %v %q (exit %d signal %q)\nstderr tail: %s",
			out.Proof, out.Failure, proof, failure, out.ExitCode, out.Signal, tail(out.Stderr))
	}
	if failure != "" && out.Result != nil {
		t.Fatalf("a result was trusted despite %q: %+v", failure, out.Result)
	}
}

func tail(b []byte) string {
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}

func observedLogger() (*zap.Logger, *observer.ObservedLogs) {
	core, logs := observer.New(zap.DebugLevel)
	return zap.New(core), logs
}
