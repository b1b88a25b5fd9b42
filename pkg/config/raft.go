package config

import (
	"fmt"
	"time"
)

// The one home of the Raft defaults: the node file's defaults and
// pkg/cluster's (for a zero cluster.Config field) are these.

// RaftTimeouts are the Raft timing knobs. Every master of a cluster should use the
// same profile.
type RaftTimeouts struct {
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

// DefaultRaftTimeouts is the conservative profile ("default") (hashicorp/raft's defaults):
// 1 s heartbeat and election, 500 ms lease. An unplanned leader loss costs
// about 2 s of write unavailability on this machine kind; use it on busy or
// shared hosts and across zones, where a 500 ms pause must not cause an
// election.
func DefaultRaftTimeouts() RaftTimeouts {
	return RaftTimeouts{
		Heartbeat:   time.Second,
		Election:    time.Second,
		LeaderLease: 500 * time.Millisecond,
		Commit:      50 * time.Millisecond,
	}
}

// FastRaftTimeouts ("fast") halves everything: 500 ms heartbeat and election, 250 ms
// lease. An unplanned leader loss costs about 1.1 s; the price is spurious
// elections when a host stalls (GC, disk, noisy neighbour) for ~500 ms. Use it
// on dedicated hosts in one zone, and in tests.
func FastRaftTimeouts() RaftTimeouts {
	return RaftTimeouts{
		Heartbeat:   500 * time.Millisecond,
		Election:    500 * time.Millisecond,
		LeaderLease: 250 * time.Millisecond,
		Commit:      50 * time.Millisecond,
	}
}

// Raft defaults: a node file's unset fields and pkg/cluster's zero Config
// fields take them.
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

// The Raft log store: where a master keeps its log and its vote/term
// (docs/cluster.md, docs/decisions.md "The Raft log store").
const (
	// RaftLogStoreBoltDB is raft-boltdb/v2: one bbolt file, raft/raft.db.
	// Each append is one bbolt commit: the pages, an fdatasync, the meta
	// page and a second fdatasync.
	RaftLogStoreBoltDB = "boltdb"
	// RaftLogStoreWAL is raft-wal: append-only segment files under
	// raft/wal/, one fdatasync per append.
	RaftLogStoreWAL = "wal"
	// RaftLogStoreAuto is the store the data dir already holds: raft-boltdb
	// when it has raft/raft.db, else raft-wal (a new data dir gets
	// raft-wal). Consul has chosen its store the same way since 1.20.
	RaftLogStoreAuto = "auto"
	// DefaultRaftLogStore is the store of a node file that names none.
	DefaultRaftLogStore = RaftLogStoreAuto
)

// CheckRaftLogStore says why s is not a raft log store (nil when it is one).
// The one check behind raft_log_store and cluster.Config.LogStore.
func CheckRaftLogStore(s string) error {
	if s == RaftLogStoreAuto || s == RaftLogStoreBoltDB || s == RaftLogStoreWAL {
		return nil
	}
	return fmt.Errorf("raft_log_store %q: use %s, %s or %s", clip(s), RaftLogStoreAuto, RaftLogStoreBoltDB, RaftLogStoreWAL)
}
