package raftfsm

import (
	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/job/jobwire"
	"github.com/lancemaster/lancemaster/pkg/raftfsm/jobcodec"
)

// OPTIMIZE (DESIGN.md §14) in the journal.
//
// OPTIMIZE is a dataset-scoped job: its fence is the dataset, so it is
// exclusive with every index job on that dataset, and they with it. Its own
// fence key has NormalizedIndexName = job.OptimizeFenceName (a reserved
// name no index job can carry), so the fence tree, ordered by key, holds
// every job of a dataset in one range: a scan over (catalog, provider,
// locator) finds any holder on the dataset. Quotas count it as one job.
//
// A crashed OPTIMIZE is safe to run again: once its worker is provably dead
// without a trusted result (a proof with finished_without_result), it
// returns to PENDING with dispatch_attempts + 1 and its slot released by
// that proof, in the same entry, when the proof carries return_to_pending
// (the leader's choice, by lance_index_job_max_dispatch_attempts); else it
// ends UNKNOWN with NO_TRUSTED_RESULT (not NOT_COMMITTED: a crashed optimize
// may have committed). It never goes to RESOLVING: there is no uuid to
// resolve. A deadline without proof still proves nothing.

// validateOptimize checks an OPTIMIZE admission's own content: no index
// name, column, type, properties, schema contract, IF flag or admitted
// uuid, and the dataset fence name.
func validateOptimize(r *job.Record) error {
	if r.DisplayIndexName != "" || r.NormalizedIndexName != job.OptimizeFenceName {
		return job.Errorf(job.CodeInvalid, "OPTIMIZE carries no index name (its fence name is %s)", job.OptimizeFenceName)
	}
	if r.IndexType != "" || r.Column != "" || r.PropertiesJSON != "" || r.SchemaContract != "" ||
		r.IfExists || r.IfNotExists || r.AdmittedIndexUUID != "" {
		return job.Errorf(job.CodeInvalid, "OPTIMIZE takes no index type, column, properties, schema contract or IF condition")
	}
	return nil
}

// checkFence is the fence part of admission, on the holds of r's table. An
// index job is fenced by its own key (the same-name fence) and by an
// unresolved OPTIMIZE of its dataset; an OPTIMIZE by any unresolved job on
// its dataset (the smallest is named). The answer is FENCE_CONFLICT naming
// the fencing job, or nil.
func checkFence(h holds, r *job.Record, cat *Catalog) *journal.TApplyResponse {
	var resp *journal.TApplyResponse
	var id int64
	switch {
	case r.IsOptimize():
		if id = h.dataset; id != 0 {
			resp = respFail(journal.TApplyCode_FENCE_CONFLICT,
				"OPTIMIZE of %s.%s in catalog %q is fenced by unresolved job %d on that dataset (an OPTIMIZE is exclusive with every job on its dataset); wait for it to finish, cancel it while PENDING, or force-release it if UNKNOWN",
				r.DB, r.Table, cat.Name, id)
		}
	case h.own != 0:
		id = h.own
		resp = respFail(journal.TApplyCode_FENCE_CONFLICT,
			"index %q of %s.%s in catalog %q is fenced by unresolved job %d; wait for it to finish, cancel it while PENDING, or force-release it if UNKNOWN",
			r.DisplayIndexName, r.DB, r.Table, cat.Name, id)
	case h.optimize != 0:
		id = h.optimize
		resp = respFail(journal.TApplyCode_FENCE_CONFLICT,
			"index %q of %s.%s in catalog %q is fenced by unresolved OPTIMIZE job %d on that dataset; wait for it to finish, cancel it while PENDING, or force-release it if UNKNOWN",
			r.DisplayIndexName, r.DB, r.Table, cat.Name, id)
	}
	if resp != nil {
		resp.ConflictJobID = thrift.Int64Ptr(id)
	}
	return resp
}

// ---- results ---------------------------------------------------------------------

// completionResult is what an M2 NATIVE_OK stores beyond the outcome: the
// dataset version the builder verified and, for an OPTIMIZE, its per-index
// before/after (the canonical string). A list that breaks the bounds
// refuses the item (INVALID): the report path checks the same bounds before
// proposing, so only a forged or broken entry meets this.
func completionResult(r *job.Record, c *journal.TCompletion) (version int64, optimized string, err error) {
	if v := c.GetDatasetVersion(); v > 0 {
		version = v
	}
	if r.IsOptimize() && len(c.OptimizedIndexes) > 0 {
		optimized, err = job.EncodeOptimized(jobcodec.OptimizedFromThrift(c.OptimizedIndexes))
	}
	return version, optimized, err
}

