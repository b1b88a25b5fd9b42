package dispatch

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
	"github.com/lancemaster/lancemaster/pkg/rpc"
)

// Heartbeat defaults.
const (
	// DefaultHeartbeatInterval is how often the leader heartbeats every
	// registered backend.
	DefaultHeartbeatInterval = time.Second
	// aliveIntervals: a backend is alive while its last answered heartbeat is
	// at most this many intervals old, so one or two lost heartbeats do not
	// flap it.
	aliveIntervals = 3
	// maxParallelHeartbeats bounds the calls of one pass in flight at once.
	maxParallelHeartbeats = 64
)

// PoolDeps are the Pool's collaborators. Reader, Backends and Term are
// required.
type PoolDeps struct {
	Reader   raftfsm.Reader
	Backends rpc.BackendClient
	Clock    Clock    // default SystemClock
	Term     TermFunc // the leadership term heartbeats carry
	Waker    *Waker   // woken on an epoch change or an alive flip; optional
	Logger   *zap.Logger
	// MasterID names this master in heartbeats.
	MasterID string
	// MasterAddresses returns every master's RPC address: backends deliver
	// reports there. Called once per pass; optional.
	MasterAddresses func() []string
	// HeartbeatInterval is the pass period (default 1 s); also the unit of
	// liveness (alive = answered within 3 intervals).
	HeartbeatInterval time.Duration
	// HeartbeatTimeout bounds one heartbeat call (default: the interval).
	HeartbeatTimeout time.Duration
}

// BackendStatus is what the leader has heard from one backend during its
// current term.
type BackendStatus struct {
	Alive     bool      // an OK heartbeat within 3 intervals
	Epoch     int64     // the latest process epoch heard
	Capacity  int32     // workers it says it can run at once (0: not said)
	LastHeard time.Time // when the latest OK heartbeat was answered (Clock)
}

// Pool is the leader-local view of the backends (DESIGN.md §7): liveness,
// the latest process epoch and capacity, learned from heartbeats. It is a
// leader service: Run heartbeats every registered backend every interval.
//
// Everything it knows belongs to one leadership term: Run starts from an
// empty view, so an epoch counts as heard only if a backend answered a
// heartbeat of this term — a new leader heartbeats before its epoch sweep
// may act. Lost heartbeats and unregistered backends prove nothing; they
// only make a backend not alive (no new dispatches go there).
//
// Concurrency: Run is called by the leadership monitor; View, Status and
// WaitFirstPass are safe from any goroutine at any time. On a node that is
// not leading, View reports nothing known.
type Pool struct {
	d   PoolDeps
	log *zap.Logger

	mu       sync.Mutex
	gen      uint64 // bumped by every Run; answers of an older run are dropped
	term     uint64 // the term of the current run
	running  bool
	passes   int                     // completed passes of the current run
	changed  chan struct{}           // closed and replaced when gen, running or passes change
	backends map[int64]*backendState // heard during the current run
}

type backendState struct {
	lastOK   time.Time
	epoch    int64
	capacity int32
	alive    bool // as of the last evaluation: an alive flip wakes the dispatcher
}

