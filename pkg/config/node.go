package config

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/rpc"
)

// Raft timeout profiles (docs/configuration.md). "default" suits most
// networks (unplanned failover ≈ 2 s); "fast" halves the timeouts for a
// low-latency LAN (failover ≈ 1.1 s) at the price of more elections under
// load or GC pauses.
const (
	RaftProfileDefault = "default"
	RaftProfileFast    = "fast"
)

// Node defaults, taken by any field the file and the flags leave unset.
const (
	DefaultLogFormat = "json"
	DefaultLogLevel  = "info"

	// minRaftTimeout is hashicorp/raft's own floor for its timeouts.
	minRaftTimeout = 5 * time.Millisecond
	maxNodeFile    = 1 << 20
)

// Peer is one master of the cluster: a `peers:` entry of the node file and
// the member the Raft layer (pkg/cluster) dials. Every master of a cluster
// is configured with the same list.
type Peer struct {
	// ID is the Raft server id: unique and stable for the node's whole life
	// (its data dir belongs to it).
	ID string `yaml:"id"`
	// RaftAddress is host:port where the node's Raft transport is reachable
	// by the other masters.
	RaftAddress string `yaml:"raft_address"`
	// RPCAddress is host:port of the node's Thrift service; followers forward
	// writes there when this node leads.
	RPCAddress string `yaml:"rpc_address"`
}

// Node is one master's configuration: a YAML file (LoadNode) overridden by
// flags (NodeFlags), then checked and completed by Validate.
//
// A Node is plain data, not safe for concurrent mutation; treat it as
// read-only once validated.
type Node struct {
	NodeID        string `yaml:"node_id"`
	RaftBind      string `yaml:"raft_bind"`      // defaults to raft_advertise
	RaftAdvertise string `yaml:"raft_advertise"` // defaults to this node's peers entry
	RPCBind       string `yaml:"rpc_bind"`       // defaults to rpc_advertise
	RPCAdvertise  string `yaml:"rpc_advertise"`  // defaults to this node's peers entry
	HTTPBind      string `yaml:"http_bind"`      // /metrics, /livez, /readyz; optional
	DataDir       string `yaml:"data_dir"`
	SecretsDir    string `yaml:"secrets_dir"` // optional; credentials references resolve here
	Peers         []Peer `yaml:"peers"`
	// Join: a master added to a running cluster. With an empty data dir it
	// does not bootstrap the peers list as a first configuration; it waits
	// until the leader adds it (operator raft add-voter) and takes the
	// cluster's configuration from the leader. Ignored once the data dir
	// holds raft state.
	Join bool `yaml:"join"`

	// Timeouts picks the raft timeout profile (RaftProfileDefault or
	// RaftProfileFast); a set override below wins over the profile.
	Timeouts           string        `yaml:"timeouts"`
	HeartbeatTimeout   time.Duration `yaml:"heartbeat_timeout"`
	ElectionTimeout    time.Duration `yaml:"election_timeout"`
	LeaderLeaseTimeout time.Duration `yaml:"leader_lease_timeout"`

	SnapshotThreshold uint64        `yaml:"snapshot_threshold"`
	SnapshotInterval  time.Duration `yaml:"snapshot_interval"`
	TrailingLogs      uint64        `yaml:"trailing_logs"`
	// RaftLogStore is RaftLogStoreAuto (the default: the store the data
	// dir holds, raft-wal for a new one), RaftLogStoreBoltDB or
	// RaftLogStoreWAL. A data dir keeps the store it was created with: a
	// master configured with the other store refuses to start on it.
	RaftLogStore string `yaml:"raft_log_store"`

	LogFormat string `yaml:"log_format"` // json | console
	LogLevel  string `yaml:"log_level"`  // debug | info | warn | error

	// TLS turns on mutual TLS for every Thrift listener and client of the
	// node and for Raft (all three files, or none: plaintext).
	TLS rpc.TLSFiles `yaml:"tls"`

	// HTTPAPIPlaintext serves the read API (/v1) and the console (/ui) on
	// a plaintext http_bind that is not loopback, where they answer 403
	// otherwise (docs/http-api.md).
	HTTPAPIPlaintext bool `yaml:"http_api_plaintext"`
}

