package dispatch

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/pkg/config"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
	"github.com/lancemaster/lancemaster/pkg/rpc"
)

// Dispatcher defaults.
const (
	// DefaultSendConcurrency bounds the sends and resolves in flight to one
	// backend at once, and the reconcile queries of a pass. It bounds
	// connections, not work: a submit is an enqueue, the backend bounds its
	// builds (its slots, lance_index_job_max_inflight_per_backend) and its
	// resolves (its inspect slots) itself. A call counts from its plan,
	// before the M1 entry, until its submit returns, so the bound is the
	// width of the dispatch pipeline: about SendConcurrency per M1 round
	// plus a submit. The benchmark's sustained section carried ~550 jobs/s
	// through the whole lifecycle at 8, ~1,000 at 32 and 1,200-1,800 at 64.
	// 64 connections stay well inside a backend's served slots (256).
	DefaultSendConcurrency = 64
	// DefaultSendTimeout bounds one submit_lance_index_job call.
	DefaultSendTimeout = 30 * time.Second
	// DefaultQueryTimeout bounds one query_lance_index_invocations call.
	DefaultQueryTimeout = 10 * time.Second
	// DefaultResolveTimeout bounds one resolve_lance_index_job call (the
	// request's timeout_ms; the call gets resolveTimeoutMargin more so that
	// the backend's own timeout answers first).
	DefaultResolveTimeout = 2 * time.Minute
	resolveTimeoutMargin  = 5 * time.Second
	// DefaultFirstPassWait bounds how long Run waits for the pool's first
	// heartbeat pass of the term before it starts anyway (nothing is
	// dispatched to a backend whose epoch this term has not heard).
	DefaultFirstPassWait = 5 * time.Second

	// pendingScanExtra is how many PENDING jobs a round looks at beyond
	// max_dispatch_per_round, so jobs that must wait (local-file gate, a
	// failed prepare) do not starve the ones behind them; maxPendingScan
	// bounds the scan when the caps are lifted.
	pendingScanExtra = 1024
	maxPendingScan   = 1 << 16
	// maxSweepJobs bounds the RUNNING jobs one deadline sweep or reconcile
	// pass handles; the rest wait for the next round.
	maxSweepJobs = 4096
	// maxQueryIDs bounds the invocation ids of one query request (256 ids of
	// at most 256 bytes stay far below the 512 KiB frame).
	maxQueryIDs = 256
)

// ErrNoLeaderTerm: the context a round runs under carries no leadership
// term, so nothing can be fenced and nothing is done.
var ErrNoLeaderTerm = errors.New("dispatch: no leader term in the context")

// refreshStepper is the refresh driver as the round sees it: one bounded
// refresh pass (R1 → refresh → R2/R3). *RefreshDriver implements it.
type refreshStepper interface {
	Step(ctx context.Context) error
}

// Hooks are fault points for tests; production leaves them nil.
type Hooks struct {
	// AfterJournal is called once the round's M1 entry is committed, with
	// the jobs it made RUNNING, before any of them is sent.
	AfterJournal func(jobIDs []int64)
	// BeforeSend is called right before each send (after the recheck); a
	// non-nil error aborts that send as if leadership had been lost.
	BeforeSend func(jobID int64) error
}

// Deps are the Dispatcher's collaborators. Proposer, Reader, Backends,
// Credentials, Pool and Term are required.
type Deps struct {
	Proposer    raftfsm.Proposer
	Reader      raftfsm.Reader
	Backends    rpc.BackendClient
	Credentials config.CredentialSource
	Pool        *Pool
	Refresh     refreshStepper   // step 3 of the round; optional
	Clock       func() time.Time // default time.Now
	Term        TermFunc         // the fencing token of the round's context
	Invocations InvocationSource // default RandomInvocations
	Waker       *Waker           // admissions, reports, backend changes
	Logger      *zap.Logger

	SendConcurrency int           // default DefaultSendConcurrency
	SendTimeout     time.Duration // default DefaultSendTimeout
	QueryTimeout    time.Duration // default DefaultQueryTimeout
	ResolveTimeout  time.Duration // default DefaultResolveTimeout
	FirstPassWait   time.Duration // default DefaultFirstPassWait
	Hooks           Hooks
	Observer        Observer // round durations and dispatch outcomes (metrics); optional
}

