// Package supervisor runs one worker process per call under hard isolation
// and proves what became of it (DESIGN.md §12, docs/isolation.md).
//
// Every Run starts a fresh child in a session and process group of its own,
// from a goroutine that holds its OS thread for the child's whole life
// (Pdeathsig SIGKILL is per thread), inside a fresh per-invocation cgroup
// with memory and pids limits set before the worker executes. The request frame goes in on stdin,
// one bounded result frame comes out on stdout, stderr is kept in a bounded
// ring scrubbed of the request's storage option values. A deadline or a
// cancelled context sends SIGTERM, then SIGKILL after KillGrace. The process
// is the child subreaper, so everything a worker leaves behind is reparented
// to it and can be killed and reaped; CHILD_REAPED is claimed only when that
// is proven.
//
// A process hosting a Supervisor must call MaybeRunHelper first thing in
// main (and in TestMain), and must never wait for "any child" (wait4(-1)).
// Children outside the agent's session that are not workers are orphaned
// worker descendants: they are killed and reaped. Children the agent starts
// by other means stay in its session and are left alone.
package supervisor

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/lancemaster/lancemaster/pkg/backend/frame"
)

// Isolation is what the agent requires of the per-invocation sandbox.
type Isolation string

const (
	// IsolationRequired: memory and pids limits through cgroups, verified at
	// New. Without them Verified() is false and Run refuses every call.
	IsolationRequired Isolation = "required"
	// IsolationBestEffort: cgroups when available, else a process group only.
	IsolationBestEffort Isolation = "best-effort"
)

// Modes reported by Mode.
const (
	ModeCgroupV2     = "cgroup-v2"
	ModeCgroupV1     = "cgroup-v1"
	ModeProcessGroup = "process-group"
)

// Defaults for zero Config fields.
const (
	DefaultKillGrace        = 2 * time.Second
	DefaultStderrRingBytes  = 64 << 10
	DefaultMemoryLimitBytes = 1 << 30 // a 200k-row IVF_PQ build peaks near 365 MB
	DefaultPidsLimit        = 256     // pids.max counts threads; bounded pools need ~24
)

// Config configures a Supervisor. Command and Env must never hold secrets:
// they are visible to every local user in /proc.
type Config struct {
	// Command is the worker's argv. Command[0] is resolved against the
	// agent's PATH unless it contains a slash.
	Command []string
	// Env is the worker's complete environment; nothing is inherited from
	// the agent (e.g. LANCE_CPU_THREADS=1 LANCE_IO_THREADS=2
	// RAYON_NUM_THREADS=1 UV_THREADPOOL_SIZE=1 LANCEDB_LOG=error, PATH).
	Env []string
	// Dir is the worker's working directory ("" = the agent's).
	Dir string
	// MemoryLimitBytes and PidsLimit bound each worker's cgroup
	// (memory.max / memory.limit_in_bytes, pids.max). Zero takes the default.
	MemoryLimitBytes int64
	PidsLimit        int64
	// Isolation defaults to IsolationRequired.
	Isolation Isolation
	// KillGrace is the time between SIGTERM and SIGKILL at a deadline.
	KillGrace time.Duration
	// StderrRingBytes bounds the kept tail of the worker's stderr.
	StderrRingBytes int
	// CgroupParent overrides where per-invocation cgroups are made: a
	// directory on a cgroup2 mount (cgroup v2) or on a v1 memory or pids
	// mount (the same relative path is used in both v1 hierarchies). Missing
	// directories are created. Default: auto-detect (docs/isolation.md).
	CgroupParent string
	// TempRoot is where each Run makes the worker's own fresh TMPDIR
	// (also given as TMP and TEMP, replacing any in Env), removed with
	// everything in it once the worker and all it started are gone,
	// however it ended. Default: os.TempDir(). TMPDIRs a crashed agent
	// left there are removed at New.
	TempRoot string
	// Logger receives one line per Run and the isolation report of New.
	Logger *zap.Logger

	// v2WithoutLimits lets tests exercise the cgroup v2 path on a cgroup2
	// mount that has no memory or pids controller. Never set in production.
	v2WithoutLimits bool
}

