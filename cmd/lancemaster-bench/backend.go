package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/lancemaster/lancemaster/pkg/backend"
	"github.com/lancemaster/lancemaster/pkg/backend/frame"
	"github.com/lancemaster/lancemaster/pkg/backend/supervisor"
)

// The backend section (docs/benchmarks.md, "backend") measures the backend
// agent's own costs:
//
//  1. supervisor overhead per job: a trivial worker (this binary re-executed
//     with trivialWorkerEnv set, answering one result frame at once) run
//     through a real supervisor.Supervisor in this machine's best isolation
//     mode, against the same worker started by a bare exec.Command, run for
//     run alternately: call → first byte of the result frame (the worker
//     stamps the wall clock into the frame just before writing it) and call
//     → everything reaped (Run's return; the bare Wait's);
//  2. the agent's own memory: the real `lancemaster backend` binary (built
//     with go build into the run's temp dir) fed by a stand-in master — idle
//     after its first heartbeat, then after demo builds dispatched to it over
//     Thrift and their reports delivered — VmRSS and VmHWM from
//     /proc/PID/status, the Go heap from its /metrics;
//  3. the demo builds: make-dataset.js's 20,000 × 128 dataset, then the
//     demo's IVF_PQ and BTREE builds (inspect first, as the master admits)
//     run through a real supervisor with the builder, against the same
//     frames run by node directly: wall time and each worker's peak RSS.
//
// Parts 2 and 3 need node and builders/lancedb/node_modules (make setup);
// without them they are skipped with a line saying so, and part 1 still runs.
const (
	// trivialWorkerEnv makes this binary the trivial worker of part 1.
	trivialWorkerEnv = "LANCEMASTER_BENCH_TRIVIAL_WORKER"

	overheadRuns      = 50
	overheadRunsQuick = 10
	overheadWarmups   = 3
	overheadDeadline  = 10 * time.Second

	buildReps        = 5 // each demo build, supervised and bare
	buildRepsQuick   = 1
	typeReps         = 2 // each other index type, supervised and bare (HNSW_PQ takes ~20 s)
	agentRounds      = 2 // rounds of the two demo builds sent to the agent
	agentRoundsQuick = 1

	demoRows, demoDim = 20000, 128
	// buildTimeout bounds one build or inspect (a normal one takes ~1 s).
	buildTimeout = 2 * time.Minute
	// hwmEvery is how often a worker's VmHWM is sampled.
	hwmEvery = 5 * time.Millisecond
)

// backendResult is the section's detail in -json.
type backendResult struct {
	Mode     string          `json:"supervisor_mode"`
	Verified bool            `json:"isolation_verified"`
	Reason   string          `json:"cgroups_off_reason,omitempty"`
	Overhead *overheadResult `json:"overhead,omitempty"`
	Agent    *agentResult    `json:"agent,omitempty"`
	Builds   *buildsResult   `json:"demo_builds,omitempty"`
	Skipped  string          `json:"skipped,omitempty"`
}

// backendEnv is what parts 2 and 3 need: node, the builder and the module.
type backendEnv struct {
	root    string // module root
	goBin   string
	node    string
	builder string // builders/lancedb/builder.js
	workEnv []string
}

