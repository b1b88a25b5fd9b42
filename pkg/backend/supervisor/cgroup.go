package supervisor

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// cgroupPrefix + "<agent pid>-<seq>" names a per-invocation cgroup.
const cgroupPrefix = "lancemaster-"

// cgroupBackend is where per-invocation cgroups are made: one directory on
// cgroup v2, or a memory and a pids directory on cgroup v1.
type cgroupBackend struct {
	v2              bool
	dir             string // v2 parent
	memDir, pidsDir string // v1 parents
	memLimit        int64
	pidsLimit       int64
	limits          bool // false only in tests (v2 without controllers)
}

func (b *cgroupBackend) modeName() string {
	if b.v2 {
		return ModeCgroupV2
	}
	return ModeCgroupV1
}

// dirs are the parent directories (v1 hierarchies mounted together share one).
func (b *cgroupBackend) dirs() []string {
	if b.v2 {
		return []string{b.dir}
	}
	if b.memDir == b.pidsDir {
		return []string{b.memDir}
	}
	return []string{b.memDir, b.pidsDir}
}

func (b *cgroupBackend) parents() []string { return b.dirs() }

// invCgroup is one invocation's cgroup (one directory per hierarchy).
type invCgroup struct {
	b    *cgroupBackend
	dirs []string // v1: memory first, then pids (if separate); v2: one
}

func (c *invCgroup) memDir() string  { return c.dirs[0] }
func (c *invCgroup) pidsDir() string { return c.dirs[len(c.dirs)-1] }

// create makes the invocation's cgroup and sets its limits; on any error it
// removes what it made.
func (b *cgroupBackend) create(name string) (*invCgroup, error) {
	c := &invCgroup{b: b}
	for _, parent := range b.dirs() {
		d := filepath.Join(parent, name)
		if err := os.Mkdir(d, 0o755); err != nil {
			_ = c.remove()
			return nil, fmt.Errorf("create cgroup: %w", err)
		}
		c.dirs = append(c.dirs, d)
	}
	if err := c.setLimits(); err != nil {
		_ = c.remove()
		return nil, err
	}
	return c, nil
}

func (c *invCgroup) setLimits() error {
	if !c.b.limits {
		return nil
	}
	mem, pids := strconv.FormatInt(c.b.memLimit, 10), strconv.FormatInt(c.b.pidsLimit, 10)
	var files [][2]string
	if c.b.v2 {
		files = [][2]string{{"memory.max", mem}, {"pids.max", pids}}
	} else {
		files = [][2]string{{"memory.limit_in_bytes", mem}, {"pids.max", pids}}
	}
	for i, f := range files {
		dir := c.memDir()
		if i == 1 {
			dir = c.pidsDir()
		}
		if err := writeFile(filepath.Join(dir, f[0]), f[1]); err != nil {
			return fmt.Errorf("set %s: %w", f[0], err)
		}
	}
	// Swap must not extend the memory limit. Best effort: the files exist
	// only with swap accounting.
	if c.b.v2 {
		_ = writeFile(filepath.Join(c.memDir(), "memory.swap.max"), "0")
		_ = writeFile(filepath.Join(c.memDir(), "memory.oom.group"), "1")
	} else {
		_ = writeFile(filepath.Join(c.memDir(), "memory.memsw.limit_in_bytes"), mem)
	}
	return nil
}

// checkLimits reads the limits back (the kernel rounds memory down to pages).
func (c *invCgroup) checkLimits() error {
	if !c.b.limits {
		return nil
	}
	memFile := "memory.limit_in_bytes"
	if c.b.v2 {
		memFile = "memory.max"
	}
	m, ok := readInt(filepath.Join(c.memDir(), memFile))
	if !ok || m > c.b.memLimit || m < c.b.memLimit-int64(os.Getpagesize()) {
		return fmt.Errorf("%s reads %d, want %d", memFile, m, c.b.memLimit)
	}
	if p, ok := readInt(filepath.Join(c.pidsDir(), "pids.max")); !ok || p != c.b.pidsLimit {
		return fmt.Errorf("pids.max reads %d, want %d", p, c.b.pidsLimit)
	}
	return nil
}

// members lists the processes in the cgroup (all hierarchies).
func (c *invCgroup) members() map[int]bool {
	m := map[int]bool{}
	for _, d := range c.dirs {
		pids, _ := readPids(filepath.Join(d, "cgroup.procs"))
		for _, p := range pids {
			m[p] = true
		}
	}
	return m
}

