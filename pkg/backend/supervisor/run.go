package supervisor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/lancemaster/lancemaster/pkg/backend/supervisor/cgexec"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/lancemaster/lancemaster/pkg/backend/frame"
)

// si_code values of a SIGCHLD siginfo.
const (
	cldExited = 1
	cldKilled = 2
	cldDumped = 3
)

const (
	// exitWaitBudget bounds the wait for the leader's exit after SIGKILL;
	// past it Run reports no proof and cleanup continues in the background.
	exitWaitBudget = 10 * time.Second
	// cleanupBudget bounds killing and reaping what a worker left behind.
	cleanupBudget = 5 * time.Second
	// drainBudget bounds the wait for stdout/stderr EOF once every process
	// is gone (a descendant we could not kill may hold the pipes).
	drainBudget = 2 * time.Second
	// statusBudget bounds the wait for the v1 helper's status pipe.
	statusBudget = 2 * time.Second
)

// Run runs one worker for req and reports what became of it. It is safe for
// concurrent use. It blocks until the worker and everything it started are
// gone (or cannot be reaped within a bound; cleanup then goes on in the
// background). deadline (zero = none) or ctx ending sends SIGTERM
// to the worker's process group and cgroup, then SIGKILL after KillGrace.
// A ctx made by WithStderrLines also gets the worker's stderr line by line
// as it arrives (lines.go).
func (s *Supervisor) Run(ctx context.Context, req *frame.Request, deadline time.Time) Outcome {
	secrets := secretValues(req)
	out := s.run(ctx, req, deadline, secrets)
	s.logOutcome(req, &out)
	return out
}

func never(failure string) Outcome {
	return Outcome{Proof: ProofNeverLaunched, Failure: failure, ExitCode: -1}
}

// pipe returns the parent's end (non-blocking, so reads and writes can be
// interrupted by Close or a deadline) and the child's end (blocking). Both
// are close-on-exec; the child's end is dup'ed into place by the fork.
func pipe(parentReads bool) (parent, child *os.File, err error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return nil, nil, err
	}
	pfd, cfd := p[0], p[1]
	if !parentReads {
		pfd, cfd = p[1], p[0]
	}
	if err := unix.SetNonblock(pfd, true); err != nil {
		unix.Close(pfd)
		unix.Close(cfd)
		return nil, nil, err
	}
	return os.NewFile(uintptr(pfd), "|worker"), os.NewFile(uintptr(cfd), "|worker"), nil
}

type workerIO struct {
	stdin, stdout, stderr, status *os.File // parent ends; status only on v1
	childEnds                     []*os.File
	stdinDone, stdoutDone         chan struct{}
	stderrDone                    chan struct{}
	out                           []byte
	overflow                      int64
	ring                          *ring
	lines                         *lineWriter // nil without a stderr line observer
}

func (w *workerIO) closeChildEnds() {
	closeAll(w.childEnds)
	w.childEnds = nil
}

func (w *workerIO) closeParentEnds() {
	for _, f := range []*os.File{w.stdin, w.stdout, w.stderr, w.status} {
		if f != nil {
			f.Close()
		}
	}
}

func (s *Supervisor) newIO(withStatus bool) (*workerIO, error) {
	w := &workerIO{ring: newRing(s.cfg.StderrRingBytes), stdinDone: make(chan struct{}),
		stdoutDone: make(chan struct{}), stderrDone: make(chan struct{})}
	ends := []struct {
		parent     **os.File
		parentRead bool
	}{{&w.stdin, false}, {&w.stdout, true}, {&w.stderr, true}}
	if withStatus {
		ends = append(ends, struct {
			parent     **os.File
			parentRead bool
		}{&w.status, true})
	}
	for _, e := range ends {
		p, c, err := pipe(e.parentRead)
		if err != nil {
			w.closeChildEnds()
			w.closeParentEnds()
			return nil, err
		}
		*e.parent = p
		w.childEnds = append(w.childEnds, c)
	}
	return w, nil
}