// RelayResult copies what a backend's NATIVE_OK report brings beyond the
// outcome into its M2 c: the dataset version the builder verified, and for
// an OPTIMIZE job rec its per-index before/after. The report path and
// reconcile (a stored report) share it. A list that breaks the bounds
// (job.EncodeOptimized) is dropped, not the result: dropped says so.
func RelayResult(c *journal.TCompletion, rec *job.Record, version *int64, ixs []*wire.TOptimizedIndex) (dropped bool) {
	if version != nil && *version > 0 {
		c.DatasetVersion = thrift.Int64Ptr(*version)
	}
	if !rec.IsOptimize() || len(ixs) == 0 {
		return false
	}
	l := jobwire.OptimizedFromWire(ixs)
	if _, err := job.EncodeOptimized(l); err != nil {
		return true
	}
	c.OptimizedIndexes = jobcodec.OptimizedToThrift(l)
	return false
}

// ---- proofs ----------------------------------------------------------------------

// MarkOptimizeProof is the leader's (and the report path's) part of a proof
// p that says rec's worker ended without a trusted result
// (finished_without_result): for an OPTIMIZE it sets return_to_pending
// while attempts are left (job.OptimizeReturnsToPending) and drops what only
// RESOLVING reads (the uuid, resolve_after). For any other job it changes
// nothing. It reports whether p returns the job to PENDING.
func MarkOptimizeProof(p *journal.TProof, rec *job.Record, maxAttempts int64) bool {
	if p == nil || !p.GetFinishedWithoutResult_() || !rec.IsOptimize() {
		return false
	}
	p.IndexUUID, p.ResolveAfterMs = nil, nil
	if !job.OptimizeReturnsToPending(rec, maxAttempts) {
		p.ReturnToPending = nil
		return false
	}
	p.ReturnToPending = thrift.BoolPtr(true)
	return true
}

// checkReturnToPending refuses return_to_pending where it cannot apply:
// without finished_without_result, or on a job that is not an OPTIMIZE
// (only an OPTIMIZE is safe to run again after a crash).
func checkReturnToPending(p *journal.TProof, r *job.Record) *journal.TItemResult_ {
	if !p.GetReturnToPending() {
		return nil
	}
	if !p.GetFinishedWithoutResult_() {
		return itemFail(p.JobID, journal.TApplyCode_INVALID, "job %d: return_to_pending needs finished_without_result", p.JobID)
	}
	if !r.IsOptimize() {
		return itemFail(p.JobID, journal.TApplyCode_INVALID,
			"job %d is %s: only an OPTIMIZE returns to PENDING after its worker ended without a result", p.JobID, r.MutationType)
	}
	return nil
}

// msgOptimizeNoResult is the result message of an OPTIMIZE that ends
// UNKNOWN when its worker ended without a result and no attempt is left.
const msgOptimizeNoResult = "the OPTIMIZE worker ended without a trusted result and its dispatch attempts are used up"

// optimizeFinished is the part of P for an OPTIMIZE whose worker ended
// without a result (n is the transition's copy of a RUNNING record):
// PENDING again with attempts + 1 (return_to_pending), else UNKNOWN with
// NO_TRUSTED_RESULT. Never RESOLVING.
func optimizeFinished(n *job.Record, p *journal.TProof, msg string) {
	n.TerminationMessage = msg
	n.IndexUUID, n.BuildPhase, n.ResolveAfterMs = "", "", 0
	if p.GetReturnToPending() {
		n.MutationState = job.Pending
		n.RefreshState = job.RefreshNotRequired
		n.Result = job.Result{}
		n.DispatchAttempts++
		return
	}
	cls := job.Classify(job.NoTrustedResult, false, n.MutationType, false)
	n.MutationState, n.RefreshState = cls.State, cls.Refresh
	text := msgOptimizeNoResult
	if msg != "" {
		text = job.TruncateMessage(text + ": " + msg)
	}
	n.Result = job.Result{Code: job.NoTrustedResult, Reason: cls.Reason, Message: text}
}
