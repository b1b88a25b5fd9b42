package cluster

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/pkg/broadcast"
	"github.com/lancemaster/lancemaster/pkg/config"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// Node is one master's Raft member: transport, stores, bootstrap, the
// leadership monitor that runs the leader services, and propose-or-forward.
// See the package doc for the concurrency contract.
type Node struct {
	cfg      Config
	log      *zap.Logger
	fsm      raft.FSM
	fwd      Forwarder
	rpcAddrs map[string]string // peer id -> RPC address (static peer list)
	raftConf *raft.Config

	// learnedRPC: peer id -> RPC address given to AddVoter on this node
	// (membership.go); it wins over rpcAddrs.
	learnedRPC sync.Map

	// mu serialises the lifecycle (AddLeaderService, OnLeaderReady, Start,
	// Shutdown) and guards the fields below it. Hot paths never take it.
	mu       sync.Mutex
	services []namedService
	onReady  func(ctx context.Context) error
	started  bool
	st       *storage
	observer *raft.Observer

	r       atomic.Pointer[raft.Raft] // set once by a successful Start
	stopped atomic.Bool               // set first thing by Shutdown

	notifyCh chan bool             // raft -> pump: leadership gained/lost
	obsCh    chan raft.Observation // raft -> pump: leader changed
	wake     chan struct{}         // pump -> monitor, capacity 1
	stopCh   chan struct{}         // closed by Shutdown: monitor stops
	pumpStop chan struct{}         // closed after raft.Shutdown: pump stops
	bg       sync.WaitGroup        // monitor
	pumpDone sync.WaitGroup        // pump

	contacts   *contactBook  // the leader's AppendEntries answers per follower (contact.go)
	reads      readBatches   // callers of ReadIndex waiting for a shared confirmation
	readRounds atomic.Uint64 // confirmations ReadIndex has run
	// readRoundHook, set by this package's tests only, runs in each
	// round between reading the commit index and confirming it.
	readRoundHook func()
	leaderChange  broadcast.Signal // broadcast on every leader change
	term          atomic.Uint64    // term of the leadership whose barrier is done
	activeSvcs    atomic.Int64     // leader services currently inside Run
	shutdownOnce  sync.Once
	shutdownErr   error
}

type namedService struct {
	name string
	r    Runnable
}

// New validates cfg and prepares a node; it does no I/O. fsm is the
// replicated state machine (raftfsm.New in production); its Apply must
// return *journal.TApplyResponse. fwd carries follower writes to the leader;
// nil means followers answer raftfsm.ErrNotLeader instead of forwarding.
func New(cfg Config, fsm raft.FSM, fwd Forwarder) (*Node, error) {
	if fsm == nil {
		return nil, errors.New("cluster: FSM is nil")
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.Peers = append([]config.Peer(nil), cfg.Peers...)
	n := &Node{
		cfg:      cfg,
		log:      cfg.Logger, // the caller names the node (a master's root logger carries node_id)
		fsm:      fsm,
		fwd:      fwd,
		rpcAddrs: make(map[string]string, len(cfg.Peers)),
		notifyCh: make(chan bool, notifyBuffer),
		obsCh:    make(chan raft.Observation, notifyBuffer),
		wake:     make(chan struct{}, 1),
		stopCh:   make(chan struct{}),
		pumpStop: make(chan struct{}),
		contacts: newContactBook(nil),
	}
	for _, p := range cfg.Peers {
		n.rpcAddrs[p.ID] = p.RPCAddress
	}
	n.raftConf = n.buildRaftConfig()
	if err := raft.ValidateConfig(n.raftConf); err != nil {
		return nil, fmt.Errorf("cluster: invalid raft config: %w", err)
	}
	return n, nil
}

// notifyBuffer sizes the leadership channels; the pump drains them at once,
// the buffer only absorbs bursts of flapping.
const notifyBuffer = 16

func (n *Node) buildRaftConfig() *raft.Config {
	c := raft.DefaultConfig()
	c.LocalID = raft.ServerID(n.cfg.NodeID)
	c.HeartbeatTimeout = n.cfg.Timeouts.Heartbeat
	c.ElectionTimeout = n.cfg.Timeouts.Election
	c.LeaderLeaseTimeout = n.cfg.Timeouts.LeaderLease
	c.CommitTimeout = n.cfg.Timeouts.Commit
	c.SnapshotThreshold = n.cfg.SnapshotThreshold
	c.TrailingLogs = n.cfg.TrailingLogs
	c.SnapshotInterval = n.cfg.SnapshotInterval
	c.NotifyCh = n.notifyCh
	// BatchApplyCh stays off: with it raft no longer honours Apply timeouts.
	c.Logger = newHCLog(n.log, "raft")
	return c
}

// AddLeaderService registers a service the node runs while it leads. Call it
// before Start (it panics after Start, or on a duplicate name); names appear
// in logs.
func (n *Node) AddLeaderService(name string, r Runnable) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.started {
		panic("cluster: AddLeaderService after Start")
	}
	for _, s := range n.services {
		if s.name == name {
			panic("cluster: leader service " + name + " added twice")
		}
	}
	n.services = append(n.services, namedService{name: name, r: r})
}

