// Package report handles the backends' reports (DESIGN.md §9, §13):
// reportLanceIndexJobResult, reportLanceIndexJobTermination and
// reportLanceIndexJobProgress, which may reach any master.
//
// A follower forwards the envelope, unchanged, to the leader and answers with
// the leader's status. The leader, in this order:
//
//  1. checks the identity fields' bounds (an invocation id over 256 B or not
//     UTF-8 can name no dispatch);
//  2. authenticates: the job exists, its record carries an invocation secret,
//     and the report echoes it (compared in constant time). A missing or
//     wrong secret drops the whole envelope (UNAUTHENTICATED); an unknown job
//     or a dispatch identity other than the record's drops it too
//     (STALE_REPORT);
//  3. applies a wire termination proof (CHILD_REAPED, NEVER_LAUNCHED) on its
//     own, through P;
//  4. parses the result: a missing or non-wire result code, an unknown
//     completion reason, or an oversized or non-UTF-8 message drops the
//     result only (INVALID_ARGUMENT; the proof is still applied);
//  5. journals M2 with the report's identity quad.
//
// Steps 3 and 5 are one item of one entry (ReportBatch): the FSM applies P
// and then M2, each on its own guard with its own answer, so a report costs
// one commit instead of two, and the order of §9 holds inside the entry.
//
// The leader confirms before it refuses for good (§13.5): an
// UNAUTHENTICATED or STALE_REPORT judged on its own view is answered only
// once Deps.VerifyLeader succeeded, else NOT_LEADER. Its entries are
// proposed leader-only (cluster.LeaderOnly): a master that lost leadership
// answers NOT_LEADER instead of forwarding the raw command, and the backend
// retries. A termination report with no_result moves a RUNNING job to
// RESOLVING in its P (§13.3); a progress report journals the worker's
// announced index uuid and phase as a progress item of the same batch.
//
// Acknowledged staleness: backends retry a report until one master accepts
// it, so an authenticated report whose job has already left RUNNING for this
// same dispatch, or whose proof is already recorded, answers OK without
// writing anything: the outbox stops retrying, and applying twice stays
// harmless. A report that names another dispatch answers STALE_REPORT.
//
// Nothing here logs or returns an invocation secret, or any request content
// beyond ids: drops are logged with job_id, reason and status code only.
// Concurrent reports are packed into one Raft entry (group commit), each
// job keeping its own guard results.
package report
