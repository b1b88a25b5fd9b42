package cluster

import (
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"
)

// Peer is one master of the static voter list. Every master of a cluster is
// configured with the same list.
type Peer struct {
	// ID is the Raft server id: unique and stable for the node's whole life
	// (its data dir belongs to it).
	ID string
	// RaftAddress is host:port where the node's Raft transport is reachable
	// by the other masters.
	RaftAddress string
	// RPCAddress is host:port of the node's Thrift service; followers forward
	// writes there when this node leads.
	RPCAddress string
}

// Timeouts are the Raft timing knobs. Every master of a cluster should use the
// same profile.
type Timeouts struct {
	// Heartbeat is how long a follower waits without hearing from the leader
	// before it starts an election.
	Heartbeat time.Duration
	// Election is how long a candidate waits for votes before it retries.
	// Must be >= Heartbeat.
	Election time.Duration
	// LeaderLease is how long a leader keeps leading without reaching a
	// quorum before it steps down. Must be <= Heartbeat.
	LeaderLease time.Duration
	// Commit is how long an idle leader waits before it tells followers the
	// new commit index.
	Commit time.Duration
}

// DefaultTimeouts is the conservative profile (hashicorp/raft's defaults):
// 1 s heartbeat and election, 500 ms lease. An unplanned leader loss costs
// about 2 s of write unavailability on this machine kind; use it on busy or
// shared hosts and across zones, where a 500 ms pause must not cause an
// election.
func DefaultTimeouts() Timeouts {
	return Timeouts{
		Heartbeat:   time.Second,
		Election:    time.Second,
		LeaderLease: 500 * time.Millisecond,
		Commit:      50 * time.Millisecond,
	}
}

// FastTimeouts halves everything: 500 ms heartbeat and election, 250 ms
// lease. An unplanned leader loss costs about 1.1 s; the price is spurious
// elections when a host stalls (GC, disk, noisy neighbour) for ~500 ms. Use it
// on dedicated hosts in one zone, and in tests.
func FastTimeouts() Timeouts {
	return Timeouts{
		Heartbeat:   500 * time.Millisecond,
		Election:    500 * time.Millisecond,
		LeaderLease: 250 * time.Millisecond,
		Commit:      50 * time.Millisecond,
	}
}

// Defaults applied by New to zero Config fields.
const (
	// DefaultSnapshotThreshold: new entries since the last snapshot that make
	// the next snapshot check take one (raft's default).
	DefaultSnapshotThreshold = 8192
	// DefaultTrailingLogs: entries kept after a snapshot, so a follower that
	// fell a little behind catches up from the log instead of a snapshot.
	DefaultTrailingLogs = 10240
	// DefaultSnapshotInterval: how often raft checks the threshold (it
	// staggers randomly between 1x and 2x).
	DefaultSnapshotInterval = 120 * time.Second
	// DefaultSnapshotRetain: snapshots kept on disk; two lets an operator
	// recover from a corrupt newest one.
	DefaultSnapshotRetain = 2
	// DefaultApplyTimeout bounds one raft.Apply (enqueue + commit + FSM
	// apply) when the caller's context has no earlier deadline.
	DefaultApplyTimeout = 10 * time.Second
)

// Config is one master's cluster configuration.
type Config struct {
	// NodeID is this node's Peer.ID; it must appear in Peers.
	NodeID string
	// RaftBind is the listen address of the Raft transport (e.g. 0.0.0.0:7000).
	RaftBind string
	// RaftAdvertise is the address other masters dial; empty means this
	// node's Peer.RaftAddress. It must resolve to an IP:port (hashicorp/raft's
	// TCP transport needs a resolved address).
	RaftAdvertise string
	// DataDir holds the Raft state, under DataDir/raft (see docs/cluster.md).
	DataDir string
	// Peers is the static voter list, identical on every master. It is used
	// to bootstrap a brand-new cluster and to map a leader id to its RPC
	// address.
	Peers []Peer
	// AddressBook, when set, maps a member id to its RPC address from the
	// replicated state (raftfsm's address book); it is consulted after the
	// addresses add-voter gave this node and before Peers. It must not
	// block: it is called on every leader lookup.
	AddressBook func(id string) (string, bool)
	// Join: with an empty data dir, do not bootstrap Peers; wait to be
	// added by the leader (AddVoter), whose log brings the configuration.
	Join bool
	// Timeouts: DefaultTimeouts or FastTimeouts. Zero means DefaultTimeouts.
	Timeouts Timeouts
	// SnapshotThreshold, TrailingLogs, SnapshotInterval, SnapshotRetain,
	// ApplyTimeout: zero means the Default* constant above.
	SnapshotThreshold uint64
	TrailingLogs      uint64
	SnapshotInterval  time.Duration
	SnapshotRetain    int
	ApplyTimeout      time.Duration
	// Logger receives the node's and raft's logs; nil means zap.NewNop().
	// It should already name the node (a master's root logger carries
	// node_id): the cluster adds no identifying field of its own, so that
	// no log line carries a key twice.
	Logger *zap.Logger
	// RaftTLS, when set, runs the Raft transport over mutual TLS
	// (tlsstream.go); nil keeps it plain TCP.
	RaftTLS *RaftTLS
}