func runBackendSection(o *options, rep *report) {
	res := &backendResult{}
	rep.Backend = res
	dir := filepath.Join(o.tmp, "backend")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		rep.fail(secBackend, err)
		return
	}

	t := time.Now()
	ov, err := runOverhead(o, res)
	rep.Sections["backend_overhead"] = time.Since(t).Seconds()
	rep.add(row{Section: secBackend, Figure: "supervisor isolation mode", Note: modeNote(res)})
	if err != nil {
		rep.fail(secBackend, fmt.Errorf("supervisor overhead: %w", err))
	} else {
		res.Overhead = ov
		progress("backend: trivial worker, %s: call → first frame byte p50 %.2f ms (bare exec %.2f), whole job p50 %.2f ms (bare %.2f)",
			res.Mode, ov.Sup.FirstByte.P50Ms, ov.Bare.FirstByte.P50Ms, ov.Sup.Job.P50Ms, ov.Bare.Job.P50Ms)
		rep.add(overheadRows(ov)...)
	}

	env, why := findBackendEnv()
	if why != "" {
		res.Skipped = why
		progress("backend: demo builds and agent memory SKIPPED: %s", why)
		rep.add(row{Section: secBackend, Figure: "demo builds, agent memory (skipped)", Note: why})
		return
	}

	t = time.Now()
	pristine := filepath.Join(dir, "pristine")
	uri, err := writeDemoDataset(env, pristine)
	rep.Sections["backend_dataset"] = time.Since(t).Seconds()
	if err != nil {
		rep.fail(secBackend, fmt.Errorf("demo dataset: %w", err))
		return
	}
	progress("backend: demo dataset %d × %d written in %.1f s", demoRows, demoDim, time.Since(t).Seconds())

	t = time.Now()
	ag, err := runAgentMemory(o, env, dir, uri)
	rep.Sections["backend_agent"] = time.Since(t).Seconds()
	res.Agent = ag
	if err != nil {
		if ag != nil {
			for _, l := range ag.Log {
				progress("  agent log: %s", clip(l, 300))
			}
		}
		rep.fail(secBackend, fmt.Errorf("agent memory: %w", err))
	} else {
		progress("backend: lancemaster backend VmRSS idle %.1f MiB, after %d builds %.1f MiB (VmHWM %.1f MiB)",
			mib(ag.Idle.RSSBytes), ag.Builds, mib(ag.After.RSSBytes), mib(ag.After.HWMBytes))
		rep.add(agentRows(ag)...)
	}

	t = time.Now()
	bs, err := runDemoBuilds(o, env, dir, uri)
	rep.Sections["backend_builds"] = time.Since(t).Seconds()
	res.Builds = bs
	if err != nil {
		rep.fail(secBackend, fmt.Errorf("demo builds: %w", err))
	}
	if bs != nil && len(bs.Kinds) > 0 {
		for _, k := range bs.Kinds {
			progress("backend: %s: supervised %s, bare %s; peak RSS %s vs %s MiB", k.Name,
				k.Sup.WallMs.String("ms"), k.Bare.WallMs.String("ms"), sig(k.Sup.PeakMiB.Median, 3), sig(k.Bare.PeakMiB.Median, 3))
		}
		rep.add(buildRows(bs, res.Mode)...)
	}

	t = time.Now()
	more, err := runMoreBuilds(o, env, dir, uri)
	rep.Sections["backend_more"] = time.Since(t).Seconds()
	if err != nil {
		rep.fail(secBackend, fmt.Errorf("S3 and OPTIMIZE builds: %w", err))
	}
	if more != nil {
		rep.add(moreRows(more)...)
	}
}

func modeNote(r *backendResult) string {
	switch {
	case r.Mode == "":
		return "unknown (the supervisor could not be created)"
	case r.Mode == supervisor.ModeProcessGroup:
		return r.Mode + ": no usable cgroups (" + clip(r.Reason, 100) + "); process group and subreaper only, best-effort"
	default:
		return r.Mode + ", verified: per-invocation memory and pids limits (1 GiB, 256), process group, subreaper"
	}
}

// findBackendEnv locates node, the builder and its node_modules; why says
// what is missing.
func findBackendEnv() (*backendEnv, string) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	root, err := moduleRoot(ctx, goBin)
	if err != nil {
		return nil, err.Error()
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, "node is not in PATH (install node >= 20, then make setup)"
	}
	dir := filepath.Join(root, "builders", "lancedb")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@lancedb", "lancedb")); err != nil {
		return nil, "builders/lancedb/node_modules is missing (run make setup)"
	}
	return &backendEnv{root: root, goBin: goBin, node: node, builder: filepath.Join(dir, "builder.js"),
		workEnv: backend.DefaultFileConfig().WorkerEnviron(os.Getenv("PATH"))}, ""
}

// writeDemoDataset runs make-dataset.js as demo.sh does and returns the
// dataset's URI.
func writeDemoDataset(env *backendEnv, parent string) (string, error) {
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	script := filepath.Join(filepath.Dir(env.builder), "make-dataset.js")
	cmd := exec.CommandContext(ctx, env.node, script, parent, "items",
		"--rows", strconv.Itoa(demoRows), "--dim", strconv.Itoa(demoDim), "--extra", "--overwrite")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("node make-dataset.js: %w: %s", err, tail(stderr.Bytes(), 5))
	}
	uri := filepath.Join(parent, "items.lance")
	if !bytes.Contains(out, []byte(`"uri"`)) {
		return "", fmt.Errorf("node make-dataset.js printed no dataset: %q", clip(string(out), 200))
	}
	return uri, nil
}

