// Package cgexec is the cgroup v1 placement helper's entry point.
//
// cgroup v1 has no clone-into-cgroup, and moving a worker after fork leaves
// it running unconstrained for a moment. So on v1 the child the supervisor
// forks is not the worker but the host binary again ("/proc/self/exe", so an
// upgraded or deleted binary still works) with a hidden argv[1] (Arg).
// Before any worker code exists, the helper writes its own pid into the
// invocation's memory and pids cgroup.procs (file descriptors JoinFD...,
// opened by the supervisor), then execve()s the worker in place: same pid,
// same process group, same Pdeathsig, stdin/stdout/stderr untouched. The
// worker's first instruction already runs inside the limits.
//
// File descriptor StatusFD is a close-on-exec status pipe: a successful
// execve closes it with nothing written; a failure (cgroup join, exec) is
// written there before the helper exits. Bytes on that pipe therefore prove
// the worker program never started (NEVER_LAUNCHED).
//
// The helper runs from this package's init, which is why the package
// imports nothing but os, strconv and syscall: Go initializes packages in
// import-path order, each after its imports, so this one runs right after
// those three — before the host binary's heavy initializations (Prometheus,
// protobuf, zap, cobra, the AWS SDK), which a helper that becomes the worker
// a moment later would pay for nothing, on every job. The supervisor
// imports this package, so every binary that hosts a Supervisor has it.
package cgexec

import (
	"os"
	"strconv"
	"syscall"
)

// The helper's argv[1], its modes and its file descriptors.
const (
	Arg       = "__lancemaster-supervisor-helper__"
	ModeRun   = "run"
	ModeProbe = "probe"
	// OK is what a probe writes on the status pipe once it joined.
	OK = "ok"

	StatusFD = 3
	JoinFD   = 4
	// MaxJoin bounds the cgroup files a helper joins.
	MaxJoin = 8
)

func init() {
	if IsHelper(os.Args) {
		os.Exit(Run(os.Args[2:]))
	}
}

// IsHelper reports whether argv is a helper's.
func IsHelper(argv []string) bool { return len(argv) >= 2 && argv[1] == Arg }

// Argv is the helper's argv for mode: join nJoin cgroup files, then (run)
// execve path with argv.
func Argv(mode string, nJoin int, path string, argv []string) []string {
	return append([]string{"lancemaster-supervisor-helper", Arg, mode, strconv.Itoa(nJoin), path}, argv...)
}

// Run is the helper: args = mode, number of cgroup fds, then for "run" the
// worker's path and argv. It returns an exit code only when it did not
// become the worker.
func Run(args []string) int {
	report := func(msg string, code int) int {
		_, _ = syscall.Write(StatusFD, []byte(msg))
		return code
	}
	if len(args) < 2 {
		return report("helper: bad arguments", 126)
	}
	n, err := strconv.Atoi(args[1])
	if err != nil || n < 0 || n > MaxJoin {
		return report("helper: bad arguments", 126)
	}
	pid := []byte(strconv.Itoa(os.Getpid()))
	for i := 0; i < n; i++ {
		if _, err := syscall.Write(JoinFD+i, pid); err != nil {
			return report("cgroup join: "+err.Error(), 125)
		}
		_ = syscall.Close(JoinFD + i)
	}
	switch {
	case args[0] == ModeProbe:
		return report(OK, 0)
	case args[0] != ModeRun || len(args) < 4:
		return report("helper: bad arguments", 126)
	}
	syscall.CloseOnExec(StatusFD)
	err = syscall.Exec(args[2], args[3:], os.Environ())
	return report("exec: "+err.Error(), 127)
}