// withDefaults returns a copy with zero fields filled in.
func (c Config) withDefaults() Config {
	if c.Timeouts == (Timeouts{}) {
		c.Timeouts = DefaultTimeouts()
	}
	if c.Timeouts.Commit == 0 {
		c.Timeouts.Commit = DefaultTimeouts().Commit
	}
	if c.SnapshotThreshold == 0 {
		c.SnapshotThreshold = DefaultSnapshotThreshold
	}
	if c.TrailingLogs == 0 {
		c.TrailingLogs = DefaultTrailingLogs
	}
	if c.SnapshotInterval == 0 {
		c.SnapshotInterval = DefaultSnapshotInterval
	}
	if c.SnapshotRetain == 0 {
		c.SnapshotRetain = DefaultSnapshotRetain
	}
	if c.ApplyTimeout == 0 {
		c.ApplyTimeout = DefaultApplyTimeout
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.RaftAdvertise == "" {
		if self, ok := c.peer(c.NodeID); ok {
			c.RaftAdvertise = self.RaftAddress
		}
	}
	return c
}

// validate checks what raft itself would only discover late or never: a
// peer list that differs between nodes cannot be detected here, which is why
// docs/cluster.md insists it is one shared file.
func (c Config) validate() error {
	var errs []error
	if c.NodeID == "" {
		errs = append(errs, errors.New("node id is empty"))
	}
	if c.RaftBind == "" {
		errs = append(errs, errors.New("raft bind address is empty"))
	}
	if c.DataDir == "" {
		errs = append(errs, errors.New("data dir is empty"))
	}
	if len(c.Peers) == 0 {
		errs = append(errs, errors.New("peer list is empty"))
	}
	ids := make(map[string]bool, len(c.Peers))
	addrs := make(map[string]bool, len(c.Peers))
	for i, p := range c.Peers {
		switch {
		case p.ID == "":
			errs = append(errs, fmt.Errorf("peer %d: id is empty", i))
		case ids[p.ID]:
			errs = append(errs, fmt.Errorf("peer %q listed twice", p.ID))
		}
		switch {
		case p.RaftAddress == "":
			errs = append(errs, fmt.Errorf("peer %q: raft address is empty", p.ID))
		case addrs[p.RaftAddress]:
			errs = append(errs, fmt.Errorf("peer %q: raft address %s used by another peer", p.ID, p.RaftAddress))
		}
		if p.RPCAddress == "" {
			errs = append(errs, fmt.Errorf("peer %q: rpc address is empty", p.ID))
		}
		ids[p.ID], addrs[p.RaftAddress] = true, true
	}
	if c.NodeID != "" && len(c.Peers) > 0 && !ids[c.NodeID] {
		errs = append(errs, fmt.Errorf("node id %q is not in the peer list", c.NodeID))
	}
	if c.SnapshotRetain < 1 {
		errs = append(errs, fmt.Errorf("snapshot retain %d < 1", c.SnapshotRetain))
	}
	if c.ApplyTimeout < 0 {
		errs = append(errs, fmt.Errorf("apply timeout %s < 0", c.ApplyTimeout))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cluster: invalid config: %w", err)
	}
	return nil
}

func (c Config) peer(id string) (Peer, bool) {
	for _, p := range c.Peers {
		if p.ID == id {
			return p, true
		}
	}
	return Peer{}, false
}