// OnLeaderReady sets a hook run on every leadership gain after the Raft
// barrier and before the leader services start (the place to journal R4,
// DESIGN.md §8). It is retried with backoff while this node still leads; the
// services start only once it succeeded. Call it before Start.
func (n *Node) OnLeaderReady(fn func(ctx context.Context) error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.started {
		panic("cluster: OnLeaderReady after Start")
	}
	n.onReady = fn
}

// Start opens the stores under DataDir, binds the transport, bootstraps the
// static peer list if the data dir is new, starts raft and the leadership
// monitor. ctx bounds only the start itself; the node runs until Shutdown.
// Start may be called once.
func (n *Node) Start(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.started {
		return errors.New("cluster: Start called twice")
	}
	n.started = true
	if n.stopped.Load() {
		return ErrShutdown
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("cluster: start: %w", err)
	}
	st, err := openStorage(n.cfg, n.raftConf.Logger)
	if err != nil {
		return err
	}
	// A peers.json in the raft dir is a lost-quorum recovery (recovery.go).
	recovered, err := recoverFromPeersJSON(n.raftConf, n.cfg, n.fsm, st, n.log)
	bootstrapped := false
	if err == nil && !recovered {
		bootstrapped, err = bootstrapIfNew(n.raftConf, n.cfg, st, n.log)
	}
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return errors.Join(err, st.close())
	}
	r, err := raft.NewRaft(n.raftConf, n.fsm, st.logs, st.store, st.snapshots, &contactTransport{st.transport, n.contacts})
	if err != nil {
		return errors.Join(fmt.Errorf("cluster: start raft: %w", err), st.close())
	}
	n.st = st
	n.observer = raft.NewObserver(n.obsCh, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	r.RegisterObserver(n.observer)
	n.r.Store(r)
	n.pumpDone.Add(1)
	go n.pump()
	n.bg.Add(1)
	go n.monitor()
	n.log.Info("raft started",
		zap.String("raft_bind", n.cfg.RaftBind),
		zap.String("raft_advertise", string(st.transport.LocalAddr())),
		zap.String("data_dir", n.cfg.DataDir),
		zap.Bool("bootstrapped", bootstrapped),
		zap.Int("peers", len(n.cfg.Peers)),
		zap.Int("leader_services", len(n.services)),
		zap.Uint64("applied_index", r.AppliedIndex()))
	return nil
}

// running returns raft, or ErrShutdown before Start and after Shutdown.
func (n *Node) running() (*raft.Raft, error) {
	r := n.r.Load()
	if r == nil || n.stopped.Load() {
		return nil, ErrShutdown
	}
	return r, nil
}

// ID is this node's id.
func (n *Node) ID() string { return n.cfg.NodeID }

// IsLeader reports whether raft considers this node the leader now. The
// leader services may not have started yet (barrier, hook).
func (n *Node) IsLeader() bool {
	r, err := n.running()
	return err == nil && r.State() == raft.Leader
}

// LeaderTerm is the Raft term of this node's current leadership (the
// dispatch fencing token, DESIGN.md §7), or 0 when it does not lead. It
// turns non-zero only once the term's barrier has completed (the local FSM
// has applied every entry of earlier terms), so LeaderTerm() != 0 also means
// "leading and caught up". Leader services read their own term with
// LeaderTermFromContext.
func (n *Node) LeaderTerm() uint64 {
	r, err := n.running()
	if err != nil || r.State() != raft.Leader {
		return 0
	}
	if t := n.term.Load(); t == r.CurrentTerm() {
		return t
	}
	return 0
}

// Leader returns the current leader's id and RPC address as this node knows
// them; both are empty when no leader is known. rpcAddr is empty when the
// leader is in neither the static peer list nor this node's address book
// (membership.go).
func (n *Node) Leader() (id, rpcAddr string) {
	r, err := n.running()
	if err != nil {
		return "", ""
	}
	_, lid := r.LeaderWithID()
	return string(lid), n.rpcAddress(string(lid))
}

// AppliedIndex is the index of the last entry the local FSM has applied.
func (n *Node) AppliedIndex() uint64 {
	if r := n.r.Load(); r != nil {
		return r.AppliedIndex()
	}
	return 0
}

// LastContact is when this node last heard from a leader (raft's
// follower view); zero before it ever did, or before Start.
func (n *Node) LastContact() time.Time {
	if r := n.r.Load(); r != nil {
		return r.LastContact()
	}
	return time.Time{}
}

// Stats returns raft's stats (state, term, indexes, last contact, ...) plus
// node_id, leader_term, leader_services_running and read_index_rounds (the
// leadership confirmations ReadIndex has run on this node since it
// started).
func (n *Node) Stats() map[string]string {
	s := map[string]string{}
	if r := n.r.Load(); r != nil {
		s = r.Stats()
	} else {
		s["state"] = "NotStarted"
	}
	s["node_id"] = n.cfg.NodeID
	s["leader_term"] = strconv.FormatUint(n.LeaderTerm(), 10)
	s["leader_services_running"] = strconv.FormatInt(n.activeSvcs.Load(), 10)
	s["read_index_rounds"] = strconv.FormatUint(n.readRounds.Load(), 10)
	return s
}

// compile-time check of the Proposer contract.
var _ raftfsm.Proposer = (*Node)(nil)
