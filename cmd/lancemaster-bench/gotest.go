package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// benchLine is one result line of `go test -bench`:
//
//	BenchmarkName-2   	      10	 123456 ns/op	  512.0 B/job	  24 allocs/op
type benchLine struct {
	Name    string             `json:"name"` // without the Benchmark prefix and -GOMAXPROCS suffix
	Procs   int                `json:"procs,omitempty"`
	N       int                `json:"n"`
	Metrics map[string]float64 `json:"metrics"` // unit -> value
}

var benchLineRE = regexp.MustCompile(`^Benchmark(\S+?)(?:-(\d+))?\s+(\d+)\s+(.+)$`)

// parseBenchOutput extracts the result lines; anything else (PASS, ok, logs)
// is ignored.
func parseBenchOutput(out []byte) []benchLine {
	var lines []benchLine
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		m := benchLineRE.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil {
			continue
		}
		n, err := strconv.Atoi(m[3])
		if err != nil {
			continue
		}
		bl := benchLine{Name: m[1], N: n, Metrics: map[string]float64{}}
		bl.Procs, _ = strconv.Atoi(m[2])
		f := strings.Fields(m[4])
		for i := 0; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				break
			}
			bl.Metrics[f[i+1]] = v
		}
		if len(bl.Metrics) > 0 {
			lines = append(lines, bl)
		}
	}
	return lines
}

// goTestBench runs `go test -run '^$' -bench pattern -benchtime benchtime
// pkg` in the module root and returns the parsed lines (and the raw output
// for error messages). extraEnv is added to the child's environment.
func goTestBench(ctx context.Context, pkg, pattern, benchtime string, timeout time.Duration, extraEnv []string) ([]benchLine, []byte, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	root, err := moduleRoot(ctx, goBin)
	if err != nil {
		return nil, nil, err
	}
	args := []string{"test", "-run", "^$", "-bench", pattern, "-benchtime", benchtime,
		"-count", "1", "-timeout", timeout.String(), pkg}
	cmd := exec.CommandContext(ctx, goBin, args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), extraEnv...)
	// Its own process group, so that the test binary go starts is ended
	// with it (on timeout, or when this program is interrupted).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	childPgid.Store(int64(cmd.Process.Pid))
	err = cmd.Wait()
	childPgid.Store(0)
	out := buf.Bytes()
	lines := parseBenchOutput(out)
	if err != nil {
		return lines, out, fmt.Errorf("go %s: %w", strings.Join(args, " "), err)
	}
	return lines, out, nil
}

// childPgid is the process group of the running go test, 0 when none.
var childPgid atomic.Int64

// children are the process groups of other running children (the etcd
// members), each its own group.
var children struct {
	sync.Mutex
	pgids map[int]bool
}

func trackChild(pgid int) {
	children.Lock()
	defer children.Unlock()
	if children.pgids == nil {
		children.pgids = map[int]bool{}
	}
	children.pgids[pgid] = true
}

func untrackChild(pgid int) {
	children.Lock()
	defer children.Unlock()
	delete(children.pgids, pgid)
}

// killChild ends the running go test and its test binary, and every
// tracked child, if any.
func killChild() {
	if pg := childPgid.Load(); pg > 0 {
		syscall.Kill(-int(pg), syscall.SIGKILL)
	}
	children.Lock()
	defer children.Unlock()
	for pg := range children.pgids {
		syscall.Kill(-pg, syscall.SIGKILL)
	}
}

// moduleRoot is the directory of the main module's go.mod.
func moduleRoot(ctx context.Context, goBin string) (string, error) {
	out, err := exec.CommandContext(ctx, goBin, "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("not inside the lancemaster module (run from the repository)")
	}
	return filepath.Dir(gomod), nil
}

// tail returns the last n lines of out, for an error message.
func tail(out []byte, n int) string {
	ls := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, "\n")
}