// start feeds the request and collects stdout (bounded: the frame plus one
// byte is kept, the rest only counted) and stderr (ring).
func (w *workerIO) start(request []byte) {
	go func() {
		defer close(w.stdinDone)
		_, _ = w.stdin.Write(request)
		w.stdin.Close()
	}()
	go func() {
		defer close(w.stdoutDone)
		limit := int64(4 + frame.MaxResultBytes + 1)
		w.out, _ = io.ReadAll(io.LimitReader(w.stdout, limit))
		w.overflow, _ = io.Copy(io.Discard, w.stdout)
	}()
	go func() {
		defer close(w.stderrDone)
		if w.lines == nil {
			_, _ = io.Copy(w.ring, w.stderr)
			return
		}
		_, _ = io.Copy(io.MultiWriter(w.ring, w.lines), w.stderr)
		w.lines.flush()
	}()
}

// drain waits for the readers to reach EOF, or closes the pipes after a
// bound (a process we could not kill may still hold them).
func (w *workerIO) drain(budget time.Duration) {
	t := time.NewTimer(budget)
	defer t.Stop()
	for _, ch := range []chan struct{}{w.stdoutDone, w.stderrDone} {
		select {
		case <-ch:
		case <-t.C:
		}
	}
	w.closeParentEnds()
	<-w.stdinDone
	<-w.stdoutDone
	<-w.stderrDone
}

func (s *Supervisor) run(ctx context.Context, req *frame.Request, deadline time.Time, secrets [][]byte) Outcome {
	reqBytes, path, failure := s.checkRun(ctx, req, deadline)
	if failure != "" {
		return never(failure)
	}
	tmp, env, err := s.makeTmpDir(s.cfg.Env)
	if err != nil {
		s.log.Error("worker TMPDIR setup failed", zap.Error(err))
		return never("tmpdir setup failed")
	}
	// The TMPDIR goes once nothing of the worker can write there any more:
	// here, or after the late cleanup when processes outlive Run.
	tmpLater := false
	defer func() {
		if !tmpLater {
			s.cleanTmp(tmp)
		}
	}()
	l, failure := s.launch(ctx, path, env, secrets)
	if failure != "" {
		return never(failure)
	}
	c, cg, w := l.c, l.cg, l.w
	start := time.Now()
	w.start(reqBytes)
	statusCh := make(chan string, 1)
	if l.useHelper {
		go func() { statusCh <- readStatus(w.status, time.Minute) }()
	} else {
		statusCh <- ""
	}

	out := Outcome{PID: c.pid, ExitCode: -1, StartTime: start}
	killedBy, exited := s.await(ctx, c, cg, deadline)
	if !exited {
		// The leader survived SIGKILL (uninterruptible sleep): nothing can be
		// proven now. Keep its thread, group and cgroup, and clean up later.
		out.Failure = killedBy + "; worker did not exit after SIGKILL"
		out.Stderr = s.stderrTail(w, secrets)
		out.Duration = time.Since(start)
		w.lines.stop() // the drain below outlives Run: no observer call after it
		tmpLater = true
		s.finishLater(c, cg, func() { w.drain(0); s.cleanTmp(tmp) })
		return out
	}
	out.Duration = c.exitedAt.Sub(start)
	res := s.finish(c, cg, cleanupBudget, false)
	out.OOMKilled, out.PeakMemoryBytes = res.oom, res.peak
	if !res.clean {
		if cg != nil {
			out.OOMKilled, out.PeakMemoryBytes = cg.oomKilled(), cg.peakMemory()
		}
		tmpLater = true
		s.finishLater(c, cg, func() { s.cleanTmp(tmp) })
	}
	if out.PeakMemoryBytes > 0 {
		out.PeakMemorySource = PeakFromCgroup
	}
	if res.reaped {
		out.FinishTime = time.Now()
		if out.PeakMemoryBytes == 0 && res.ru.Maxrss > 0 {
			// KiB; the leader and the descendants it waited for.
			out.PeakMemoryBytes, out.PeakMemorySource = res.ru.Maxrss<<10, PeakFromRusage
		}
	}
	var status string
	select {
	case status = <-statusCh:
	case <-time.After(statusBudget):
	}
	w.drain(drainBudget)
	out.Stderr = s.stderrTail(w, secrets)
	return s.judge(out, c, w, req, res, status, killedBy, secrets)
}

