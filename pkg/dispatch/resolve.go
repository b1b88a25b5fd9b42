package dispatch

import (
	"context"

	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/options"
)

// Bounds of the resolve step.
const (
	// maxResolvesPerRound bounds the resolve calls one round starts.
	maxResolvesPerRound = 16
	// maxResolveScan bounds the RESOLVING jobs one round looks at.
	maxResolveScan = 4096
	// minResolveTries is how many resolve calls this term must have made
	// for a job before its time can give it up: time alone (a clock jump,
	// a long outage of every master, no backend able to read) is not an
	// attempt, and a job whose dataset nobody tried to read is not ended.
	minResolveTries = 3
)

// Messages of the resolve step's completions.
const (
	msgResolvedCommitted = "resolved from the dataset"
	msgNoDatasetProof    = "no proof from the dataset: "
	msgNoBackendRead     = "no backend could read the dataset"
	// An OPTIMIZE has no index uuid to look for in the dataset.
	msgOptimizeUnresolvable = "an OPTIMIZE cannot be resolved from the dataset"
	// A held CREATE the dataset shows not built by this invocation.
	msgHeldCreate = "held by a snapshot restore, and another invocation of it may have built the index; "
)

// resolveStep is step 3 of the round (DESIGN.md §13.4): every RESOLVING job
// whose resolve_after_ms has passed is resolved by asking a dispatchable
// backend to read its outcome from the dataset (resolve_lance_index_job, a
// read-only walk of the versions after the admitted one). Each call runs on
// its own goroutine of the term and journals its M2 as soon as it answers;
// the round does not wait.
//
//   - COMMITTED → M2 NATIVE_OK, reason RESOLVED_FROM_DATASET, message the
//     evidence, index_uuid the one found (the job turns COMMITTED).
//   - NOT_COMMITTED → M2 NO_TRUSTED_RESULT, reason RESOLVED_FROM_DATASET
//     (NOT_COMMITTED).
//   - UNKNOWN → M2 NO_TRUSTED_RESULT, reason NONE, "no proof from the
//     dataset: " + the evidence (UNKNOWN, honestly and at once).
//   - An error, a non-OK status (NOT_IMPLEMENTED_ERROR from a backend
//     without the resolve mode included) or no outcome proves nothing: the
//     job waits and is retried next round, on the next backend in turn.
//
// A job still RESOLVING lance_index_job_execute_deadline_second after its
// resolve_after_ms, and after at least minResolveTries calls of this term
// that proved nothing, is given up: M2 NO_TRUSTED_RESULT ("no backend could
// read the dataset") → UNKNOWN. With no backend to ask it keeps waiting. Local datasets need the local-file
// assertion and exactly one registered backend, like a dispatch. At most
// maxResolvesPerRound calls start per round, at most SendConcurrency calls
// are in flight per backend, and each is bounded by ResolveTimeout.
func (r *round) resolveStep() error {
	st := r.deps.Reader.State()
	nowMs := r.deps.Clock().UnixMilli()
	recs := st.ResolvingDue(nowMs, maxResolveScan) // earliest resolve_after first: give-ups lead
	if len(recs) == 0 {
		return nil
	}
	opts := st.Options()
	giveUpMs := opts.ExecuteDeadlineSecond * 1000
	registered := len(st.Backends())
	cands := r.newBackendPicker(st, 0).cands // dispatchable backends, by id; slots do not matter
	prep := &preparer{r: r, st: st, opts: opts, creds: map[string]credsResult{}, cluster: clusterIDOf(st)}
	var giveUps []*journal.TCompletion
	started := 0
	for _, rec := range recs {
		if rec.MutationState != job.Resolving || r.work.busy(rec.JobID) || nowMs < rec.ResolveAfterMs {
			continue
		}
		if rec.IsOptimize() {
			// The FSM never moves an OPTIMIZE to RESOLVING (a record restored
			// from an edited snapshot might be): there is no uuid to resolve.
			giveUps = append(giveUps, recordIdentity(rec).completion(job.NoTrustedResult, msgOptimizeUnresolvable, false))
			continue
		}
		if nowMs-rec.ResolveAfterMs > giveUpMs && r.work.resolveTriesOf(rec.JobID) >= minResolveTries {
			r.d.log.Warn("no backend could read the dataset of a RESOLVING job in time; UNKNOWN",
				zap.Int64("job_id", rec.JobID), zap.Int64("resolve_after_ms", rec.ResolveAfterMs))
			giveUps = append(giveUps, recordIdentity(rec).completion(job.NoTrustedResult, msgNoBackendRead, false))
			continue
		}
		if started >= maxResolvesPerRound {
			continue // later jobs may still be due a give-up
		}
		if job.IsLocalLocator(rec.Locator) && (!opts.EnableLocalFileMutation || registered != 1) {
			continue
		}
		b := pickResolver(cands, r.deps.SendConcurrency, r.work.nextResolveTry(rec.JobID))
		if b == nil {
			continue
		}
		storage, err := prep.storageOptions(rec)
		if err != nil {
			r.d.log.Warn("cannot prepare the resolve request; the job stays RESOLVING",
				zap.Int64("job_id", rec.JobID), zap.String("error_kind", errorKind(err)), safeErr(err))
			continue
		}
		req := buildResolveRequest(rec, storage, opts, prep.cluster, r.deps.ResolveTimeout.Milliseconds())
		b.calls++
		started++
		r.work.start([]int64{rec.JobID}, b.id, r.deps.SendConcurrency, func() {
			if c := r.resolveOnce(rec, b.id, b.addr, req); c != nil {
				r.work.complete(c, "resolve")
			}
		})
	}
	return r.d.completeWithResults(r.ctx, giveUps, "resolve give-ups")
}

