package faults

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/backend"
	"github.com/lancemaster/lancemaster/pkg/backend/frame"
	"github.com/lancemaster/lancemaster/pkg/objstore"
	"github.com/lancemaster/lancemaster/pkg/rpc"
)

// behaviour is what a build does, chosen from the seed and the index name
// (so a replay builds the same way).
type behaviour int

const (
	buildOK             behaviour = iota // NATIVE_OK at once, child reaped
	buildSlow                            // NATIVE_OK after 20..300 ms
	buildHeld                            // blocks until the schedule releases builds (or a crash)
	buildConflict                        // NATIVE_COMMIT_CONFLICT → NOT_COMMITTED
	buildStale                           // PRE_INVOCATION_STALE_ADMISSION → NOT_COMMITTED
	buildIO                              // NATIVE_IO → UNKNOWN, legitimately
	buildNoResult                        // child reaped, no result frame (crash of the worker), dataset untouched
	buildCommitNoResult                  // the index is committed, then the worker dies without a result frame
)

var behaviourNames = [...]string{"ok", "slow", "held", "conflict", "stale", "io", "no-result", "commit-no-result"}

func (b behaviour) String() string { return behaviourNames[b] }

func behaviourFor(seed int64, name string) (behaviour, time.Duration) {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%s", seed, name)
	x := h.Sum64()
	var b behaviour
	switch r := x % 100; {
	case r < 45:
		b = buildOK
	case r < 65:
		b = buildSlow
	case r < 78:
		b = buildHeld
	case r < 84:
		b = buildConflict
	case r < 89:
		b = buildStale
	case r < 93:
		b = buildIO
	case r < 97:
		b = buildNoResult
	default:
		b = buildCommitNoResult
	}
	return b, time.Duration(20+(x>>8)%280) * time.Millisecond
}

// runner is the scripted Runner of one backend process (one incarnation).
// It answers inspects with a fixed dataset, runs builds by their
// behaviour, records every build in the ledger, and on crash ends every
// build in flight at once with nothing proven and no result (the process
// died: no report is written).
type runner struct {
	w       *world
	slot    int
	dir     int
	epoch   atomic.Int64
	refuse  *atomic.Bool // the slot's "isolation not verified" switch
	crashed chan struct{}
	once    sync.Once
}

func (r *runner) Verified() bool { return !r.refuse.Load() }

func (r *runner) crash() { r.once.Do(func() { close(r.crashed) }) }

func (r *runner) Run(ctx context.Context, req *frame.Request, _ time.Time) backend.Outcome {
	w := r.w
	switch req.Mode {
	case frame.ModeInspect:
		return backend.Outcome{Proof: backend.ProofChildReaped, Result: &frame.Result{Protocol: frame.Protocol, Mode: frame.ModeInspect,
			OK: true, DatasetVersion: w.data.headOf(req.DatasetURI), Fields: []frame.Field{{FieldID: 0, Name: "id", DataType: "int32"}}}}
	case frame.ModeResolve:
		outcome, evidence, head := w.data.resolve(req.DatasetURI, req.IndexName, req.IndexUUID)
		w.ledger.resolved(req.IndexName, outcome)
		return backend.Outcome{Proof: backend.ProofChildReaped, Result: &frame.Result{Protocol: frame.Protocol, Mode: frame.ModeResolve,
			OK: true, Outcome: outcome, Evidence: evidence, HeadVersion: head}}
	case frame.ModeBuild:
	default:
		return backend.Outcome{Proof: backend.ProofChildReaped, Failure: "fault harness: unknown mode " + req.Mode}
	}
	w.ledger.runStarted(r.slot, r.epoch.Load(), r.dir, req.InvocationID, req.IndexName, req.JobID, w.clock.nowMs())
	b, d := behaviourFor(w.seed, req.IndexName)
	end := func(code string, proof backend.Proof, crashed bool) backend.Outcome {
		w.ledger.runEnded(req.InvocationID, w.clock.nowMs(), code, proofName(proof), crashed)
		out := backend.Outcome{Proof: proof}
		if code != "" {
			out.Result = &frame.Result{Protocol: frame.Protocol, Mode: frame.ModeBuild, ResultCode: code, Message: "fault harness build"}
			if code == "NATIVE_OK" {
				u := uuidOf(req.InvocationID)
				v := w.data.commit(req.DatasetURI, req.IndexName, u)
				w.ledger.committed(req.InvocationID)
				out.Result.NewDatasetVersion, out.Result.DatasetVersion, out.Result.IndexUUID = v, v, u
			}
		} else {
			out.Failure = "fault harness: no result"
		}
		return out
	}
	select {
	case <-r.crashed:
		return end("", backend.ProofNone, true)
	default:
	}
	var wait <-chan struct{}
	switch b {
	case buildSlow:
		t := time.NewTimer(d)
		defer t.Stop()
		ch := make(chan struct{})
		go func() {
			select {
			case <-t.C:
				close(ch)
			case <-r.crashed:
			case <-ctx.Done():
			}
		}()
		wait = ch
	case buildHeld:
		wait = w.heldGate()
	}
	if wait != nil {
		select {
		case <-wait:
		case <-r.crashed:
			return end("", backend.ProofNone, true)
		case <-ctx.Done():
			return end("", backend.ProofChildReaped, false) // killed by the agent's shutdown, reaped
		}
	}
	select {
	case <-r.crashed:
		return end("", backend.ProofNone, true)
	default:
	}
	if w.clock.nowMs() >= req.DeadlineMs {
		// The supervisor kills a worker at its deadline (TERM, KILL) and
		// reaps it: no result.
		return end("", backend.ProofChildReaped, false)
	}
	switch b {
	case buildConflict:
		return end("NATIVE_COMMIT_CONFLICT", backend.ProofChildReaped, false)
	case buildStale:
		return end("PRE_INVOCATION_STALE_ADMISSION", backend.ProofChildReaped, false)
	case buildIO:
		return end("NATIVE_IO", backend.ProofChildReaped, false)
	case buildNoResult:
		return end("", backend.ProofChildReaped, false)
	case buildCommitNoResult:
		w.data.commit(req.DatasetURI, req.IndexName, uuidOf(req.InvocationID))
		w.ledger.committed(req.InvocationID)
		return end("", backend.ProofChildReaped, false)
	}
	return end("NATIVE_OK", backend.ProofChildReaped, false)
}