// checkRun refuses what must never start (unverified isolation, a request
// that does not encode, a context or deadline already over, a missing
// executable) and returns the request frame and the executable's path, or
// the failure.
func (s *Supervisor) checkRun(ctx context.Context, req *frame.Request, deadline time.Time) (reqBytes []byte, path, failure string) {
	if !s.verified {
		return nil, "", "isolation not verified"
	}
	if req == nil {
		return nil, "", "invalid request"
	}
	var reqBuf bytes.Buffer
	if err := frame.Write(&reqBuf, req, frame.MaxRequestBytes); err != nil {
		if errors.Is(err, frame.ErrTooLarge) {
			return nil, "", "request too large"
		}
		return nil, "", "invalid request"
	}
	if ctx.Err() != nil {
		return nil, "", "canceled"
	}
	if !deadline.IsZero() && !time.Now().Before(deadline) {
		return nil, "", "deadline"
	}
	path, err := exec.LookPath(s.cfg.Command[0])
	if err != nil {
		s.log.Warn("worker executable not found", zap.Error(err))
		return nil, "", "spawn failed"
	}
	return reqBuf.Bytes(), path, ""
}

// launched is a worker that was spawned: its leader, its cgroup (nil in
// process-group mode), its pipes, and whether the v1 placement helper
// stands before it.
type launched struct {
	c         *child
	cg        *invCgroup
	w         *workerIO
	useHelper bool
}

// launch creates the invocation's cgroup and pipes and spawns the worker
// (through the v1 placement helper, or straight into the v2 cgroup, or in
// a process group). A failure before the spawn undoes everything it made
// and is a NEVER_LAUNCHED failure ("cgroup setup failed", "spawn failed").
func (s *Supervisor) launch(ctx context.Context, path string, env []string, secrets [][]byte) (l launched, failure string) {
	var err error
	if s.cg != nil {
		for i := 0; ; i++ {
			if l.cg, err = s.cg.create(nextName()); err == nil || !errors.Is(err, os.ErrExist) || i == 3 {
				break
			}
		}
		if err != nil {
			s.log.Error("worker cgroup setup failed", zap.Error(err))
			return l, "cgroup setup failed"
		}
	}
	l.useHelper = l.cg != nil && !l.cg.b.v2
	if l.w, err = s.newIO(l.useHelper); err != nil {
		removeQuietly(l.cg)
		return l, "spawn failed"
	}
	if fn := StderrLines(ctx); fn != nil {
		l.w.lines = &lineWriter{fn: fn, secrets: secrets}
	}
	// undo closes both ends of every pipe and removes the cgroup: nothing
	// was spawned.
	undo := func(failure string) (launched, string) {
		l.w.closeChildEnds()
		l.w.closeParentEnds()
		removeQuietly(l.cg)
		return launched{}, failure
	}
	files := make([]uintptr, 0, 6)
	for _, f := range l.w.childEnds {
		files = append(files, f.Fd())
	}
	argv0, argv, cgroupFD := path, s.cfg.Command, -1
	var join []*os.File
	if l.useHelper {
		if join, err = l.cg.joinFiles(); err != nil {
			return undo("cgroup setup failed")
		}
		for _, f := range join {
			files = append(files, f.Fd())
		}
		argv0, argv = selfExe, cgexec.Argv(cgexec.ModeRun, len(join), path, s.cfg.Command)
	} else if l.cg != nil {
		dir, err := os.Open(l.cg.dirs[0])
		if err != nil {
			return undo("cgroup setup failed")
		}
		defer dir.Close()
		cgroupFD = int(dir.Fd())
	}
	c, err := s.spawn(argv0, argv, env, s.cfg.Dir, files, cgroupFD)
	closeAll(join)
	if err != nil {
		s.log.Warn("worker spawn failed", zap.Error(err))
		return undo("spawn failed")
	}
	l.w.closeChildEnds()
	l.c = c
	return l, ""
}

// judge completes the Outcome of a worker whose leader exited and was
// finished (res): the exit code or signal, the CHILD_REAPED proof,
// NEVER_LAUNCHED when the helper wrote on its status pipe, and the worker's
// classified result with the secrets scrubbed.
func (s *Supervisor) judge(out Outcome, c *child, w *workerIO, req *frame.Request, res finishResult, status, killedBy string, secrets [][]byte) Outcome {
	switch c.code {
	case cldExited:
		out.ExitCode = int(c.status)
	case cldKilled, cldDumped:
		out.Signal = unix.SignalName(syscall.Signal(c.status))
		if out.Signal == "" {
			out.Signal = fmt.Sprintf("signal %d", c.status)
		}
	}
	if res.proof {
		out.Proof = ProofChildReaped
	}
	if status != "" {
		// The helper wrote on its status pipe: the worker never started.
		out.Proof, out.Failure = ProofNeverLaunched, "spawn failed"
		if bytes.HasPrefix([]byte(status), []byte("cgroup join")) {
			out.Failure = "cgroup setup failed"
		}
		s.log.Warn("worker never started", zap.String("cause", status))
		return out
	}
	if res.detail != "" {
		s.log.Warn("worker cleanup incomplete", zap.Int("pid", c.pid), zap.String("detail", res.detail))
	}
	out.Result, out.Failure = classify(c, w, req.Mode, out.OOMKilled, killedBy)
	if out.Result != nil {
		out.Result.Message = string(scrub([]byte(out.Result.Message), secrets, false))
	}
	return out
}

