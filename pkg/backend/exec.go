package backend

import (
	"maps"

	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/backend/frame"
	"github.com/lancemaster/lancemaster/pkg/backend/outbox"
	"github.com/lancemaster/lancemaster/pkg/backend/supervisor"
)

// workerLoop runs accepted dispatches, one at a time, until the queue is
// closed and drained. Config.Concurrency of them run.
func (a *Agent) workerLoop() {
	defer a.workers.Done()
	for inv := range a.work {
		a.execute(inv)
	}
}

// execute runs one invocation through the Runner and finishes it.
func (a *Agent) execute(inv *invocation) {
	a.mu.Lock()
	shutting := a.shutting
	expired := !a.cfg.Clock().Before(inv.deadline)
	if !shutting && !expired {
		a.table.markRunning(inv)
		inv.startedAt = a.cfg.Clock()
	}
	a.mu.Unlock()
	switch {
	case shutting:
		a.finishNeverLaunched(inv, "the backend shut down before the build started")
		return
	case expired:
		a.finishNeverLaunched(inv, "the dispatch deadline passed while it waited in the queue")
		return
	}

	d := inv.dispatch
	scrub := newScrubber(d.StorageOptions, d.GetInvocationSecret())
	log := a.log.With(zap.Int64("job_id", d.JobID), zap.String("invocation_id", inv.id))
	log.Info("build started", zap.Stringer("mutation_type", d.MutationType), zap.String("index_type", d.IndexType))
	ctx := supervisor.WithStderrLines(a.runCtx, func(line []byte) { a.onWorkerLine(inv, d, line) })
	out := a.runner.Run(ctx, buildRequest(d), inv.deadline)
	a.metrics.workerExited(out)
	rep := reportFromOutcome(d, a.epoch, out, scrub)
	if t := logTail(inv.log, out.Stderr, scrub); t != "" {
		rep.LogTail = &t
	}

	fields := []zap.Field{zap.Stringer("termination_proof", rep.GetTerminationProof()),
		zap.Duration("duration", out.Duration), zap.Int64("peak_memory_bytes", out.PeakMemoryBytes)}
	if rep.ResultCode != nil {
		log.Info("build finished", append(fields, zap.Stringer("result_code", rep.GetResultCode()))...)
	} else {
		log.Warn("build ended without a trusted result", append(fields, zap.String("cause", rep.GetSanitizedMessage()),
			zap.String("failure", scrub.message(out.Failure)),
			zap.Int("exit_code", out.ExitCode), zap.String("signal", out.Signal), zap.Bool("oom_killed", out.OOMKilled),
			zap.String("stderr_tail", scrub.stderrTail(out.Stderr)))...)
	}
	a.finish(inv, rep)
}

// finishNeverLaunched finishes an accepted invocation the agent itself
// never started (shutdown, or its deadline passed in the queue). Nothing
// touched the dataset, so the report is a typed, provable answer:
// PRE_INVOCATION_RESOURCE_REJECTED (NOT_COMMITTED) with proof
// NEVER_LAUNCHED, which also frees the possible-live slot at once.
func (a *Agent) finishNeverLaunched(inv *invocation, why string) {
	d := inv.dispatch
	code := wire.TLanceIndexJobResultCode_PRE_INVOCATION_RESOURCE_REJECTED
	proof := wire.TLanceIndexTerminationProof_NEVER_LAUNCHED
	rep := baseReport(d, a.epoch)
	rep.ResultCode, rep.TerminationProof, rep.SanitizedMessage = &code, &proof, &why
	a.log.Info("dispatch finished without starting", zap.Int64("job_id", d.JobID), zap.String("invocation_id", inv.id),
		zap.String("reason", why))
	a.finish(inv, rep)
}

// finish stores the report in the outbox (before any delivery attempt),
// marks the invocation FINISHED, then hands the report to delivery.
//
// A report with neither a result code nor a proof has nothing a master can
// use: it is kept for query only. When the outbox write fails, the report
// is still answered by query and delivered from memory (it is lost if the
// process dies first); the failure is logged at Error.
//
// The entry carries the uuid the worker announced (a termination report
// names it). The invocation is held (never forgotten) until delivery
// settles the entry.
func (a *Agent) finish(inv *invocation, rep *wire.TLanceIndexJobReport) {
	a.mu.Lock()
	uuid := inv.indexUUID
	a.mu.Unlock()
	entry := outbox.Entry{ID: inv.id, Report: rep, IndexUUID: uuid, Deadline: inv.deadline}
	deliverable := rep.ResultCode != nil || rep.TerminationProof != nil
	if deliverable {
		if err := a.outbox.Put(entry); err != nil {
			a.log.Error("outbox write failed; the report is delivered from memory only", zap.Int64("job_id", rep.JobID),
				zap.String("invocation_id", inv.id), zap.Error(err))
		}
	}
	a.mu.Lock()
	a.table.markFinished(inv, rep, deliverable)
	a.mu.Unlock()
	a.metrics.finished(rep)
	if deliverable {
		a.dlv.deliver(entry)
	}
}

