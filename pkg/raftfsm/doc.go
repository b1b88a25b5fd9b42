// Package raftfsm is the journal: the replicated FSM that holds every job
// record, catalog, backend and cluster-wide option (DESIGN.md §2–§4, §9, §11).
//
// A log entry is one command: a type byte (bit 7 set = ignorable by a master
// that does not know the type) followed by the Thrift compact encoding of the
// command's struct from idl/journal.thrift. Each command family registers its
// apply function in its own file (admit.go, dispatch.go, refresh.go, ...).
//
// Apply is pure: it reads no clock and no random source. The leader stamps
// time, ids, secrets and its term into the command before proposing it.
// Guard failures are Apply responses (*journal.TApplyResponse with a code
// other than OK), not errors.
//
// State lives in go-memdb tables with secondary indexes, so the dispatcher's
// queries cost O(log n + matches). The fence, quota and slot books are
// maintained by one function, book(old, new), on apply and rebuilt by it on
// restore.
package raftfsm
