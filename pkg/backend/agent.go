// Package backend is the backend agent (`lancemaster backend`, DESIGN.md
// §12): a Thrift server (wire.LanceBackendService) that accepts dispatches
// from the leader, runs each in a one-shot worker through a Runner (the
// supervisor), keeps every finished invocation's report in a durable outbox
// (pkg/backend/outbox) and delivers it to the masters until one accepts it.
//
// Lifecycle: New (opens the outbox, picks the process epoch) → Start (binds,
// serves, starts the workers and the delivery of what the outbox still
// holds) → Close (graceful, see Close). docs/backend.md is the operator's
// guide; the order of the submit guards and why is in service.go.
package backend

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/backend/outbox"
	"github.com/lancemaster/lancemaster/pkg/metrics"
	"github.com/lancemaster/lancemaster/pkg/objstore"
	"github.com/lancemaster/lancemaster/pkg/rpc"
	"github.com/lancemaster/lancemaster/pkg/version"
)

// Version is reported in heartbeats: this binary's version and commit
// (pkg/version, set by the Makefile from git).
var Version = version.Get().Short()

// Isolation modes.
const (
	// IsolationRequired refuses every dispatch and inspect (NOT_READY) while
	// the Runner has not verified its isolation.
	IsolationRequired = "required"
	// IsolationBestEffort runs workers with whatever isolation the Runner
	// could set up (at least a process group).
	IsolationBestEffort = "best-effort"
)

// Defaults of Config's zero fields.
const (
	DefaultConcurrency     = 2
	DefaultQueueSize       = 16
	DefaultInspectTimeout  = 60 * time.Second
	DefaultGrace           = time.Hour
	DefaultShutdownTimeout = 30 * time.Second
	// DefaultReportTimeout bounds one report call to one master; a follower
	// forwarding to the leader takes up to 10 s itself.
	DefaultReportTimeout = 15 * time.Second
	DefaultBackoffMin    = 250 * time.Millisecond
	DefaultBackoffMax    = 30 * time.Second
	// DefaultFlushTimeout is how long Close lets deliveries in flight finish
	// once the workers have stopped; what is not delivered stays in the
	// outbox for the next start.
	DefaultFlushTimeout = 5 * time.Second
	// DefaultRefusalWindow: a report refused for good (UNAUTHENTICATED,
	// STALE_REPORT) by one master under one leader term is dropped only
	// after its refusals span this long (see deliverer).
	DefaultRefusalWindow = time.Minute

	// OutboxFile is the outbox's file name under DataDir.
	OutboxFile = "outbox.db"
	// killWait bounds how long Close waits for workers after cancelling
	// them (the Runner kills its child and reaps it).
	killWait = 30 * time.Second
)