// Proof says what the supervisor can prove about the worker after Run.
type Proof int

const (
	// ProofNone: nothing is proven; the worker may have run and something
	// it started may still exist.
	ProofNone Proof = iota
	// ProofChildReaped: the worker and everything it started are gone.
	ProofChildReaped
	// ProofNeverLaunched: the worker program never started executing.
	ProofNeverLaunched
)

func (p Proof) String() string {
	switch p {
	case ProofChildReaped:
		return "CHILD_REAPED"
	case ProofNeverLaunched:
		return "NEVER_LAUNCHED"
	default:
		return "NONE"
	}
}

// Outcome is what Run reports. It never holds request content other than
// what the worker wrote, scrubbed of storage option values.
type Outcome struct {
	// Result is the worker's result frame; nil means no trusted result.
	Result *frame.Result
	Proof  Proof
	// Failure is a short cause for logs ("" when Result is trusted).
	Failure  string
	PID      int    // the worker's pid (= its process group id), 0 if none
	ExitCode int    // exit status, -1 when killed by a signal or unknown
	Signal   string // e.g. "SIGKILL" when killed by a signal
	// OOMKilled: the kernel OOM-killed a process of the worker's cgroup.
	OOMKilled bool
	// Stderr is the tail of the worker's stderr, storage option values
	// removed.
	Stderr []byte
	// Duration is the worker's wall time, from spawn to its exit.
	Duration time.Duration
	// PeakMemoryBytes is the cgroup's peak usage (memory.peak /
	// memory.max_usage_in_bytes); without a cgroup, or when the kernel does
	// not keep the peak, the worker's own peak RSS (wait4's rusage).
	PeakMemoryBytes int64
	// PeakMemorySource says where PeakMemoryBytes comes from:
	// PeakFromCgroup, PeakFromRusage, or "" when it is not known.
	PeakMemorySource string
	// StartTime is when the worker was spawned, FinishTime when it was
	// reaped (zero when it never started, or was not reaped by the time
	// Run returned).
	StartTime, FinishTime time.Time
}

// Sources of Outcome.PeakMemoryBytes.
const (
	PeakFromCgroup = "cgroup"
	PeakFromRusage = "rusage"
)

// Supervisor runs workers. Run is safe for concurrent use.
type Supervisor struct {
	cfg      Config
	log      *zap.Logger
	cg       *cgroupBackend // nil: process group only
	mode     string
	verified bool
	reason   string // why isolation is not verified, or why cgroups are off

}

// reg is process-wide, like the subreaper: every Supervisor of the process
// spawns and sweeps against the same set of children.
var reg = struct {
	// spawnMu orders spawns against sweeps: a spawn holds it shared from
	// fork until its pid is registered; a sweep holds it exclusively while it
	// decides which children are orphans; a leader is reaped and
	// unregistered under it, so a recycled pid is never misattributed.
	spawnMu sync.RWMutex
	mu      sync.Mutex       // guards leaders while spawnMu is shared
	leaders map[int]struct{} // worker leaders (and helpers) not yet reaped
}{leaders: map[int]struct{}{}}

var subreaper struct {
	once sync.Once
	err  error
}

