// Package dispatch holds the leader services (DESIGN.md §7–§9, §13): the
// dispatch round (deadline sweep → epoch sweep → resolve step → refresh
// driver → PENDING dispatch), the backend pool and its heartbeats, reconcile
// through query_lance_index_invocations, the refresh driver with its
// Refresher seam, retention GC, the OPTIMIZE policy, and what a new leader
// journals before its services start (the cluster id, the R4 downgrade).
//
// Calls to backends (sends, reconcile queries, resolves) do not belong to a
// round: each runs on its own goroutine of the leadership term and journals
// its outcome as soon as it is known (termWork), so a slow or hung backend
// holds neither the others nor the next round. docs/dispatch.md says what
// the leader concludes from each answer.
//
// Every service runs only on the leader, under the context the cluster gives
// a leadership term (cluster.Runnable). Everything durable it does crosses one
// door: a command proposed through raftfsm.Proposer with that context, so a
// service that outlives its term cannot write.
package dispatch
