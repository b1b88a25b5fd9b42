// Package cluster is a master's Raft node (DESIGN.md §1, §8): hashicorp/raft
// over TCP, raft-boltdb/v2 log and stable store (fsync on) behind a 512-entry
// log cache, file snapshots, a static voter list bootstrapped identically on
// every master, the leadership monitor that runs the leader services, and
// propose-or-forward (it implements raftfsm.Proposer).
//
// # Lifecycle
//
//	n, err := cluster.New(cfg, raftfsm.New(log), forwarder) // no I/O
//	n.AddLeaderService("dispatcher", d)                     // before Start
//	n.OnLeaderReady(journalR4)                              // before Start
//	err = n.Start(ctx)                                      // stores, transport, raft
//	...
//	err = n.Shutdown(true)                                  // on SIGTERM
//
// `lancemaster serve` (cmd/lancemaster/serve.go) wires the signals: on
// SIGTERM or SIGINT it calls master.Close(true) once, which calls
// Shutdown(true) (a leader first transfers leadership, so writes pause for
// ~10 ms instead of an election timeout) and then stops the master's RPC
// and HTTP listeners. A second signal may
// exit immediately; raft's on-disk state is crash-safe.
//
// # Concurrency contract
//
//   - New, AddLeaderService, OnLeaderReady and Start are called by one
//     goroutine (master.Start's) before the node is shared. Shutdown may be called from
//     any goroutine, any number of times.
//   - Propose, ApplyLocal, ConsistentRead, VerifyLeader, ReadIndex,
//     CaughtUp, WaitForLeader, IsLeader,
//     LeaderTerm, Leader, AppliedIndex, Stats, Peers, TransferLeadership,
//     Snapshot, AddVoter, RemovePeer, SaveSnapshot and NewSnapshotRestore are
//     safe for concurrent use by any goroutine (a SnapshotFile or
//     SnapshotRestore they return is used by one goroutine at a time). Those that wait
//     honour their ctx; raft futures cannot be cancelled, so a goroutine may
//     outlive the call until raft resolves the future within its timeout.
//   - raft delivers leadership changes on Config.NotifyCh and leader changes
//     to an Observer. One pump goroutine drains both at once and only
//     signals (never blocks), so raft is never held up by this package.
//   - One monitor goroutine owns the leader services. On gaining leadership
//     for term T it runs raft.Barrier until the FSM has applied the whole log
//     (retried while still leader), then publishes T (LeaderTerm), runs the
//     OnLeaderReady hook (retried likewise), then starts every service under
//     one context carrying T (LeaderTermFromContext), each on its own
//     goroutine. Writes made with that context are leader-only and fenced to
//     T: they are never forwarded. On losing leadership (or a
//     term change, or Shutdown) it cancels that context and waits for every
//     service to return before it acts on anything else, in particular before
//     starting services for a new term. Failing services are restarted with
//     backoff while the node leads (see Runnable).
//   - The FSM's Apply/Snapshot/Restore are called by raft's own goroutines.
//
// # Errors
//
// A Propose error says what is known about the command: raftfsm.ErrNotLeader,
// raftfsm.ErrNoLeader and ErrNotApplied mean it was not applied (retry is
// safe); ErrFateUnknown means it may have been (read before retrying); a
// guard failure of the FSM is a response, never an error. A Propose with a
// LeaderOnly context is never forwarded (readindex.go).
package cluster