// New validates cfg, makes the process the child subreaper, detects the
// isolation available and verifies it by creating, limiting and removing a
// test cgroup (on cgroup v1 it also runs the re-exec helper once). It
// fails only on an invalid configuration or when the subreaper cannot be
// set; missing isolation is reported by Verified and Reason.
func New(cfg Config) (*Supervisor, error) {
	if len(cfg.Command) == 0 || cfg.Command[0] == "" {
		return nil, errors.New("supervisor: empty worker command")
	}
	switch cfg.Isolation {
	case "":
		cfg.Isolation = IsolationRequired
	case IsolationRequired, IsolationBestEffort:
	default:
		return nil, fmt.Errorf("supervisor: isolation %q is neither %q nor %q", cfg.Isolation, IsolationRequired, IsolationBestEffort)
	}
	if cfg.MemoryLimitBytes < 0 || cfg.PidsLimit < 0 || cfg.KillGrace < 0 || cfg.StderrRingBytes < 0 {
		return nil, errors.New("supervisor: negative limit")
	}
	if cfg.MemoryLimitBytes == 0 {
		cfg.MemoryLimitBytes = DefaultMemoryLimitBytes
	}
	if cfg.PidsLimit == 0 {
		cfg.PidsLimit = DefaultPidsLimit
	}
	if cfg.KillGrace == 0 {
		cfg.KillGrace = DefaultKillGrace
	}
	if cfg.StderrRingBytes == 0 {
		cfg.StderrRingBytes = DefaultStderrRingBytes
	}
	cfg.Command = append([]string(nil), cfg.Command...)
	cfg.Env = append([]string(nil), cfg.Env...)
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.TempRoot == "" {
		cfg.TempRoot = os.TempDir()
	}
	subreaper.once.Do(func() {
		subreaper.err = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	})
	if subreaper.err != nil {
		return nil, fmt.Errorf("supervisor: PR_SET_CHILD_SUBREAPER: %w", subreaper.err)
	}
	s := &Supervisor{cfg: cfg, log: cfg.Logger.Named("supervisor")}
	s.removeStaleTmp()
	s.detect()
	return s, nil
}

// Mode is "cgroup-v2", "cgroup-v1" or "process-group".
func (s *Supervisor) Mode() string { return s.mode }

// Verified reports whether the configured isolation holds: with
// IsolationRequired, per-invocation cgroups with memory and pids limits were
// created, limited and removed at New; with IsolationBestEffort it is always
// true (the process-group fallback is acceptable by configuration). The
// agent answers non-OK to every dispatch while it is false.
func (s *Supervisor) Verified() bool { return s.verified }

// Reason explains, for logs and non-OK answers, why cgroups are not used
// ("" when they are).
func (s *Supervisor) Reason() string { return s.reason }

func (s *Supervisor) detect() {
	b, err := detectCgroups(s.cfg)
	if err == nil {
		err = s.verifyCgroups(b)
	}
	switch {
	case err == nil:
		s.cg, s.mode, s.verified = b, b.modeName(), true
		s.log.Info("isolation verified", zap.String("mode", s.mode), zap.Strings("cgroup_parents", b.parents()),
			zap.Int64("memory_limit_bytes", s.cfg.MemoryLimitBytes), zap.Int64("pids_limit", s.cfg.PidsLimit))
	case s.cfg.Isolation == IsolationBestEffort:
		s.mode, s.verified, s.reason = ModeProcessGroup, true, err.Error()
		s.log.Warn("cgroups unavailable; best-effort isolation falls back to a process group without memory or pids limits",
			zap.String("reason", s.reason))
	default:
		s.mode, s.verified, s.reason = ModeProcessGroup, false, err.Error()
		s.log.Error("required isolation cannot be verified; every dispatch will be refused", zap.String("reason", s.reason))
	}
}

// invSeq numbers cgroups process-wide, so Supervisors sharing a parent
// never pick the same name.
var invSeq atomic.Uint64

// nextName names a per-invocation cgroup: unique per agent process, and the
// pid lets a later agent find and remove what a crashed one left behind.
func nextName() string {
	return fmt.Sprintf("%s%d-%d", cgroupPrefix, os.Getpid(), invSeq.Add(1))
}

func register(pid int) {
	reg.mu.Lock()
	reg.leaders[pid] = struct{}{}
	reg.mu.Unlock()
}

// isLeader must be called with reg.spawnMu held exclusively.
func isLeader(pid int) bool {
	_, ok := reg.leaders[pid]
	return ok
}
