// Package dispatch holds the leader services (DESIGN.md §7–§9): the dispatch
// round (deadline sweep → epoch sweep → refresh driver → PENDING dispatch),
// the backend pool and its heartbeats, reconcile through
// query_lance_index_invocations, the refresh driver with its Refresher seam,
// retention GC, and the R4 downgrade a new leader journals.
//
// Every service runs only on the leader, under the context the cluster gives
// a leadership term (cluster.Runnable). Everything durable it does crosses one
// door: a command proposed through raftfsm.Proposer with that context, so a
// service that outlives its term cannot write.
package dispatch
