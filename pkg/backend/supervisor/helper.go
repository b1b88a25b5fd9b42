package supervisor

// The cgroup v1 placement helper.
//
// cgroup v1 has no clone-into-cgroup, and moving a worker after fork leaves
// it running unconstrained for a moment. So on v1 the child the supervisor
// forks is not the worker but this binary again ("/proc/self/exe", so an
// upgraded or deleted binary still works), with a hidden argv[1]. Before any
// worker code exists, the helper writes its own pid into the invocation's
// memory and pids cgroup.procs (file descriptors 4 and 5, opened by the
// supervisor), then execve()s the worker in place: same pid, same process
// group, same Pdeathsig, stdin/stdout/stderr untouched. The worker's first
// instruction already runs inside the limits.
//
// File descriptor 3 is a close-on-exec status pipe: a successful execve
// closes it with nothing written; a failure (cgroup join, exec) is written
// there before the helper exits. Bytes on that pipe therefore prove the
// worker program never started (NEVER_LAUNCHED).

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

const (
	helperArg   = "__lancemaster-supervisor-helper__"
	helperRun   = "run"
	helperProbe = "probe"
	helperOK    = "ok"

	helperStatusFD = 3
	helperJoinFD   = 4
)

// MaybeRunHelper must be the first statement of main() in any binary that
// creates a Supervisor (and of TestMain in its tests). In a normal start it
// returns at once. When the binary was re-executed as the supervisor's
// cgroup v1 placement helper it never returns: it joins the cgroup and
// becomes the worker, or exits.
func MaybeRunHelper() {
	if len(os.Args) < 2 || os.Args[1] != helperArg {
		return
	}
	os.Exit(runHelper(os.Args[2:]))
}

// runHelper: args = mode, number of cgroup fds, then for "run" the worker's
// path and argv.
func runHelper(args []string) int {
	report := func(msg string, code int) int {
		_, _ = syscall.Write(helperStatusFD, []byte(msg))
		return code
	}
	if len(args) < 2 {
		return report("helper: bad arguments", 126)
	}
	n, err := strconv.Atoi(args[1])
	if err != nil || n < 0 || n > 8 {
		return report("helper: bad arguments", 126)
	}
	pid := []byte(strconv.Itoa(os.Getpid()))
	for i := 0; i < n; i++ {
		if _, err := syscall.Write(helperJoinFD+i, pid); err != nil {
			return report("cgroup join: "+err.Error(), 125)
		}
		_ = syscall.Close(helperJoinFD + i)
	}
	switch {
	case args[0] == helperProbe:
		return report(helperOK, 0)
	case args[0] != helperRun || len(args) < 4:
		return report("helper: bad arguments", 126)
	}
	syscall.CloseOnExec(helperStatusFD)
	err = syscall.Exec(args[2], args[3:], os.Environ())
	return report("exec: "+err.Error(), 127)
}

// helperArgv is the helper's argv for the given mode.
func helperArgv(mode string, nJoin int, path string, argv []string) []string {
	return append([]string{"lancemaster-supervisor-helper", helperArg, mode, strconv.Itoa(nJoin), path}, argv...)
}

// readStatus reads the helper's status pipe to EOF (bounded by timeout).
func readStatus(f *os.File, timeout time.Duration) string {
	_ = f.SetReadDeadline(time.Now().Add(timeout))
	buf := make([]byte, 0, 256)
	tmp := make([]byte, 256)
	for len(buf) < 4096 {
		n, err := f.Read(tmp)
		buf = append(buf, tmp[:n]...)
		if err != nil {
			break
		}
	}
	return string(buf)
}

// probeHelper runs the helper once in probe mode inside test group c: it
// proves MaybeRunHelper is wired into main and that a child can join.
func (s *Supervisor) probeHelper(c *invCgroup) error {
	join, err := c.joinFiles()
	if err != nil {
		return err
	}
	defer closeAll(join)
	statusR, statusW, err := pipe(true)
	if err != nil {
		return err
	}
	defer statusR.Close()
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		statusW.Close()
		return err
	}
	defer null.Close()
	files := []uintptr{null.Fd(), null.Fd(), null.Fd(), statusW.Fd()}
	for _, f := range join {
		files = append(files, f.Fd())
	}
	ch, err := s.spawn("/proc/self/exe", helperArgv(helperProbe, len(join), "", nil), s.cfg.Env, s.cfg.Dir, files, -1)
	statusW.Close()
	if err != nil {
		return fmt.Errorf("start the cgroup v1 re-exec helper: %w", err)
	}
	status := readStatus(statusR, 10*time.Second)
	select {
	case <-ch.exited:
	case <-time.After(5 * time.Second):
		signalGroup(ch, nil, syscall.SIGKILL) // not our helper: main() runs instead
	}
	res := s.finish(ch, nil, 10*time.Second, true)
	if status != helperOK {
		if status == "" {
			return errors.New("the cgroup v1 re-exec helper did not answer: main() must call supervisor.MaybeRunHelper() first")
		}
		return errors.New("cgroup v1 re-exec helper: " + status)
	}
	if !res.proof {
		return errors.New("cgroup v1 re-exec helper: could not reap the probe")
	}
	return nil
}

func closeAll(fs []*os.File) {
	for _, f := range fs {
		f.Close()
	}
}
