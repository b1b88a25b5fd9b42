package cluster

import (
	"errors"
	"fmt"
	"time"

	"github.com/lancemaster/lancemaster/pkg/config"
	"go.uber.org/zap"
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
	Peers []config.Peer
	// AddressBook, when set, maps a member id to its RPC address from the
	// replicated state (raftfsm's address book); it is consulted after the
	// addresses add-voter gave this node and before Peers. It must not
	// block: it is called on every leader lookup.
	AddressBook func(id string) (string, bool)
	// Join: with an empty data dir, do not bootstrap Peers; wait to be
	// added by the leader (AddVoter), whose log brings the configuration.
	Join bool
	// Timeouts: a profile of pkg/config (DefaultRaftTimeouts,
	// FastRaftTimeouts), or a node's (Node.RaftTimeouts). Zero means
	// DefaultRaftTimeouts.
	Timeouts config.RaftTimeouts
	// SnapshotThreshold, TrailingLogs, SnapshotInterval, SnapshotRetain,
	// ApplyTimeout: zero means pkg/config's Default* constant.
	SnapshotThreshold uint64
	TrailingLogs      uint64
	SnapshotInterval  time.Duration
	SnapshotRetain    int
	ApplyTimeout      time.Duration
	// LogStore is config.RaftLogStoreAuto, config.RaftLogStoreBoltDB or
	// config.RaftLogStoreWAL; "" means config.DefaultRaftLogStore (auto).
	// A data dir that holds another store than the one named is refused
	// (OpenLogStore).
	LogStore string
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
	if c.Timeouts == (config.RaftTimeouts{}) {
		c.Timeouts = config.DefaultRaftTimeouts()
	}
	if c.Timeouts.Commit == 0 {
		c.Timeouts.Commit = config.DefaultRaftTimeouts().Commit
	}
	if c.SnapshotThreshold == 0 {
		c.SnapshotThreshold = config.DefaultSnapshotThreshold
	}
	if c.TrailingLogs == 0 {
		c.TrailingLogs = config.DefaultTrailingLogs
	}
	if c.SnapshotInterval == 0 {
		c.SnapshotInterval = config.DefaultSnapshotInterval
	}
	if c.SnapshotRetain == 0 {
		c.SnapshotRetain = config.DefaultSnapshotRetain
	}
	if c.ApplyTimeout == 0 {
		c.ApplyTimeout = config.DefaultApplyTimeout
	}
	if c.LogStore == "" {
		c.LogStore = config.DefaultRaftLogStore
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
	if err := config.CheckRaftLogStore(c.LogStore); err != nil {
		errs = append(errs, err)
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

func (c Config) peer(id string) (config.Peer, bool) {
	for _, p := range c.Peers {
		if p.ID == id {
			return p, true
		}
	}
	return config.Peer{}, false
}
