package dispatch

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"

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
	Clock    func() time.Time // default time.Now
	Term     TermFunc         // the leadership term heartbeats carry
	Waker    *Waker           // woken on an epoch change or an alive flip; optional
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
	Alive     bool      // an OK heartbeat of this cluster within 3 intervals
	Epoch     int64     // the latest process epoch heard
	Capacity  int32     // workers it says it can run at once (0: not said)
	Version   string    // what its latest OK heartbeat said it runs ("" when not said)
	LastHeard time.Time // when the latest OK heartbeat was answered (Clock)
	// Accepting: the latest answered heartbeat was OK and said the backend
	// accepts dispatches now (an old backend that does not say counts as
	// accepting). NotAcceptingReason is what it said otherwise.
	Accepting          bool
	NotAcceptingReason string
	// Refused: a dispatch to it was proven never enqueued (refused, or the
	// connection was not established) and no OK, accepting heartbeat sent
	// after that has been answered yet (DESIGN.md §13.2).
	Refused bool
	// OtherCluster: the latest answer said it serves another cluster
	// (status OTHER_CLUSTER or another cluster_id), named by ClusterID.
	OtherCluster bool
	ClusterID    string
	// OutboxDelivered: the current process (Epoch) said every report it
	// found in its outbox at start is delivered or dropped (§13.3).
	OutboxDelivered bool
}

// Dispatchable reports whether new work may go to the backend: alive,
// accepting, of this cluster, and not refused since its last OK, accepting
// heartbeat.
func (s BackendStatus) Dispatchable() bool {
	return s.Alive && s.Accepting && !s.Refused && !s.OtherCluster
}

// Pool is the leader-local view of the backends (DESIGN.md §7, §13.1):
// liveness, the latest process epoch, capacity, whether the backend accepts
// work and serves this cluster, learned from heartbeats. It is a leader
// service: Run heartbeats every registered backend every interval.
//
// A backend is dispatchable only when its latest answered heartbeat of this
// term was OK, accepting and of this cluster, and no dispatch to it has
// been refused since the heartbeat that said so was sent (MarkRefused):
// a refusing backend is not picked again until a heartbeat sent after the
// refusal says it accepts.
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
	// seq numbers heartbeat calls in the order they are sent (this run); a
	// refusal remembers the highest number sent before it.
	seq uint64
}

type backendState struct {
	lastOK          time.Time // zero until an OK answer of this cluster
	epoch           int64
	capacity        int32
	version         string
	alive           bool // as of the last evaluation: an alive flip wakes the dispatcher
	accepting       bool // the latest answered heartbeat: OK and accepting
	notAccepting    string
	outboxDelivered bool // said by the process of epoch
	// otherCluster: the latest answer named another cluster (theirs).
	otherCluster bool
	theirs       string
	// refused: a dispatch was proven never enqueued after every heartbeat
	// numbered up to refusedSeq was sent; only a later one clears it.
	refused    bool
	refusedSeq uint64
}

// NewPool returns a Pool; nothing is heard until Run.
func NewPool(d PoolDeps) *Pool {
	if d.Clock == nil {
		d.Clock = time.Now
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

// Heard is the admin API's BackendHeard: leading is false when this node
// runs no pool (it is not the leader), and lastHeard is zero until the
// backend has answered an OK heartbeat of this cluster during the current
// term (version: what that heartbeat said it runs). A leading pool that has
// not heard a backend says so: not alive.
func (p *Pool) Heard(backendID int64) (lastHeard time.Time, version string, leading bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.running {
		return time.Time{}, "", false
	}
	if b, ok := p.backends[backendID]; ok {
		return b.lastOK, b.version, true
	}
	return time.Time{}, "", true
}

// Status returns what this term has heard from a backend; ok is false
// until its epoch has been heard this term (the status may still say
// OtherCluster).
func (p *Pool) Status(backendID int64) (BackendStatus, bool) {
	now := p.d.Clock()
	p.mu.Lock()
	defer p.mu.Unlock()
	b, ok := p.backends[backendID]
	if !p.running || !ok {
		return BackendStatus{}, false
	}
	return p.statusLocked(b, now), b.epoch != 0
}

func (p *Pool) statusLocked(b *backendState, now time.Time) BackendStatus {
	return BackendStatus{Alive: p.aliveAt(b, now), Epoch: b.epoch, Capacity: b.capacity, Version: b.version, LastHeard: b.lastOK,
		Accepting: b.accepting, NotAcceptingReason: b.notAccepting, Refused: b.refused,
		OtherCluster: b.otherCluster, ClusterID: b.theirs, OutboxDelivered: b.outboxDelivered}
}

// heardInTerm is the dispatcher's view of a backend, but only if its epoch
// was heard by the pool run of the given term (ok false otherwise).
func (p *Pool) heardInTerm(backendID int64, term uint64) (BackendStatus, bool) {
	now := p.d.Clock()
	p.mu.Lock()
	defer p.mu.Unlock()
	b, found := p.backends[backendID]
	if !p.running || p.term != term || term == 0 || !found || b.epoch == 0 {
		return BackendStatus{}, false
	}
	return p.statusLocked(b, now), true
}

// MarkRefused records that a dispatch to the backend, during the pool's run
// of term, was proven never enqueued (DESIGN.md §13.2): the backend is not
// dispatchable until it answers OK and accepting to a heartbeat sent after
// this call. A heartbeat already in flight does not clear it.
func (p *Pool) MarkRefused(backendID int64, term uint64) {
	p.mu.Lock()
	b, found := p.backends[backendID]
	if !p.running || p.term != term || term == 0 || !found {
		p.mu.Unlock()
		return
	}
	first := !b.refused
	b.refused, b.refusedSeq = true, p.seq
	p.mu.Unlock()
	if first {
		p.log.Info("backend refused a dispatch or could not be reached; not picked again until its next OK, accepting heartbeat",
			zap.Int64("backend_id", backendID))
	}
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
	return !b.lastOK.IsZero() && !b.otherCluster && now.Sub(b.lastOK) <= aliveIntervals*p.d.HeartbeatInterval
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
	p.term, p.running, p.passes, p.seq = term, true, 0, 0
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