// Config configures an Agent. Zero fields take their defaults.
type Config struct {
	// ListenAddr is the Thrift listen address (host:port; port 0 picks one).
	ListenAddr string
	// AdvertiseAddr is the address masters dial (registered with
	// `backends add`); informational here, logged at start.
	AdvertiseAddr string
	// HTTPListen is where /metrics, /livez and /readyz are served
	// (host:port); "" serves none.
	HTTPListen string
	// DataDir holds the outbox file (OutboxFile); created 0700 if missing.
	DataDir string
	// Masters are the initial report targets (master RPC addresses);
	// heartbeats replace them with their master_addresses.
	Masters []string
	// Concurrency is how many workers run at once (the capacity heartbeats
	// announce); QueueSize how many accepted dispatches may wait.
	Concurrency int
	QueueSize   int
	// InspectTimeout caps one inspect (the request's timeout_ms may lower
	// it); InspectConcurrency bounds the inspect workers at once (default:
	// Concurrency).
	InspectTimeout     time.Duration
	InspectConcurrency int
	// Grace is how long a finished invocation is still answered in full by
	// query after its dispatch deadline (never while its report waits in
	// the outbox); afterwards it answers FORGOTTEN and is still recognized
	// as a duplicate (a tombstone, see table).
	Grace time.Duration
	// MaxTombstones bounds the tombstones of forgotten invocations
	// (DefaultMaxTombstones when zero; see table for what happens past it).
	MaxTombstones int
	// ClusterRebindAfter is how long the bound cluster must have been silent
	// before a heartbeat from another cluster re-binds the backend
	// (DefaultClusterRebindAfter when zero; see cluster.go).
	ClusterRebindAfter time.Duration
	// RefusalWindow: a report refused for good by one master under one
	// leader term is dropped only once its refusals span this long
	// (DefaultRefusalWindow when zero; see deliverer).
	RefusalWindow time.Duration
	// OutboxGrace is how long an undelivered report is retried after its
	// dispatch deadline (outbox.DefaultGrace when zero).
	OutboxGrace time.Duration
	// Isolation is IsolationRequired (default) or IsolationBestEffort.
	Isolation string
	// ShutdownTimeout is how long Close lets running workers finish before
	// it cancels them.
	ShutdownTimeout time.Duration
	// FlushTimeout is how long Close lets deliveries finish afterwards.
	FlushTimeout time.Duration
	// ReportTimeout bounds one report call; BackoffMin/Max shape the
	// jittered exponential backoff between delivery rounds.
	ReportTimeout          time.Duration
	BackoffMin, BackoffMax time.Duration
	// RPC is the Thrift configuration of the server and of report calls.
	// With Certs (mutual TLS), only masters may call the server
	// (rpc.BackendPolicy) and reports go to masters only.
	RPC rpc.Config
	// StoreProbe replaces the conditional-PUT probe of s3:// stores
	// (objstore.ProbeS3) for tests whose datasets are on no real store;
	// nil probes for real (probestore.go).
	StoreProbe func(ctx context.Context, t objstore.Target, timeout time.Duration) (objstore.Result, error)
	// Logger; nil discards logs.
	Logger *zap.Logger
	// Clock replaces time.Now (tests).
	Clock func() time.Time
}

func (c Config) withDefaults() Config {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	defDur := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.Concurrency, DefaultConcurrency)
	def(&c.QueueSize, DefaultQueueSize)
	def(&c.InspectConcurrency, c.Concurrency)
	defDur(&c.InspectTimeout, DefaultInspectTimeout)
	defDur(&c.Grace, DefaultGrace)
	defDur(&c.ClusterRebindAfter, DefaultClusterRebindAfter)
	defDur(&c.RefusalWindow, DefaultRefusalWindow)
	defDur(&c.OutboxGrace, outbox.DefaultGrace)
	defDur(&c.ShutdownTimeout, DefaultShutdownTimeout)
	defDur(&c.FlushTimeout, DefaultFlushTimeout)
	defDur(&c.ReportTimeout, DefaultReportTimeout)
	defDur(&c.BackoffMin, DefaultBackoffMin)
	defDur(&c.BackoffMax, DefaultBackoffMax)
	if c.BackoffMax < c.BackoffMin {
		c.BackoffMax = c.BackoffMin
	}
	if c.Isolation == "" {
		c.Isolation = IsolationRequired
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	return c
}

func (c Config) validate() error {
	var errs []error
	if c.ListenAddr == "" {
		errs = append(errs, errors.New("backend: listen address is required"))
	}
	if c.DataDir == "" {
		errs = append(errs, errors.New("backend: data dir is required"))
	}
	if c.Isolation != IsolationRequired && c.Isolation != IsolationBestEffort {
		errs = append(errs, fmt.Errorf("backend: isolation %q: use %s or %s", c.Isolation, IsolationRequired, IsolationBestEffort))
	}
	for _, m := range c.Masters {
		if err := checkHostPort(m); err != nil {
			errs = append(errs, fmt.Errorf("backend: master %q: %w", m, err))
		}
	}
	return errors.Join(errs...)
}