// Dispatcher is the leader's dispatch round (DESIGN.md §7, §13): deadline
// sweep → epoch sweep → resolve step → refresh driver → PENDING dispatch,
// every lance_index_job_dispatch_interval_second and whenever the Waker
// fires, plus reconcile of every RUNNING job when a new leader starts.
//
// Concurrency: Run is called by the leadership monitor; RunRound,
// ReconcileRunning and Wait may also be called directly (tests). Rounds
// never overlap: each holds roundMu for its whole duration. Sends and
// resolves do not belong to a round: they run on goroutines of the term
// (termWork) that journal each outcome as soon as it is known, so a round
// returns without waiting for any backend; Run waits for them before it
// returns.
type Dispatcher struct {
	d   Deps
	log *zap.Logger

	roundMu sync.Mutex

	workMu sync.Mutex
	cur    *termWork // the calls of the current term

	holds atomic.Int64 // Hold callers not yet released: no PENDING job is dispatched
}

// Hold stops the PENDING dispatch step (the sweeps, resolves and refresh go
// on) until release is called, whatever the journaled options say. It
// returns once no round is running, so every M1 a round journaled before
// the hold has been applied and none follows until release. An operator
// snapshot restore holds it from before it reads the journal it prepares
// the restore against (raftfsm.PrepareRestore) until it has journaled
// lance_index_job_dispatcher_paused: no dispatch escapes that read, and no
// round dispatches from the restored state in between. Safe from any
// goroutine; release is idempotent.
func (d *Dispatcher) Hold() (release func()) {
	d.holds.Add(1)
	d.roundMu.Lock() // wait for a round already past its hold check
	d.roundMu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { d.holds.Add(-1); d.d.Waker.Wake() }) }
}

// New returns a Dispatcher with defaults filled in.
func New(d Deps) *Dispatcher {
	if d.Clock == nil {
		d.Clock = time.Now
	}
	if d.Invocations == nil {
		d.Invocations = RandomInvocations
	}
	if d.Waker == nil {
		d.Waker = NewWaker()
	}
	if d.Logger == nil {
		d.Logger = zap.NewNop()
	}
	if d.Term == nil {
		d.Term = func(context.Context) (uint64, bool) { return 0, false }
	}
	if d.SendConcurrency <= 0 {
		d.SendConcurrency = DefaultSendConcurrency
	}
	if d.SendTimeout <= 0 {
		d.SendTimeout = DefaultSendTimeout
	}
	if d.QueryTimeout <= 0 {
		d.QueryTimeout = DefaultQueryTimeout
	}
	if d.ResolveTimeout <= 0 {
		d.ResolveTimeout = DefaultResolveTimeout
	}
	if d.FirstPassWait <= 0 {
		d.FirstPassWait = DefaultFirstPassWait
	}
	if d.Observer == nil {
		d.Observer = nopObserver{}
	}
	return &Dispatcher{d: d, log: d.Logger}
}

// Run waits for the pool's first heartbeat pass of this term, reconciles
// every RUNNING job, then runs a round at once and again every
// lance_index_job_dispatch_interval_second (re-read every round) or when the
// Waker fires, until ctx is done. Before it returns it waits for every send
// and resolve of the term (ctx ends them).
func (d *Dispatcher) Run(ctx context.Context) error {
	term, ok := d.d.Term(ctx)
	if !ok || term == 0 {
		return ErrNoLeaderTerm
	}
	defer d.Wait()
	wctx, cancel := context.WithTimeout(ctx, d.d.FirstPassWait)
	err := d.d.Pool.WaitFirstPass(wctx, term)
	cancel()
	if ctx.Err() != nil {
		return nil
	}
	if err != nil {
		d.log.Warn("no heartbeat pass of this term yet; starting without it", zap.Uint64("term", term))
	}
	if _, err := d.reconcileRunning(ctx); err != nil && ctx.Err() == nil {
		d.log.Warn("reconcile of RUNNING jobs failed; the deadline sweep reconciles again", zap.Error(err))
	}
	for {
		if err := d.RunRound(ctx); err != nil && ctx.Err() == nil {
			d.log.Warn("dispatch round failed", zap.Error(err))
		}
		interval := time.Duration(d.d.Reader.State().Options().DispatchIntervalSecond) * time.Second
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		case <-d.d.Waker.C():
			t.Stop()
		}
	}
}