// DefaultNode returns a Node with every default set and no identity or
// addresses: the starting point when there is no file.
func DefaultNode() *Node {
	return &Node{
		Timeouts:          RaftProfileDefault,
		SnapshotThreshold: DefaultSnapshotThreshold,
		SnapshotInterval:  DefaultSnapshotInterval,
		TrailingLogs:      DefaultTrailingLogs,
		RaftLogStore:      DefaultRaftLogStore,
		LogFormat:         DefaultLogFormat,
		LogLevel:          DefaultLogLevel,
	}
}

// LoadNode reads a node file over DefaultNode. Unknown keys (typos) and
// duplicate keys are errors. It does not validate: apply flags, then call
// Validate.
func LoadNode(path string) (*Node, error) {
	n := DefaultNode()
	if err := LoadYAML("node config", path, maxNodeFile, n); err != nil {
		return nil, err
	}
	return n, nil
}

// ParseNode decodes YAML over DefaultNode, as LoadNode does.
func ParseNode(data []byte) (*Node, error) {
	n := DefaultNode()
	if err := DecodeYAML(data, n); err != nil {
		return nil, err
	}
	return n, nil
}

// RPCAddresses are the peers' RPC addresses (a backend's masters list, the
// masters a leader's services reach).
func RPCAddresses(peers []Peer) []string {
	out := make([]string, 0, len(peers))
	for _, p := range peers {
		out = append(out, p.RPCAddress)
	}
	return out
}

// Self returns this node's peers entry.
func (n *Node) Self() (Peer, bool) {
	for _, p := range n.Peers {
		if p.ID == n.NodeID {
			return p, true
		}
	}
	return Peer{}, false
}

// RaftTimeouts returns the effective raft timeouts: the profile's, with
// every set override applied. An unknown profile reads as "default"
// (Validate rejects it).
func (n *Node) RaftTimeouts() RaftTimeouts {
	t := DefaultRaftTimeouts()
	if n.Timeouts == RaftProfileFast {
		t = FastRaftTimeouts()
	}
	if n.HeartbeatTimeout > 0 {
		t.Heartbeat = n.HeartbeatTimeout
	}
	if n.ElectionTimeout > 0 {
		t.Election = n.ElectionTimeout
	}
	if n.LeaderLeaseTimeout > 0 {
		t.LeaderLease = n.LeaderLeaseTimeout
	}
	return t
}

// Validate completes the derived fields, then checks everything, and
// returns every problem found at once (errors.Join), each naming its field:
//
//   - raft_advertise / rpc_advertise default to this node's peers entry,
//     and must equal it when set; raft_bind / rpc_bind default to them;
//   - node_id is required and must be among peers; peer ids and addresses
//     are unique; every address is host:port with a port in 1..65535, and
//     advertised ones have a concrete host;
//   - data_dir is required; raft timeouts satisfy raft's own rules
//     (lease ≤ heartbeat ≤ election, each ≥ 5 ms);
//   - tls names ca, cert and key together or not at all (the files are
//     read when the master starts).
//
// Validate is idempotent.
func (n *Node) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("config: "+format, args...)) }

	if n.NodeID == "" {
		bad("node_id is required")
	} else if !job.ValidNodeID(n.NodeID) {
		bad("node_id %q: use 1-64 letters, digits, '.', '_' or '-'", clip(n.NodeID))
	}

	if len(n.Peers) == 0 {
		bad("peers is empty: list every master, this one included")
	}
	ids, raftAddrs, rpcAddrs := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for i, p := range n.Peers {
		where := fmt.Sprintf("peers[%d]", i)
		if p.ID == "" {
			bad("%s.id is required", where)
		} else if ids[p.ID] {
			bad("%s.id %q is listed twice", where, clip(p.ID))
		}
		ids[p.ID] = true
		checkAddr(bad, where+".raft_address", p.RaftAddress, true)
		checkAddr(bad, where+".rpc_address", p.RPCAddress, true)
		if p.RaftAddress != "" && raftAddrs[p.RaftAddress] {
			bad("%s.raft_address %s is used by another peer", where, p.RaftAddress)
		}
		if p.RPCAddress != "" && rpcAddrs[p.RPCAddress] {
			bad("%s.rpc_address %s is used by another peer", where, p.RPCAddress)
		}
		raftAddrs[p.RaftAddress], rpcAddrs[p.RPCAddress] = true, true
	}

	self, ok := n.Self()
	if n.NodeID != "" && len(n.Peers) > 0 && !ok {
		bad("node_id %q is not among peers (ids: %s)", clip(n.NodeID), peerIDs(n.Peers))
	}
	if ok {
		n.RaftAdvertise = orDefault(n.RaftAdvertise, self.RaftAddress)
		n.RPCAdvertise = orDefault(n.RPCAdvertise, self.RPCAddress)
		if n.RaftAdvertise != self.RaftAddress {
			bad("raft_advertise %s differs from this node's peers entry (%s)", n.RaftAdvertise, self.RaftAddress)
		}
		if n.RPCAdvertise != self.RPCAddress {
			bad("rpc_advertise %s differs from this node's peers entry (%s)", n.RPCAdvertise, self.RPCAddress)
		}
	}
	n.RaftBind = orDefault(n.RaftBind, n.RaftAdvertise)
	n.RPCBind = orDefault(n.RPCBind, n.RPCAdvertise)
	checkAddr(bad, "raft_advertise", n.RaftAdvertise, true)
	checkAddr(bad, "rpc_advertise", n.RPCAdvertise, true)
	checkAddr(bad, "raft_bind", n.RaftBind, false)
	checkAddr(bad, "rpc_bind", n.RPCBind, false)
	if n.HTTPBind != "" {
		checkBindAddr(bad, "http_bind", n.HTTPBind)
	}

	if n.DataDir == "" {
		bad("data_dir is required")
	}

	switch n.Timeouts {
	case RaftProfileDefault, RaftProfileFast:
	case "":
		n.Timeouts = RaftProfileDefault
	default:
		bad("timeouts %q: use %q or %q", clip(n.Timeouts), RaftProfileDefault, RaftProfileFast)
	}
	for _, o := range []struct {
		name string
		d    time.Duration
	}{
		{"heartbeat_timeout", n.HeartbeatTimeout},
		{"election_timeout", n.ElectionTimeout},
		{"leader_lease_timeout", n.LeaderLeaseTimeout},
	} {
		if o.d < 0 || (o.d > 0 && o.d < minRaftTimeout) {
			bad("%s %v: must be at least %v", o.name, o.d, minRaftTimeout)
		}
	}
	t := n.RaftTimeouts()
	if t.LeaderLease > t.Heartbeat {
		bad("leader_lease_timeout %v must not exceed heartbeat_timeout %v (after applying the %s profile)", t.LeaderLease, t.Heartbeat, n.Timeouts)
	}
	if t.Election < t.Heartbeat {
		bad("election_timeout %v must not be below heartbeat_timeout %v (after applying the %s profile)", t.Election, t.Heartbeat, n.Timeouts)
	}
	if n.SnapshotThreshold == 0 {
		bad("snapshot_threshold must be positive")
	}
	if n.SnapshotInterval < minRaftTimeout {
		bad("snapshot_interval %v: must be at least %v", n.SnapshotInterval, minRaftTimeout)
	}
	if err := CheckRaftLogStore(n.RaftLogStore); err != nil {
		bad("%v", err)
	}
	if err := checkLogging(n.LogFormat, n.LogLevel); err != nil {
		errs = append(errs, err)
	}
	if err := n.TLS.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("config: %w", err))
	}
	return errors.Join(errs...)
}

// checkAddr reports a problem with a host:port. An advertised address needs
// a concrete host; a bind address may leave the host empty (all interfaces).
func checkAddr(bad func(string, ...any), field, addr string, advertised bool) {
	if addr == "" {
		bad("%s is required", field)
		return
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		bad("%s %q is not host:port", field, clip(addr))
		return
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		bad("%s %q: port must be 1-65535", field, clip(addr))
	}
	if advertised {
		if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
			bad("%s %q: other nodes cannot dial an unspecified host", field, clip(addr))
		}
	}
}

// checkBindAddr checks a listener that nothing dials by configuration (the
// HTTP listener): port 0 asks the kernel for a free port at start, which the
// master logs and reports (tests use it so no port is picked, released and
// bound again later).
func checkBindAddr(bad func(string, ...any), field, addr string) {
	if _, port, err := net.SplitHostPort(addr); err == nil && port == "0" {
		return
	}
	checkAddr(bad, field, addr, false)
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func peerIDs(ps []Peer) string {
	var b bytes.Buffer
	for i, p := range ps {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(clip(p.ID))
	}
	return b.String()
}

// clip bounds a user-supplied value echoed in an error.
// clip shortens a bad value quoted in an error message.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