// Agent is one backend process. Its methods are safe for concurrent use.
type Agent struct {
	cfg     Config
	log     *zap.Logger
	runner  Runner
	epoch   int64
	outbox  *outbox.Outbox
	dlv     *deliverer
	metrics *agentMetrics

	mu          sync.Mutex
	srv         *rpc.Server
	http        *metrics.Server // nil without HTTPListen
	started     bool
	heartbeaten bool
	cl          clusters // the bound cluster and the per-cluster fences
	table       *table
	work        chan *invocation // the bounded queue; sent to only under mu
	shutting    bool
	closed      bool

	inspectSem chan struct{}
	stores     objstore.Checker // conditional-PUT verdicts per (endpoint, bucket) (probestore.go)
	runCtx     context.Context  // cancelled when Close gives up waiting for workers
	runCancel  context.CancelFunc
	workers    sync.WaitGroup
	inspects   sync.WaitGroup
	stopJan    chan struct{}
	janitor    sync.WaitGroup
	closeOnce  sync.Once
	closeErr   error
}

// New checks cfg, creates the data dir, opens the outbox and picks the
// process epoch. It does not listen: call Start.
func New(cfg Config, runner Runner) (*Agent, error) {
	if runner == nil {
		return nil, errors.New("backend: nil runner")
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("backend: data dir: %w", err)
	}
	ob, err := outbox.Open(filepath.Join(cfg.DataDir, OutboxFile), outbox.WithGrace(cfg.OutboxGrace), outbox.WithClock(cfg.Clock))
	if err != nil {
		return nil, fmt.Errorf("backend: %w", err)
	}
	a := &Agent{
		cfg:        cfg,
		log:        cfg.Logger,
		runner:     runner,
		epoch:      newEpoch(),
		outbox:     ob,
		table:      newTable(cfg.MaxTombstones),
		work:       make(chan *invocation, cfg.QueueSize),
		inspectSem: make(chan struct{}, cfg.InspectConcurrency),
		stopJan:    make(chan struct{}),
	}
	a.stores.Probe = cfg.StoreProbe
	a.runCtx, a.runCancel = context.WithCancel(context.Background())
	a.dlv = newDeliverer(a)
	a.metrics = newAgentMetrics(a)
	return a, nil
}

// newEpoch picks the process epoch: the start time in nanoseconds, never 0
// (0 reads as "no epoch" on the wire).
func newEpoch() int64 {
	if e := time.Now().UnixNano(); e > 0 {
		return e
	}
	return 1
}

// Epoch returns the process epoch.
func (a *Agent) Epoch() int64 { return a.epoch }

// Addr returns the bound address ("" before Start).
func (a *Agent) Addr() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.srv == nil {
		return ""
	}
	return a.srv.Addr().String()
}

// rpcConnStats is the listener's connection pools (false before Start).
func (a *Agent) rpcConnStats() (rpc.ConnStats, bool) {
	a.mu.Lock()
	srv := a.srv
	a.mu.Unlock()
	if srv == nil {
		return rpc.ConnStats{}, false
	}
	return srv.ConnStats(), true
}

// OutboxPath returns the outbox file's path.
func (a *Agent) OutboxPath() string { return a.outbox.Path() }

// Start binds the listen address and serves, starts the workers, and starts
// delivering what the outbox holds from earlier runs.
func (a *Agent) Start() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.started || a.closed {
		return errors.New("backend: Start called twice or after Close")
	}
	srv, err := rpc.NewServer(a.cfg.ListenAddr, wire.NewLanceBackendServiceProcessor(&service{a: a}), a.cfg.RPC, a.log.Named("rpc"),
		rpc.WithPolicy(rpc.BackendPolicy()))
	if err != nil {
		return fmt.Errorf("backend: %w", err)
	}
	if err := srv.Serve(); err != nil {
		srv.Close()
		return fmt.Errorf("backend: %w", err)
	}
	hs, err := a.startHTTP()
	if err != nil {
		srv.Close()
		return fmt.Errorf("backend: %w", err)
	}
	a.srv, a.http, a.started = srv, hs, true
	for i := 0; i < a.cfg.Concurrency; i++ {
		a.workers.Add(1)
		go a.workerLoop()
	}
	a.janitor.Add(1)
	go a.janitorLoop()
	a.log.Info("backend started", zap.String("listen", srv.Addr().String()), zap.String("advertise", a.cfg.AdvertiseAddr),
		zap.Int64("process_epoch", a.epoch), zap.Int("concurrency", a.cfg.Concurrency), zap.Int("queue_size", a.cfg.QueueSize),
		zap.String("isolation", a.cfg.Isolation), zap.Bool("isolation_verified", a.runner.Verified()),
		zap.Strings("masters", a.cfg.Masters), zap.String("outbox", a.outbox.Path()))
	a.dlv.resume()
	return nil
}

