package supervisor

// The cgroup v1 placement helper lives in package cgexec (its init runs it
// before the host binary's heavy package initializations); this file starts
// and probes it.

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/lancemaster/lancemaster/pkg/backend/supervisor/cgexec"
)

// MaybeRunHelper runs the cgroup v1 placement helper when the binary was
// re-executed as one (it then never returns), else returns at once. The
// helper normally runs earlier, from package cgexec's init, which every
// binary hosting a Supervisor has (this package imports it): calling
// MaybeRunHelper first thing in main() is harmless and keeps a host that
// initializes the supervisor some other way correct.
func MaybeRunHelper() {
	if cgexec.IsHelper(os.Args) {
		os.Exit(cgexec.Run(os.Args[2:]))
	}
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

// selfExe is the host binary the helper runs in: this process's own
// executable, even after an upgrade replaced or deleted the file.
var selfExe = "/proc/self/exe"

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
	ch, err := s.spawn(selfExe, cgexec.Argv(cgexec.ModeProbe, len(join), "", nil), s.cfg.Env, s.cfg.Dir, files, -1)
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
	if status != cgexec.OK {
		if status == "" {
			return errors.New("the cgroup v1 re-exec helper did not answer: the host binary does not run it (it must import package supervisor, whose cgexec runs it at start, or call supervisor.MaybeRunHelper first thing in main)")
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