func proofName(p backend.Proof) string {
	switch p {
	case backend.ProofChildReaped:
		return "CHILD_REAPED"
	case backend.ProofNeverLaunched:
		return "NEVER_LAUNCHED"
	}
	return "NONE"
}

// forgetfulGrace is a forgetful backend's Config.Grace: it forgets a
// finished invocation this long after its deadline (its janitor looks
// every Grace/4), whether or not the report was delivered.
const forgetfulGrace = 200 * time.Millisecond

// agentGrace is every other backend's Config.Grace (the agent's default):
// it forgets a finished invocation this long after its deadline, once its
// report is delivered.
const agentGrace = time.Hour

// graceOf is the Config.Grace an incarnation ran with.
func graceOf(in incarnation) time.Duration {
	if in.forgetful {
		return forgetfulGrace
	}
	return agentGrace
}

// incarnation is one backend process of a slot.
type incarnation struct {
	epoch     int64
	dir       int // outbox directory id (a fresh one = the disk was lost)
	forgetful bool
	startMs   int64
	endMs     int64 // 0 while it runs
}

// backendSlot is one registered backend address and the processes that
// served it, one at a time.
type backendSlot struct {
	w      *world
	idx    int
	addr   string
	refuse atomic.Bool

	mu      sync.Mutex
	agent   *backend.Agent
	runner  *runner
	dirs    []string
	history []incarnation
}

// start runs a new process (a new epoch) on the slot's address, with the
// outbox directory dir (-1: a fresh one).
func (s *backendSlot) start(dir int, forgetful bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.agent != nil {
		return errors.New("backend already running")
	}
	if dir < 0 || dir >= len(s.dirs) {
		s.dirs = append(s.dirs, filepath.Join(s.w.tmp, fmt.Sprintf("b%d-dir%d", s.idx, len(s.dirs))))
		dir = len(s.dirs) - 1
	}
	grace := graceOf(incarnation{forgetful: forgetful})
	r := &runner{w: s.w, slot: s.idx, dir: dir, refuse: &s.refuse, crashed: make(chan struct{})}
	var a *backend.Agent
	var err error
	for attempt := 0; attempt < 50; attempt++ { // the port may linger for a moment after a close
		a, err = backend.New(backend.Config{
			ListenAddr: s.addr, AdvertiseAddr: s.addr, DataDir: s.dirs[dir], Masters: s.w.rpcAdvertise,
			Concurrency: 4, QueueSize: 8, Isolation: backend.IsolationRequired, Grace: grace,
			ShutdownTimeout: 50 * time.Millisecond, FlushTimeout: 20 * time.Millisecond,
			ReportTimeout: 3 * time.Second, BackoffMin: 10 * time.Millisecond, BackoffMax: 150 * time.Millisecond,
			Logger: s.w.logger("b" + fmt.Sprint(s.idx)), Clock: s.w.clock.now, StoreProbe: vouchedStore,
		}, r)
		if err != nil {
			return err
		}
		if err = a.Start(); err == nil {
			break
		}
		a.Close()
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("backend b%d: %w", s.idx, err)
	}
	r.epoch.Store(a.Epoch())
	s.agent, s.runner = a, r
	s.history = append(s.history, incarnation{epoch: a.Epoch(), dir: dir, forgetful: forgetful, startMs: s.w.clock.nowMs()})
	return nil
}