// Close shuts the agent down gracefully:
//  1. new dispatches and inspects are refused (SHUTTING_DOWN);
//  2. dispatches still queued never start: each is finished as never
//     launched (PRE_INVOCATION_RESOURCE_REJECTED with proof NEVER_LAUNCHED),
//     stored and reported;
//  3. running workers get ShutdownTimeout to finish, then are cancelled (the
//     Runner kills and reaps them) and their outcomes stored;
//  4. deliveries get FlushTimeout; what is left stays in the outbox for the
//     next start;
//  5. the server stops (queries and heartbeats are answered until here) and
//     the outbox is closed.
//
// Close is idempotent and safe to call without Start.
func (a *Agent) Close() error {
	a.closeOnce.Do(func() { a.closeErr = a.close() })
	return a.closeErr
}

func (a *Agent) close() error {
	a.mu.Lock()
	a.shutting, a.closed = true, true
	close(a.work) // safe: sends happen under mu, and only while !shutting
	srv, hs := a.srv, a.http
	a.mu.Unlock()
	a.log.Info("backend shutting down: refusing new dispatches")

	// Workers also drain the queue; whoever takes an invocation finishes it.
	for inv := range a.work {
		a.finishNeverLaunched(inv, "the backend shut down before the build started")
	}
	if !waitTimeout(&a.workers, a.cfg.ShutdownTimeout) {
		a.log.Warn("running workers did not finish in time; cancelling them", zap.Duration("waited", a.cfg.ShutdownTimeout))
		a.runCancel()
		if !waitTimeout(&a.workers, killWait) {
			a.log.Error("workers did not stop after cancellation; closing anyway")
		}
	}
	a.runCancel()
	a.dlv.stop(a.cfg.FlushTimeout)
	close(a.stopJan)
	a.janitor.Wait()
	if srv != nil {
		srv.Close()
	}
	a.inspects.Wait()
	err := a.outbox.Close()
	if hs != nil {
		// Last: /readyz says "shutting down" while the agent drains.
		err = errors.Join(err, hs.Close())
	}
	a.log.Info("backend stopped")
	return err
}

// waitTimeout waits for wg at most d and reports whether it finished.
func waitTimeout(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// isolationOK reports whether dispatches and inspects may run.
func (a *Agent) isolationOK() bool {
	return a.cfg.Isolation != IsolationRequired || a.runner.Verified()
}

// janitorLoop forgets finished invocations past their deadline + Grace
// whose report is no longer held for delivery.
func (a *Agent) janitorLoop() {
	defer a.janitor.Done()
	every := min(a.cfg.Grace/4, time.Minute)
	t := time.NewTicker(max(every, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-a.stopJan:
			return
		case <-t.C:
			a.sweep()
		}
	}
}

// sweep forgets the finished invocations whose deadline + Grace has passed.
func (a *Agent) sweep() int {
	now := a.cfg.Clock()
	a.mu.Lock()
	defer a.mu.Unlock()
	lossy := a.table.lossy
	n := a.table.forgetFinished(now, a.cfg.Grace)
	if !lossy && a.table.lossy {
		a.log.Warn("the tombstone bound is reached: every invocation id this process no longer holds now answers FORGOTTEN "+
			"(it can no longer prove an id was never accepted; restart the backend to start afresh)",
			zap.Int("max_tombstones", a.table.maxTombstones))
	}
	return n
}
