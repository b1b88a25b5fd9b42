package supervisor

import (
	"errors"
	"os"
	"runtime"
	"syscall"
	"time"
	"unsafe"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// child is a spawned worker leader; its pid is also the id of its session
// and of its process group.
type child struct {
	pid      int
	exited   chan struct{} // closed once the leader has exited (still unreaped)
	exitedAt time.Time     // set before exited is closed
	code     int32         // si_code of the exit: CLD_EXITED, CLD_KILLED, CLD_DUMPED; 0 = lost
	status   int32         // exit status or signal number
}

// sigchldInfo is siginfo_t for SIGCHLD on 64-bit Linux (x/sys keeps the
// union opaque): the pid, uid and status follow the three ints and padding.
// The guards below stop a build where the layout would differ.
type sigchldInfo struct {
	Signo, Errno, Code, _ int32
	Pid                   int32
	UID                   uint32
	Status                int32
	_                     [100]byte
}

var _ [unsafe.Sizeof(unix.Siginfo{}) - unsafe.Sizeof(sigchldInfo{})]byte // same size
var _ [unsafe.Sizeof(sigchldInfo{}) - unsafe.Sizeof(unix.Siginfo{})]byte
var _ [unsafe.Sizeof(uintptr(0)) - 8]byte // 64-bit only

// spawn forks and execs one child in a session and process group of its
// own. The fork and
// the whole life of the child happen on one locked OS thread, because
// Pdeathsig fires when the forking *thread* exits, not the process. The
// goroutine waits for the child's exit with WNOWAIT, so the leader stays a
// zombie — pinning its pid, session and process group ids — until finish
// reaps it.
// A non-nil error means no child process exists any more (the kernel never
// created it, or it failed before its execve and Go reaped it).
func (s *Supervisor) spawn(argv0 string, argv, env []string, dir string, files []uintptr, cgroupFD int) (*child, error) {
	c := &child{exited: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// Setsid: a new session and process group, both with the child's pid
		// as id. No descendant can ever re-enter the agent's session, which
		// is how sweep tells worker orphans from the agent's other children.
		sys := &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
		if cgroupFD >= 0 {
			sys.UseCgroupFD, sys.CgroupFD = true, cgroupFD
		}
		reg.spawnMu.RLock()
		pid, err := syscall.ForkExec(argv0, argv, &syscall.ProcAttr{Dir: dir, Env: env, Files: files, Sys: sys})
		if err == nil {
			c.pid = pid
			register(pid)
		}
		reg.spawnMu.RUnlock()
		started <- err
		if err != nil {
			runtime.UnlockOSThread()
			return
		}
		var si sigchldInfo
		for {
			err := unix.Waitid(unix.P_PID, pid, (*unix.Siginfo)(unsafe.Pointer(&si)), unix.WEXITED|unix.WNOWAIT, nil)
			if !errors.Is(err, unix.EINTR) {
				if err == nil {
					c.code, c.status = si.Code, si.Status
				}
				break
			}
		}
		c.exitedAt = time.Now()
		close(c.exited)
		// The child is dead: the thread may go back to the scheduler.
		runtime.UnlockOSThread()
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return c, nil
}

// sweep SIGKILLs and reaps the worker orphans among this process's
// children. As child subreaper the agent inherits whatever a worker leaves
// behind, setsid escapees included, once their parents die. An orphan is a
// child that is not a registered leader and is not in the agent's own
// session: every worker starts a session of its own and no descendant can
// rejoin the agent's, so children the agent starts by other means are left
// alone. It returns how many orphans it saw; 0 means there were none at that
// instant, with no spawn in flight.
func (s *Supervisor) sweep() int {
	reg.spawnMu.Lock()
	defer reg.spawnMu.Unlock()
	own, err := unix.Getsid(0)
	if err != nil {
		return 1 // unknown: never report a clean sweep
	}
	kids, err := scanProcs(func(_ int, st procStat) bool { return st.ppid == os.Getpid() && st.session != own })
	if err != nil {
		return 1
	}
	n := 0
	for _, k := range kids {
		if isLeader(k) {
			continue
		}
		n++
		// k is our unreaped child: its pid cannot be recycled under us.
		_ = syscall.Kill(k, syscall.SIGKILL)
		var ws syscall.WaitStatus
		_, _ = syscall.Wait4(k, &ws, syscall.WNOHANG, nil)
	}
	return n
}

// reapLeader reaps an exited leader and unregisters it atomically with
// respect to sweeps and spawns, so its pid is never misattributed.
func reapLeader(pid int) (ru syscall.Rusage, ok bool) {
	reg.spawnMu.Lock()
	defer reg.spawnMu.Unlock()
	var ws syscall.WaitStatus
	wpid, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, &ru)
	switch {
	case wpid == pid:
		delete(reg.leaders, pid)
		return ru, true
	case errors.Is(err, syscall.ECHILD):
		delete(reg.leaders, pid) // reaped behind our back: nothing is provable
	}
	return ru, false
}

type finishResult struct {
	clean  bool // the group, the cgroup and our orphans were all empty
	proof  bool // and after reaping the leader: group gone, pids 0, cgroup removed
	ru     syscall.Rusage
	reaped bool
	detail string
	oom    bool  // the cgroup saw an OOM kill
	peak   int64 // the cgroup's peak memory
}

// finish runs after the leader has exited. While the unreaped leader pins
// its pid — the id of its session and process group — it SIGKILLs the
// group, the session's other groups and the cgroup and sweeps orphans, until
// a pass finds no session member besides the leader, an empty cgroup and no
// orphan. Only then does it reap the leader and check the proofs:
// kill(-pgid, 0) == ESRCH and no session member left, pids.current == 0
// (zombies included) and the cgroup directory removed. If the budget runs out first it returns
// without reaping (the group stays pinned) unless lastTry is set.
func (s *Supervisor) finish(c *child, cg *invCgroup, budget time.Duration, lastTry bool) finishResult {
	<-c.exited
	var r finishResult
	end := time.Now().Add(budget)
	backoff := time.Millisecond
	for {
		_ = syscall.Kill(-c.pid, syscall.SIGKILL) // pinned: cannot hit a recycled group
		signalSession(c.pid, syscall.SIGKILL)
		if cg != nil {
			cg.kill()
		}
		orphans := s.sweep()
		members, err := sessionMembers(c.pid, c.pid)
		if orphans == 0 && err == nil && len(members) == 0 && (cg == nil || cg.empty()) {
			r.clean = true
			break
		}
		if time.Now().After(end) {
			r.detail = "processes survived SIGKILL"
			if !lastTry {
				return r
			}
			break
		}
		time.Sleep(backoff)
		backoff = min(2*backoff, 50*time.Millisecond)
	}
	if c.code == 0 {
		r.detail = "leader status lost"
	}
	r.ru, r.reaped = reapLeader(c.pid)
	left, err := sessionMembers(c.pid, -1)
	r.proof = r.clean && r.reaped && c.code != 0 && groupGone(c.pid) && err == nil && len(left) == 0
	if cg == nil {
		return r
	}
	r.oom, r.peak = cg.oomKilled(), cg.peakMemory()
	if n, ok := cg.pidsCurrent(); ok && r.proof {
		for n > 0 && time.Now().Before(end) {
			time.Sleep(backoff)
			s.sweep()
			n, _ = cg.pidsCurrent()
		}
		if n > 0 {
			r.proof, r.detail = false, "pids.current stayed above 0"
		}
	}
	for {
		err := cg.remove()
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EBUSY) || time.Now().After(end) {
			r.proof, r.detail = false, err.Error()
			break
		}
		time.Sleep(backoff)
	}
	return r
}

// finishLater keeps killing and reaping in the background after Run gave up
// waiting (a process stuck in uninterruptible sleep), so nothing leaks for
// good; it only logs.
func (s *Supervisor) finishLater(c *child, cg *invCgroup, done func()) {
	go func() {
		<-c.exited
		r := s.finish(c, cg, 5*time.Minute, true)
		if done != nil {
			done()
		}
		s.log.Warn("late cleanup of a worker finished", zap.Int("pid", c.pid), zap.Bool("everything_gone", r.proof), zap.String("detail", r.detail))
	}()
}

// signalGroup sends sig to the worker's process group, the rest of its
// session and its cgroup. The leader is unreaped (alive or zombie), so the
// ids are pinned.
func signalGroup(c *child, cg *invCgroup, sig syscall.Signal) {
	_ = syscall.Kill(-c.pid, sig)
	signalSession(c.pid, sig)
	if cg == nil {
		return
	}
	if sig == syscall.SIGKILL {
		cg.kill()
	} else {
		cg.signal(sig)
	}
}
