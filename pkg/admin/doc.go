// Package admin is the master's Thrift service: the admin API behind the CLI
// (admission, list/show, resolve, cancel, catalogs, backends, options, peers),
// the internal forwardApply door of propose-or-forward, and the report methods
// (delegated to a ReportHandler).
//
// Any master accepts a write: it runs the request's checks on its own replica
// and proposes the resulting command, which a follower forwards to the leader
// (propose-or-forward). The FSM re-checks everything that can race (catalog,
// fence, quotas, CAS). After a write the master waits until its own replica has
// applied the entry, so the reply reads its own write. Reads are served from the
// local replica, or through the leader when the caller asks for a consistent
// read (a follower answers NOT_LEADER with the leader's address). Leadership
// transfer must run on the leader.
//
// Admissions are journaled through a group commit (pkg/groupcommit):
// admissions that arrive while earlier admission entries are in flight share
// the next CmdAdmitBatch entry, each keeping its own result and typed error.
//
// Concurrency: the Thrift server calls every method from its own connection
// goroutine; Server's only mutable state is that group commit, which is safe
// for concurrent use.
package admin