// buildRequest is the worker's build-mode request. The storage options are
// copied into it in memory; they go to the worker on stdin only.
func buildRequest(d *wire.TLanceIndexJobDispatch) *frame.Request {
	return &frame.Request{
		Protocol:               frame.Protocol,
		Mode:                   frame.ModeBuild,
		DatasetURI:             d.DatasetURI,
		StorageOptions:         maps.Clone(d.StorageOptions),
		JobID:                  d.JobID,
		InvocationID:           d.InvocationID,
		MutationType:           d.MutationType.String(),
		IndexName:              d.IndexName,
		ColumnName:             d.ColumnName,
		IndexType:              d.IndexType,
		PropertiesJSON:         d.GetPropertiesJSON(),
		IfNotExists:            d.GetIfNotExists(),
		IfExists:               d.GetIfExists(),
		AdmittedDatasetVersion: d.AdmittedDatasetVersion,
		SchemaContractJSON:     d.SchemaContractJSON,
		DeadlineMs:             d.DeadlineMs,
	}
}

// baseReport is the identity part of a report: the dispatch identity, this
// process's epoch and the secret that authenticates it.
func baseReport(d *wire.TLanceIndexJobDispatch, epoch int64) *wire.TLanceIndexJobReport {
	secret := d.GetInvocationSecret()
	return &wire.TLanceIndexJobReport{
		JobID: d.JobID, DispatchRevision: d.DispatchRevision, InvocationID: d.InvocationID,
		BeProcessEpoch: epoch, InvocationSecret: &secret,
	}
}

// reportFromOutcome turns a Runner outcome into the report (DESIGN.md §6,
// §12, §13.3):
//   - a trusted build result whose result_code names a wire code carries
//     that code, its external_metadata_advanced, its scrubbed message and,
//     for a NATIVE_OK the index uuid and dataset version the builder
//     verified (frame.ApplyVerifiedCommit);
//   - no result and a NEVER_LAUNCHED proof: PRE_INVOCATION_RESOURCE_REJECTED
//     (the dataset was provably never touched);
//   - anything else (no trusted result, a result of the wrong mode, an
//     unknown code) carries no result code, and its message is the cause
//     (workerCause: "killed by the memory limit (cgroup oom_kill)",
//     "exited with signal 9 (SIGKILL)", …): it goes to the master as a
//     termination report with no_result, which ends the job at once;
//   - the termination proof is carried whenever the Runner proved one.
func reportFromOutcome(d *wire.TLanceIndexJobDispatch, epoch int64, out Outcome, scrub scrubber) *wire.TLanceIndexJobReport {
	rep := baseReport(d, epoch)
	switch out.Proof {
	case ProofChildReaped:
		p := wire.TLanceIndexTerminationProof_CHILD_REAPED
		rep.TerminationProof = &p
	case ProofNeverLaunched:
		p := wire.TLanceIndexTerminationProof_NEVER_LAUNCHED
		rep.TerminationProof = &p
	}
	var msg string
	switch r := out.Result; {
	case r == nil && out.Proof == ProofNeverLaunched:
		// The worker provably never started, so the dataset is untouched:
		// say so with a typed pre-invocation code (NOT_COMMITTED) instead of
		// leaving the job to turn UNKNOWN at its deadline.
		code, ema := wire.TLanceIndexJobResultCode_PRE_INVOCATION_RESOURCE_REJECTED, false
		rep.ResultCode, rep.ExternalMetadataAdvanced = &code, &ema
		msg = "the worker never started: " + neverLaunchedCause(out)
	case r == nil:
		msg = workerCause(out)
	case r.Mode != "" && r.Mode != frame.ModeBuild:
		msg = "exited with status 0 without a result (it answered a " + r.Mode + " frame to a build)"
	default:
		code, err := wire.TLanceIndexJobResultCodeFromString(r.ResultCode)
		if err != nil || code < wire.TLanceIndexJobResultCode_PRE_INVOCATION_STALE_ADMISSION || code > wire.TLanceIndexJobResultCode_NATIVE_INTERNAL {
			msg = "exited with status 0 without a result (it answered an unknown result code)"
			break
		}
		ema := r.ExternalMetadataAdvanced
		rep.ResultCode, rep.ExternalMetadataAdvanced = &code, &ema
		msg = r.Message
		frame.ApplyVerifiedCommit(rep, r) // §13.7: the verified index uuid and dataset version (fields 12, 13)
		frame.ApplyOptimized(rep, r)      // §14: an OPTIMIZE's verified per-index before/after (field 17)
		if code != wire.TLanceIndexJobResultCode_NATIVE_OK && frame.IsUUID(r.LeftoverIndexUUID) {
			u := r.LeftoverIndexUUID // not committed: the index directory the build left behind (field 16)
			rep.LeftoverIndexUUID = &u
		}
	}
	if m := scrub.message(msg); m != "" {
		rep.SanitizedMessage = &m
	}
	rep.Resources = resourcesOf(out)
	return rep
}

// resourcesOf is what the Runner measured of the worker (nil when it never
// started): its start and reap times and wall time on this process's clock,
// and its peak memory with where that figure comes from (cgroup or rusage).
func resourcesOf(out Outcome) *wire.TBuildResources {
	if out.StartTime.IsZero() {
		return nil
	}
	start, wall := out.StartTime.UnixMilli(), out.Duration.Milliseconds()
	r := &wire.TBuildResources{StartTimeMs: &start, WallMs: &wall}
	if !out.FinishTime.IsZero() {
		f := out.FinishTime.UnixMilli()
		r.FinishTimeMs = &f
	}
	if out.PeakMemoryBytes > 0 && out.PeakMemorySource != "" {
		p, src := out.PeakMemoryBytes, out.PeakMemorySource
		r.PeakMemoryBytes, r.PeakMemorySource = &p, &src
	}
	return r
}

// neverLaunchedCause says why a worker never started.
func neverLaunchedCause(out Outcome) string {
	if out.Failure != "" {
		return out.Failure
	}
	return "no cause given"
}
