package dispatch

import (
	"github.com/lancemaster/lancemaster/pkg/options"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// The FSM's §13 values as this package reads them: one function each, so
// that every reader agrees.

// clusterIDOf is the cluster id journaled in st ("" before the first
// leader journals one; then requests carry none and a backend judges them
// against the cluster it is bound to).
func clusterIDOf(st *raftfsm.State) string { return st.ClusterID() }

// maxDispatchAttempts is lance_index_job_max_dispatch_attempts (clamped to
// ≥ 1 by options.Resolve): a dispatch proven never enqueued returns
// its job to PENDING (M2″) while attempts+1 < this, else ends it
// NOT_COMMITTED (M2').
func maxDispatchAttempts(o options.Options) int64 { return o.MaxDispatchAttempts }

// trustExclusiveWriter is lance_index_job_trust_exclusive_writer.
func trustExclusiveWriter(o options.Options) bool { return o.TrustExclusiveWriter }

// resolveGraceMs is lance_index_job_resolve_grace_second in ms: on an object
// store a RESOLVING job is not read from the dataset before its worker's
// end + this grace (a PUT already sent may still land).
func resolveGraceMs(o options.Options) int64 { return o.ResolveGraceSecond * 1000 }