// RunRound runs one round in the fixed order of DESIGN.md §7, with the
// resolve step of §13.4 after the epoch sweep. A step that fails does not
// stop the later ones (each re-reads the state and only ever acts on what
// it reads); the errors are returned joined. An idle round proposes
// nothing. It returns without waiting for the sends and resolves it started
// (Wait does).
func (d *Dispatcher) RunRound(ctx context.Context) error {
	d.roundMu.Lock()
	defer d.roundMu.Unlock()
	term, ok := d.d.Term(ctx)
	if !ok || term == 0 {
		return ErrNoLeaderTerm
	}
	// Wall time, not d.d.Clock: a duration for metrics, never journaled.
	start := time.Now()
	defer func() { d.d.Observer.RoundDone(time.Since(start)) }()
	w := d.work(ctx, term)
	r := &round{d: d, deps: &d.d, ctx: ctx, term: term, work: w}
	var errs []error
	step := func(name string, fn func() error) {
		if ctx.Err() != nil {
			return
		}
		if err := fn(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
	}
	step("deadline sweep", r.deadlineSweep)
	step("epoch sweep", r.epochSweep)
	step("resolve", r.resolveStep)
	if d.d.Refresh != nil {
		step("refresh", func() error { return d.d.Refresh.Step(ctx) })
	}
	step("dispatch", r.dispatchPending)
	w.pruneSent(d.d.Reader.State())
	if err := ctx.Err(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// ReconcileRunning asks the backends about every RUNNING job whose deadline
// has not passed (those are the deadline sweep's) and applies what they
// prove (DESIGN.md §7, term fencing and reconcile), waiting for every
// answer. Run does the same once per term, after the pool's first
// heartbeat pass, without waiting: each backend is asked on its own
// goroutine of the term, so a hung one does not delay the first round.
func (d *Dispatcher) ReconcileRunning(ctx context.Context) error {
	wait, err := d.reconcileRunning(ctx)
	if wait != nil {
		wait()
	}
	return err
}

func (d *Dispatcher) reconcileRunning(ctx context.Context) (wait func(), err error) {
	d.roundMu.Lock()
	defer d.roundMu.Unlock()
	term, ok := d.d.Term(ctx)
	if !ok || term == 0 {
		return nil, ErrNoLeaderTerm
	}
	w := d.work(ctx, term)
	st := d.d.Reader.State()
	nowMs := d.d.Clock().UnixMilli()
	var live []*job.Record
	for _, r := range st.RunningByDeadline(math.MaxInt64, maxSweepJobs) {
		if r.DeadlineMs >= nowMs && r.MutationState == job.Running && !w.busy(r.JobID) {
			live = append(live, r)
		}
	}
	if len(live) == 0 {
		return nil, nil
	}
	r := &round{d: d, deps: &d.d, ctx: ctx, term: term, work: w}
	_, wait = r.ask(st, groupForQuery(live), false)
	return wait, nil
}

// round is the state of one RunRound. The sends and resolves it starts
// keep it (it is never modified after RunRound built it).
type round struct {
	d    *Dispatcher
	deps *Deps // d's dependencies (the Deps it was built with)
	ctx  context.Context
	term uint64
	work *termWork
}

// The refresh driver is the round's step 3.
var _ refreshStepper = (*RefreshDriver)(nil)