// signal sends sig to every process in the cgroup, race-free against pid
// reuse (signalVerified).
func (c *invCgroup) signal(sig syscall.Signal) {
	m := c.members()
	pids := make([]int, 0, len(m))
	for p := range m {
		pids = append(pids, p)
	}
	signalVerified(pids, sig, func(want map[int]bool) map[int]bool {
		now := c.members()
		for p := range want {
			if !now[p] {
				delete(want, p)
			}
		}
		return want
	})
}

// kill SIGKILLs everything in the cgroup: cgroup.kill on v2 (atomic, catches
// forks in flight), one pass over cgroup.procs on v1 (callers repeat until
// empty; pids.max bounds a fork race).
func (c *invCgroup) kill() {
	if c.b.v2 && writeFile(filepath.Join(c.dirs[0], "cgroup.kill"), "1") == nil {
		return
	}
	c.signal(syscall.SIGKILL)
}

// empty: no live process is left in the cgroup.
func (c *invCgroup) empty() bool {
	if c.b.v2 {
		if n, ok := readKey(filepath.Join(c.dirs[0], "cgroup.events"), "populated"); ok {
			return n == 0
		}
	}
	return len(c.members()) == 0
}

// pidsCurrent counts tasks charged to the cgroup, zombies included (the
// charge is released only when a process is reaped). ok is false without a
// pids controller.
func (c *invCgroup) pidsCurrent() (int64, bool) {
	if !c.b.limits {
		return 0, false
	}
	return readInt(filepath.Join(c.pidsDir(), "pids.current"))
}

// oomKilled: the kernel OOM killer killed a process of this cgroup.
func (c *invCgroup) oomKilled() bool {
	if c.b.v2 {
		n, _ := readKey(filepath.Join(c.memDir(), "memory.events"), "oom_kill")
		return n > 0
	}
	n, _ := readKey(filepath.Join(c.memDir(), "memory.oom_control"), "oom_kill")
	return n > 0
}

func (c *invCgroup) peakMemory() int64 {
	file := "memory.max_usage_in_bytes"
	if c.b.v2 {
		file = "memory.peak"
	}
	n, _ := readInt(filepath.Join(c.memDir(), file))
	return n
}

// remove removes the cgroup's directories (missing ones are fine).
func (c *invCgroup) remove() error {
	var errs []error
	for _, d := range c.dirs {
		if err := unix.Rmdir(d); err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("rmdir %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}

// joinFiles opens each cgroup.procs for the v1 re-exec helper, which writes
// its own pid there before it execs the worker.
func (c *invCgroup) joinFiles() ([]*os.File, error) {
	var fs []*os.File
	for _, d := range c.dirs {
		f, err := os.OpenFile(filepath.Join(d, "cgroup.procs"), os.O_WRONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			for _, f := range fs {
				f.Close()
			}
			return nil, err
		}
		fs = append(fs, f)
	}
	return fs, nil
}

// verifyCgroups proves at start-up that per-invocation cgroups work: it
// removes empty groups a dead agent left, creates a test group, sets and
// reads back the limits, on v1 runs the re-exec helper once to join it, and
// removes it.
func (s *Supervisor) verifyCgroups(b *cgroupBackend) error {
	s.removeStale(b)
	c, err := b.create(nextName())
	if err != nil {
		return err
	}
	defer c.remove()
	if err := c.checkLimits(); err != nil {
		return err
	}
	if !b.v2 {
		if err := s.probeHelper(c); err != nil {
			return err
		}
	}
	return c.remove()
}

// stale serializes stale-cgroup cleanup and remembers the parents this
// process has already cleaned.
var stale = struct {
	sync.Mutex
	seen map[string]bool
}{seen: map[string]bool{}}

// removeStale removes empty per-invocation cgroups left by agents that are
// no longer running, and — the first time this process uses a parent,
// before any of its runs there — by an earlier process with this pid.
// Non-empty ones are only reported: their processes cannot be attributed
// safely (another pid namespace may share the parent).
func (s *Supervisor) removeStale(b *cgroupBackend) {
	stale.Lock()
	defer stale.Unlock()
	for _, parent := range b.dirs() {
		first := !stale.seen[parent]
		stale.seen[parent] = true
		ents, err := os.ReadDir(parent)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if !e.IsDir() || !leftByDeadAgent(e.Name(), cgroupPrefix, first) {
				continue
			}
			d := filepath.Join(parent, e.Name())
			if err := unix.Rmdir(d); err != nil {
				s.log.Warn("stale worker cgroup not removed", zap.String("cgroup", d), zap.Error(err))
			} else {
				s.log.Info("removed stale worker cgroup", zap.String("cgroup", d))
			}
		}
	}
}