// pickResolver returns the try-th dispatchable backend (in turn) with a
// call slot free, or nil.
func pickResolver(cands []*backendSlot, maxCalls, try int) *backendSlot {
	n := len(cands)
	for i := range n {
		c := cands[(try+i)%n]
		if c.calls < maxCalls {
			return c
		}
	}
	return nil
}

// buildResolveRequest is the TResolveJobRequest of a RESOLVING job. It
// carries the storage options: never logged.
func buildResolveRequest(rec *job.Record, storage map[string]string, opts options.Options, cluster string, timeoutMs int64) *wire.TResolveJobRequest {
	trust := trustExclusiveWriter(opts)
	req := &wire.TResolveJobRequest{
		JobID:                  rec.JobID,
		DatasetURI:             rec.Locator,
		StorageOptions:         storage,
		TimeoutMs:              &timeoutMs,
		MutationType:           wire.TLanceIndexMutationType(rec.MutationType),
		IndexName:              rec.DisplayIndexName,
		AdmittedDatasetVersion: rec.AdmittedDatasetVersion,
		TrustExclusiveWriter:   &trust,
	}
	if u := rec.IndexUUID; u != "" {
		req.IndexUUID = &u
	}
	if u := rec.AdmittedIndexUUID; u != "" {
		req.AdmittedIndexUUID = &u
	}
	if cluster != "" {
		req.ClusterID = &cluster
	}
	return req
}

// resolveOnce asks one backend and returns the M2 its answer proves, or nil
// (the job waits for the next round).
func (r *round) resolveOnce(rec *job.Record, backendID int64, addr string, req *wire.TResolveJobRequest) *journal.TCompletion {
	ctx, cancel := context.WithTimeout(r.ctx, r.deps.ResolveTimeout+resolveTimeoutMargin)
	resp, err := r.deps.Backends.Resolve(ctx, addr, req)
	cancel()
	fields := []zap.Field{zap.Int64("job_id", rec.JobID), zap.Int64("backend_id", backendID)}
	switch {
	case err != nil:
		if r.ctx.Err() == nil {
			r.d.log.Info("resolve call failed; the job stays RESOLVING and is retried", append(fields, zap.Error(err))...)
		}
		return nil
	case resp == nil || resp.Status == nil:
		r.d.log.Info("resolve answered without a status; the job stays RESOLVING and is retried", fields...)
		return nil
	case resp.Status.StatusCode != wire.TStatusCode_OK:
		r.d.log.Info("resolve refused; the job stays RESOLVING and is retried",
			append(fields, zap.Stringer("status", resp.Status.StatusCode))...)
		return nil
	case resp.Outcome == nil:
		r.d.log.Info("resolve answered OK without an outcome; the job stays RESOLVING and is retried", fields...)
		return nil
	}
	evidence := boundedText(resp.GetEvidence(), job.MaxMessageBytes)
	ident := recordIdentity(rec)
	var c *journal.TCompletion
	switch *resp.Outcome {
	case wire.TLanceResolveOutcome_COMMITTED:
		if evidence == "" {
			evidence = msgResolvedCommitted
		}
		c = ident.completion(job.NativeOK, evidence, false)
		setReason(c, job.ReasonResolvedFromDataset)
		if u, ok := job.CanonicalUUID(resp.GetIndexUUID()); ok {
			c.IndexUUID = &u
		}
	case wire.TLanceResolveOutcome_NOT_COMMITTED:
		if rec.RestoreHold && rec.MutationType == job.Create {
			// A CREATE's NOT_COMMITTED may rest on "no version lists N with
			// this invocation's uuid": it proves nothing about another
			// invocation of the job, which a restore that held it cannot
			// rule out (REPLACE's and DROP's evidence covers every build).
			c = ident.completion(job.NoTrustedResult, boundedText(msgNoDatasetProof+msgHeldCreate+evidence, job.MaxMessageBytes), false)
			setReason(c, job.ReasonNone)
			break
		}
		c = ident.completion(job.NoTrustedResult, evidence, false)
		setReason(c, job.ReasonResolvedFromDataset)
	case wire.TLanceResolveOutcome_UNKNOWN:
		c = ident.completion(job.NoTrustedResult, boundedText(msgNoDatasetProof+evidence, job.MaxMessageBytes), false)
		setReason(c, job.ReasonNone)
	default:
		r.d.log.Info("resolve answered an unknown outcome; the job stays RESOLVING and is retried",
			append(fields, zap.Stringer("outcome", *resp.Outcome))...)
		return nil
	}
	r.d.log.Info("resolved from the dataset", append(fields, zap.Stringer("outcome", *resp.Outcome))...)
	return c
}

func setReason(c *journal.TCompletion, reason job.CompletionReason) {
	jr := journal.TCompletionReason(reason)
	c.Result_.Reason = &jr
}