// NewPool returns a Pool; nothing is heard until Run.
func NewPool(d PoolDeps) *Pool {
	if d.Clock == nil {
		d.Clock = SystemClock{}
	}
	if d.Logger == nil {
		d.Logger = zap.NewNop()
	}
	if d.HeartbeatInterval <= 0 {
		d.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if d.HeartbeatTimeout <= 0 {
		d.HeartbeatTimeout = d.HeartbeatInterval
	}
	if d.Term == nil {
		d.Term = func(context.Context) (uint64, bool) { return 0, false }
	}
	return &Pool{d: d, log: d.Logger, changed: make(chan struct{}), backends: map[int64]*backendState{}}
}

// Run heartbeats every registered backend (re-read from the state every
// pass) at once and then every HeartbeatInterval, until ctx is done.
func (p *Pool) Run(ctx context.Context) error {
	term, _ := p.d.Term(ctx)
	gen := p.beginTerm(term)
	defer p.endTerm(gen)
	tick := time.NewTicker(p.d.HeartbeatInterval)
	defer tick.Stop()
	for {
		p.heartbeatPass(ctx, gen, term)
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// View is the admin API's BackendView: known is false until the backend has
// answered a heartbeat of this leader's current term.
func (p *Pool) View(backendID int64) (alive bool, epoch int64, known bool) {
	s, ok := p.Status(backendID)
	return s.Alive, s.Epoch, ok
}

// Status returns what this term has heard from a backend.
func (p *Pool) Status(backendID int64) (BackendStatus, bool) {
	now := p.d.Clock.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	b, ok := p.backends[backendID]
	if !p.running || !ok {
		return BackendStatus{}, false
	}
	return BackendStatus{Alive: p.aliveAt(b, now), Epoch: b.epoch, Capacity: b.capacity, LastHeard: b.lastOK}, true
}

// heardInTerm is the dispatcher's view: the backend's liveness and epoch,
// but only if they were heard by the pool run of the given term.
func (p *Pool) heardInTerm(backendID int64, term uint64) (alive bool, epoch int64, ok bool) {
	now := p.d.Clock.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	b, found := p.backends[backendID]
	if !p.running || p.term != term || term == 0 || !found {
		return false, 0, false
	}
	return p.aliveAt(b, now), b.epoch, true
}

// WaitFirstPass blocks until the pool's run of the given term has finished
// one heartbeat pass, or ctx is done.
func (p *Pool) WaitFirstPass(ctx context.Context, term uint64) error {
	for {
		p.mu.Lock()
		done := p.running && p.term == term && p.passes > 0
		ch := p.changed
		p.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (p *Pool) aliveAt(b *backendState, now time.Time) bool {
	return !b.lastOK.IsZero() && now.Sub(b.lastOK) <= aliveIntervals*p.d.HeartbeatInterval
}

// broadcastLocked wakes WaitFirstPass callers.
func (p *Pool) broadcastLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// beginTerm starts a run with an empty view and returns its generation.
func (p *Pool) beginTerm(term uint64) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gen++
	p.term, p.running, p.passes = term, true, 0
	p.backends = map[int64]*backendState{}
	p.broadcastLocked()
	return p.gen
}

// endTerm forgets everything the run heard: it belongs to a term that is over.
func (p *Pool) endTerm(gen uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gen != gen {
		return
	}
	p.running, p.passes = false, 0
	p.backends = map[int64]*backendState{}
	p.broadcastLocked()
}

// heartbeatPass heartbeats every registered backend in parallel, each call
// bounded by HeartbeatTimeout, and returns when all have answered or failed.
func (p *Pool) heartbeatPass(ctx context.Context, gen, term uint64) {
	backends := p.d.Reader.State().Backends()
	req := &wire.THeartbeatRequest{MasterID: p.d.MasterID}
	if term != 0 {
		t := int64(term)
		req.LeaderTerm = &t
	}
	if p.d.MasterAddresses != nil {
		req.MasterAddresses = p.d.MasterAddresses()
	}
	// req is shared by the calls: it is only read from here on.
	sem := make(chan struct{}, maxParallelHeartbeats)
	var wg sync.WaitGroup
	for _, b := range backends {
		if ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			cctx, cancel := context.WithTimeout(ctx, p.d.HeartbeatTimeout)
			resp, err := p.d.Backends.Heartbeat(cctx, b.Address, req)
			cancel()
			p.recordHeartbeat(gen, b.ID, resp, err)
		}()
	}
	wg.Wait()
	p.finishPass(gen, backends)
}

// recordHeartbeat keeps an OK answer of the current run. A failure, a
// non-OK status or an answer without an epoch changes nothing: it proves
// nothing, and liveness simply ages out.
func (p *Pool) recordHeartbeat(gen uint64, backendID int64, resp *wire.THeartbeatResponse, err error) {
	if err != nil || resp == nil || resp.Status == nil || resp.Status.StatusCode != wire.TStatusCode_OK || resp.BeProcessEpoch == 0 {
		fields := []zap.Field{zap.Int64("backend_id", backendID)}
		if err != nil {
			fields = append(fields, zap.Error(err))
		} else if resp != nil && resp.Status != nil {
			fields = append(fields, zap.Stringer("status", resp.Status.StatusCode))
		}
		p.log.Debug("heartbeat not answered OK", fields...)
		return
	}
	now := p.d.Clock.Now()
	p.mu.Lock()
	if p.gen != gen || !p.running {
		p.mu.Unlock()
		return
	}
	b, seen := p.backends[backendID]
	if !seen {
		b = &backendState{}
		p.backends[backendID] = b
	}
	epochChanged := seen && b.epoch != resp.BeProcessEpoch
	old := b.epoch
	b.lastOK, b.epoch, b.capacity = now, resp.BeProcessEpoch, resp.GetCapacity()
	becameAlive := !b.alive
	b.alive = true
	p.mu.Unlock()

	if epochChanged {
		p.log.Info("backend process epoch changed", zap.Int64("backend_id", backendID),
			zap.Int64("old_epoch", old), zap.Int64("epoch", resp.BeProcessEpoch))
	}
	if becameAlive {
		p.log.Info("backend alive", zap.Int64("backend_id", backendID), zap.Int64("epoch", resp.BeProcessEpoch))
	}
	if (epochChanged || becameAlive) && p.d.Waker != nil {
		p.d.Waker.Wake()
	}
}

// finishPass forgets unregistered backends, turns backends whose last OK
// answer is too old not-alive, and counts the pass.
func (p *Pool) finishPass(gen uint64, registered []*raftfsm.Backend) {
	now := p.d.Clock.Now()
	keep := make(map[int64]bool, len(registered))
	for _, b := range registered {
		keep[b.ID] = true
	}
	var died []int64
	p.mu.Lock()
	if p.gen != gen || !p.running {
		p.mu.Unlock()
		return
	}
	for id, b := range p.backends {
		if !keep[id] {
			delete(p.backends, id)
			continue
		}
		if b.alive && !p.aliveAt(b, now) {
			b.alive = false
			died = append(died, id)
		}
	}
	p.passes++
	p.broadcastLocked()
	p.mu.Unlock()

	for _, id := range died {
		p.log.Warn("backend not alive: no OK heartbeat within 3 intervals", zap.Int64("backend_id", id))
	}
	if len(died) > 0 && p.d.Waker != nil {
		p.d.Waker.Wake()
	}
}