// await waits for the leader's exit, enforcing the deadline and ctx:
// SIGTERM, KillGrace, SIGKILL. killedBy is "deadline" or "canceled" when it
// had to signal; exited is false if the leader outlived SIGKILL's budget.
func (s *Supervisor) await(ctx context.Context, c *child, cg *invCgroup, deadline time.Time) (killedBy string, exited bool) {
	var timeout <-chan time.Time
	if !deadline.IsZero() {
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-c.exited:
		return "", true
	case <-timeout:
		killedBy = "deadline"
	case <-ctx.Done():
		killedBy = "canceled"
	}
	select {
	case <-c.exited: // exited on its own meanwhile
		return "", true
	default:
	}
	signalGroup(c, cg, syscall.SIGTERM)
	grace := time.NewTimer(s.cfg.KillGrace)
	defer grace.Stop()
	select {
	case <-c.exited:
		return killedBy, true
	case <-grace.C:
	}
	signalGroup(c, cg, syscall.SIGKILL)
	t := time.NewTimer(exitWaitBudget)
	defer t.Stop()
	select {
	case <-c.exited:
		return killedBy, true
	case <-t.C:
		return killedBy, false
	}
}

// classify decides whether the worker's stdout is a trusted result: the
// leader exited 0 and wrote exactly one well-formed frame within bounds.
func classify(c *child, w *workerIO, mode string, oom bool, killedBy string) (*frame.Result, string) {
	switch {
	case c.code == cldExited && c.status == 0:
	case killedBy != "":
		return nil, killedBy
	case oom && c.code == cldKilled && c.status == int32(syscall.SIGKILL):
		return nil, "oom-killed"
	case c.code == cldKilled || c.code == cldDumped:
		name := unix.SignalName(syscall.Signal(c.status))
		if name == "" {
			name = fmt.Sprint(c.status)
		}
		return nil, "signal " + name
	case c.code == cldExited:
		return nil, fmt.Sprintf("exit status %d", c.status)
	default:
		return nil, "exit status unknown"
	}
	if len(w.out) == 0 {
		return nil, "no result frame"
	}
	r := bytes.NewReader(w.out)
	var res frame.Result
	if err := frame.Read(r, &res, frame.MaxResultBytes); err != nil {
		if errors.Is(err, frame.ErrTooLarge) {
			return nil, "oversized result frame"
		}
		return nil, "malformed result frame"
	}
	if r.Len() > 0 || w.overflow > 0 {
		return nil, "trailing bytes after result frame"
	}
	if res.Protocol != frame.Protocol || res.Mode != mode {
		return nil, "malformed result frame"
	}
	return &res, ""
}

func (s *Supervisor) stderrTail(w *workerIO, secrets [][]byte) []byte {
	b, cut := w.ring.tail()
	return scrub(b, secrets, cut)
}

func removeQuietly(cg *invCgroup) {
	if cg != nil {
		_ = cg.remove()
	}
}

func (s *Supervisor) logOutcome(req *frame.Request, out *Outcome) {
	fields := []zap.Field{zap.String("proof", out.Proof.String()), zap.String("failure", out.Failure),
		zap.Int("pid", out.PID), zap.Int("exit_code", out.ExitCode), zap.String("signal", out.Signal),
		zap.Bool("oom_killed", out.OOMKilled), zap.Duration("duration", out.Duration),
		zap.Int64("peak_memory_bytes", out.PeakMemoryBytes), zap.Bool("trusted_result", out.Result != nil)}
	if req != nil {
		fields = append(fields, zap.String("invocation_id", req.InvocationID), zap.Int64("job_id", req.JobID), zap.String("mode", req.Mode))
	}
	if out.Result == nil {
		s.log.Warn("worker finished without a trusted result", fields...)
	} else {
		s.log.Info("worker finished", fields...)
	}
}