// crash kills the process: builds in flight end with nothing proven and
// no report; the agent then closes (its queue is normally empty:
// Concurrency 4 is above the masters' 2 slots per backend; anything still
// queued is finished NEVER_LAUNCHED by the agent's own close, which is
// what it proves anyway). The outbox on disk is kept.
func (s *backendSlot) crash() {
	s.mu.Lock()
	a, r := s.agent, s.runner
	s.agent, s.runner = nil, nil
	if a != nil {
		s.history[len(s.history)-1].endMs = s.w.clock.nowMs()
	}
	s.mu.Unlock()
	if a == nil {
		return
	}
	r.crash()
	a.Close()
}

func (s *backendSlot) up() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.agent != nil
}

func (s *backendSlot) lastDir() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.history) == 0 {
		return -1
	}
	return s.history[len(s.history)-1].dir
}

func (s *backendSlot) incarnations() []incarnation {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]incarnation(nil), s.history...)
}

// masterBackends is a master's BackendClient: the real Thrift client,
// frozen while its master is paused (as a stopped process would be, it
// sends once it resumes), and recording every submit and query answer in
// the ledger.
type masterBackends struct {
	w    *world
	idx  int
	real rpc.BackendClient
}

var errClosed = errors.New("fault harness closed")

func (m *masterBackends) gate(addr, op string) error {
	if !m.w.ctl.waitUnpaused(m.idx) {
		return &rpc.SendError{Op: op, Addr: addr, Err: errClosed}
	}
	return nil
}

func (m *masterBackends) Submit(ctx context.Context, addr string, d *wire.TLanceIndexJobDispatch) (*wire.TStatus, error) {
	if err := m.gate(addr, rpc.OpDial); err != nil {
		return nil, err
	}
	st, err := m.real.Submit(ctx, addr, d)
	m.w.ledger.submitted(m.w.slotOf(addr), d, st, err)
	return st, err
}

func (m *masterBackends) Heartbeat(ctx context.Context, addr string, req *wire.THeartbeatRequest) (*wire.THeartbeatResponse, error) {
	if err := m.gate(addr, rpc.OpDial); err != nil {
		return nil, err
	}
	return m.real.Heartbeat(ctx, addr, req)
}

func (m *masterBackends) Inspect(ctx context.Context, addr string, req *wire.TInspectDatasetRequest) (*wire.TInspectDatasetResponse, error) {
	if err := m.gate(addr, rpc.OpDial); err != nil {
		return nil, err
	}
	return m.real.Inspect(ctx, addr, req)
}

func (m *masterBackends) Query(ctx context.Context, addr string, req *wire.TQueryInvocationsRequest) (*wire.TQueryInvocationsResponse, error) {
	if err := m.gate(addr, rpc.OpDial); err != nil {
		return nil, err
	}
	resp, err := m.real.Query(ctx, addr, req)
	if err == nil {
		m.w.ledger.queried(m.w.slotOf(addr), req.BeProcessEpoch, resp)
	}
	return resp, err
}

func (m *masterBackends) Resolve(ctx context.Context, addr string, req *wire.TResolveJobRequest) (*wire.TResolveJobResponse, error) {
	if err := m.gate(addr, rpc.OpDial); err != nil {
		return nil, err
	}
	return m.real.Resolve(ctx, addr, req)
}

func (m *masterBackends) JobLog(ctx context.Context, addr string, req *wire.TJobLogRequest) (*wire.TJobLogResponse, error) {
	if err := m.gate(addr, rpc.OpDial); err != nil {
		return nil, err
	}
	return m.real.JobLog(ctx, addr, req)
}

func (m *masterBackends) ProbeStore(ctx context.Context, addr string, req *wire.TProbeStoreRequest) (*wire.TProbeStoreResponse, error) {
	if err := m.gate(addr, rpc.OpDial); err != nil {
		return nil, err
	}
	return m.real.ProbeStore(ctx, addr, req)
}

var _ rpc.BackendClient = (*masterBackends)(nil)

// silence the linter about zap in this file's imports when logging is off.
var _ = zap.NewNop

// vouchedStore answers the backends' conditional-PUT probe: the world's
// s3:// datasets are on no real store (the runner is scripted).
func vouchedStore(context.Context, objstore.Target, time.Duration) (objstore.Result, error) {
	return objstore.Result{ConditionalPut: true, Detail: "the fault world's store is vouched for"}, nil
}