// copyDataset replaces dst with a copy of the dataset directory src.
func copyDataset(src, dst string) error {
	if err := os.RemoveAll(dst); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.CopyFS(dst, os.DirFS(src))
}

// trivialWorker is this binary as part 1's worker: it reads the request
// frame, stamps the wall clock and writes its one result frame at once.
func trivialWorker() int {
	var req frame.Request
	if err := frame.Read(os.Stdin, &req, frame.MaxRequestBytes); err != nil {
		fmt.Fprintln(os.Stderr, "trivial worker:", err)
		return 2
	}
	res := frame.Result{Protocol: frame.Protocol, Mode: req.Mode, ResultCode: "NATIVE_OK",
		Message: strconv.FormatInt(time.Now().UnixNano(), 10)}
	if err := frame.Write(os.Stdout, &res, frame.MaxResultBytes); err != nil {
		return 3
	}
	return 0
}

// procStatusBytes reads the given kB fields of /proc/PID/status ("VmRSS",
// "VmHWM") in bytes; a missing field is absent from the map.
func procStatusBytes(pid int, fields ...string) (map[string]int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || !contains(fields, k) {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 2 && f[1] == "kB" {
			if n, err := strconv.ParseInt(f[0], 10, 64); err == nil {
				out[k] = n << 10
			}
		}
	}
	return out, nil
}

// hwmSampler follows one process's VmHWM (its peak RSS so far, kept by the
// kernel) every hwmEvery until stopped; find locates the process (0: not
// yet). Only growth in the last hwmEvery before exit can be missed.
type hwmSampler struct {
	stop chan struct{}
	done chan struct{}
	pid  int
	peak int64 // VmHWM
	// rss, anon and file are VmRSS, RssAnon and RssFile at the sample with
	// the largest VmRSS: how much of the peak is the worker's own memory
	// and how much file pages it maps (node, the LanceDB library), which
	// the page cache shares between workers.
	rss, anon, file int64
}

func startHWMSampler(find func() int) *hwmSampler {
	s := &hwmSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(hwmEvery)
		defer t.Stop()
		for {
			if s.pid == 0 {
				s.pid = find()
			}
			if s.pid > 0 {
				if m, err := procStatusBytes(s.pid, "VmHWM", "VmRSS", "RssAnon", "RssFile"); err == nil {
					s.peak = max(s.peak, m["VmHWM"])
					if m["VmRSS"] > s.rss {
						s.rss, s.anon, s.file = m["VmRSS"], m["RssAnon"], m["RssFile"]
					}
				}
			}
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// finish stops the sampler; peak is 0 when the process was never seen.
func (s *hwmSampler) finish() (peak, anon, file int64) {
	close(s.stop)
	<-s.done
	return s.peak, s.anon, s.file
}

// supervisedNode finds the running supervised builder: a child of this
// process in a session of its own whose program is node (in cgroup v1 mode
// the child runs this binary as the placement helper first).
func supervisedNode() int {
	self := os.Getpid()
	own, err := sessionOf(self)
	if err != nil {
		return 0
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		comm, ppid, sid, ok := parseStat(b)
		if ok && ppid == self && sid != own && comm == "node" {
			return pid
		}
	}
	return 0
}

func sessionOf(pid int) (int, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	_, _, sid, ok := parseStat(b)
	if !ok {
		return 0, errors.New("malformed /proc/PID/stat")
	}
	return sid, nil
}

// parseStat reads comm, ppid and session from /proc/PID/stat
// ("pid (comm) state ppid pgrp session ...").
func parseStat(b []byte) (comm string, ppid, sid int, ok bool) {
	i, j := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if i < 0 || j < i || j+2 >= len(b) {
		return "", 0, 0, false
	}
	f := bytes.Fields(b[j+2:])
	if len(f) < 4 {
		return "", 0, 0, false
	}
	p, err1 := strconv.Atoi(string(f[1]))
	s, err2 := strconv.Atoi(string(f[3]))
	return string(b[i+1 : j]), p, s, err1 == nil && err2 == nil
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }
