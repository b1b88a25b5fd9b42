package config

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// NodeFlags are the command-line overrides of a Node. Cobra parses flags
// before the config file can be read (its path is itself a flag), so the
// override is two steps:
//
//	nf := config.BindNodeFlags(cmd.Flags())      // when building the command
//	...
//	n, err := config.LoadNode(path)              // in RunE (or DefaultNode())
//	if err == nil { err = nf.Apply(n) }          // flags the user set win
//	if err == nil { err = n.Validate() }
//
// Only flags the user actually set override the file; a flag left at its
// default never clobbers a value from the file.
//
// Not safe for concurrent use (it belongs to one command invocation).
type NodeFlags struct {
	fs *pflag.FlagSet
	v  Node
	// peers holds --peer values: ID=RAFT_ADDR,RPC_ADDR.
	peers []string
}

// Flag names.
const (
	FlagNodeID             = "node-id"
	FlagRaftBind           = "raft-bind"
	FlagRaftAdvertise      = "raft-advertise"
	FlagRPCBind            = "rpc-bind"
	FlagRPCAdvertise       = "rpc-advertise"
	FlagHTTPBind           = "http-bind"
	FlagHTTPAPIPlaintext   = "http-api-plaintext"
	FlagDataDir            = "data-dir"
	FlagSecretsDir         = "secrets-dir"
	FlagPeer               = "peer"
	FlagJoin               = "join"
	FlagTimeouts           = "timeouts"
	FlagHeartbeatTimeout   = "heartbeat-timeout"
	FlagElectionTimeout    = "election-timeout"
	FlagLeaderLeaseTimeout = "leader-lease-timeout"
	FlagSnapshotThreshold  = "snapshot-threshold"
	FlagSnapshotInterval   = "snapshot-interval"
	FlagTrailingLogs       = "trailing-logs"
	FlagRaftLogStore       = "raft-log-store"
	FlagLogFormat          = "log-format"
	FlagLogLevel           = "log-level"
)

// BindNodeFlags registers the node flags on fs.
func BindNodeFlags(fs *pflag.FlagSet) *NodeFlags {
	f := &NodeFlags{fs: fs}
	d := DefaultNode()
	fs.StringVar(&f.v.NodeID, FlagNodeID, "", "this master's id (node_id); must be among the peers")
	fs.StringVar(&f.v.RaftBind, FlagRaftBind, "", "raft listen address host:port (default: raft advertise address)")
	fs.StringVar(&f.v.RaftAdvertise, FlagRaftAdvertise, "", "raft address other masters dial (default: this node's peer entry)")
	fs.StringVar(&f.v.RPCBind, FlagRPCBind, "", "Thrift listen address host:port (default: rpc advertise address)")
	fs.StringVar(&f.v.RPCAdvertise, FlagRPCAdvertise, "", "Thrift address clients and masters dial (default: this node's peer entry)")
	fs.StringVar(&f.v.HTTPBind, FlagHTTPBind, "", "HTTP listen address for /metrics, /livez, /readyz, the /v1 read API and the /ui console (default: none)")
	fs.BoolVar(&f.v.HTTPAPIPlaintext, FlagHTTPAPIPlaintext, false, "without tls, serve /v1 and /ui on an http_bind that is not loopback (everyone who reaches it may read them)")
	fs.StringVar(&f.v.DataDir, FlagDataDir, "", "directory of the raft log, stable store and snapshots")
	fs.StringVar(&f.v.SecretsDir, FlagSecretsDir, "", "directory of credentials files (one file per credentials reference)")
	fs.StringArrayVar(&f.peers, FlagPeer, nil, "a cluster member as ID=RAFT_ADDR,RPC_ADDR; repeat for each (replaces the file's peers)")
	fs.BoolVar(&f.v.Join, FlagJoin, false, "a master added to a running cluster: an empty data dir waits for operator raft add-voter instead of bootstrapping the peers list")
	fs.StringVar(&f.v.Timeouts, FlagTimeouts, d.Timeouts, "raft timeout profile: default (1 s heartbeat/election) or fast (500 ms)")
	fs.DurationVar(&f.v.HeartbeatTimeout, FlagHeartbeatTimeout, 0, "override the profile's raft heartbeat timeout")
	fs.DurationVar(&f.v.ElectionTimeout, FlagElectionTimeout, 0, "override the profile's raft election timeout")
	fs.DurationVar(&f.v.LeaderLeaseTimeout, FlagLeaderLeaseTimeout, 0, "override the profile's raft leader lease timeout")
	fs.Uint64Var(&f.v.SnapshotThreshold, FlagSnapshotThreshold, d.SnapshotThreshold, "raft log entries between snapshots")
	fs.DurationVar(&f.v.SnapshotInterval, FlagSnapshotInterval, d.SnapshotInterval, "how often raft checks whether to snapshot")
	fs.Uint64Var(&f.v.TrailingLogs, FlagTrailingLogs, d.TrailingLogs, "raft log entries kept after a snapshot")
	fs.StringVar(&f.v.RaftLogStore, FlagRaftLogStore, d.RaftLogStore, "raft log store: auto (the one the data dir holds; wal for a new one), boltdb or wal (a data dir keeps the one it was created with)")
	fs.StringVar(&f.v.LogFormat, FlagLogFormat, d.LogFormat, "log format: json or console")
	fs.StringVar(&f.v.LogLevel, FlagLogLevel, d.LogLevel, "log level: debug, info, warn or error")
	return f
}

// Apply copies every flag the user set onto n.
func (f *NodeFlags) Apply(n *Node) error {
	set := func(name string, dst, src any) {
		if !f.fs.Changed(name) {
			return
		}
		switch d := dst.(type) {
		case *string:
			*d = *src.(*string)
		case *time.Duration:
			*d = *src.(*time.Duration)
		case *uint64:
			*d = *src.(*uint64)
		case *bool:
			*d = *src.(*bool)
		}
	}
	set(FlagNodeID, &n.NodeID, &f.v.NodeID)
	set(FlagRaftBind, &n.RaftBind, &f.v.RaftBind)
	set(FlagRaftAdvertise, &n.RaftAdvertise, &f.v.RaftAdvertise)
	set(FlagRPCBind, &n.RPCBind, &f.v.RPCBind)
	set(FlagRPCAdvertise, &n.RPCAdvertise, &f.v.RPCAdvertise)
	set(FlagHTTPBind, &n.HTTPBind, &f.v.HTTPBind)
	set(FlagHTTPAPIPlaintext, &n.HTTPAPIPlaintext, &f.v.HTTPAPIPlaintext)
	set(FlagDataDir, &n.DataDir, &f.v.DataDir)
	set(FlagJoin, &n.Join, &f.v.Join)
	set(FlagSecretsDir, &n.SecretsDir, &f.v.SecretsDir)
	set(FlagTimeouts, &n.Timeouts, &f.v.Timeouts)
	set(FlagHeartbeatTimeout, &n.HeartbeatTimeout, &f.v.HeartbeatTimeout)
	set(FlagElectionTimeout, &n.ElectionTimeout, &f.v.ElectionTimeout)
	set(FlagLeaderLeaseTimeout, &n.LeaderLeaseTimeout, &f.v.LeaderLeaseTimeout)
	set(FlagSnapshotThreshold, &n.SnapshotThreshold, &f.v.SnapshotThreshold)
	set(FlagSnapshotInterval, &n.SnapshotInterval, &f.v.SnapshotInterval)
	set(FlagTrailingLogs, &n.TrailingLogs, &f.v.TrailingLogs)
	set(FlagRaftLogStore, &n.RaftLogStore, &f.v.RaftLogStore)
	set(FlagLogFormat, &n.LogFormat, &f.v.LogFormat)
	set(FlagLogLevel, &n.LogLevel, &f.v.LogLevel)
	if f.fs.Changed(FlagPeer) {
		peers := make([]Peer, 0, len(f.peers))
		for _, s := range f.peers {
			p, err := ParsePeer(s)
			if err != nil {
				return err
			}
			peers = append(peers, p)
		}
		n.Peers = peers
	}
	return nil
}

// ParsePeer parses ID=RAFT_ADDR,RPC_ADDR (the --peer syntax). Addresses are
// checked by Node.Validate.
func ParsePeer(s string) (Peer, error) {
	id, addrs, ok := strings.Cut(strings.TrimSpace(s), "=")
	raftAddr, rpcAddr, ok2 := strings.Cut(addrs, ",")
	if !ok || !ok2 || id == "" || raftAddr == "" || rpcAddr == "" || strings.Contains(rpcAddr, ",") {
		return Peer{}, fmt.Errorf("config: --%s %q: want ID=RAFT_ADDR,RPC_ADDR", FlagPeer, clip(s))
	}
	return Peer{ID: id, RaftAddress: raftAddr, RPCAddress: rpcAddr}, nil
}
