package backend

import (
	"context"
	"errors"
	"maps"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/backend/frame"
	"github.com/lancemaster/lancemaster/pkg/job"
)

// ResolveLanceIndexJob reads a job's outcome from its dataset (DESIGN.md
// §13.4) by running the worker in resolve mode: a read-only walk of the
// retained versions from the admitted one, judged by the table of §13.4
// (docs/builder.md "Resolve mode"). Nothing is written to the dataset and
// nothing is kept: the call is safe to repeat.
//
// It runs as an inspect does (runReadOnly): no master heartbeat needed,
// verified isolation when required, the inspect slots, and bounded by
// min(timeout_ms, InspectTimeout). An OK status carries the worker's outcome,
// its evidence, the head version it read and, for COMMITTED by uuid, the
// index uuid. A failure is a non-OK status with a scrubbed message, as for
// inspect (NOT_FOUND, INVALID_ARGUMENT, RUNTIME_ERROR, TIMEOUT,
// INTERNAL_ERROR); the master treats it as no evidence, never as an outcome.
func (s *service) ResolveLanceIndexJob(ctx context.Context, r *wire.TResolveJobRequest) (*wire.TResolveJobResponse, error) {
	a := s.a
	fail := func(code wire.TStatusCode, format string, args ...any) (*wire.TResolveJobResponse, error) {
		return &wire.TResolveJobResponse{Status: statusf(code, format, args...)}, nil
	}
	if r == nil {
		return fail(wire.TStatusCode_INVALID_ARGUMENT, "no request")
	}
	req, err := resolveRequest(r)
	if err != nil {
		return fail(wire.TStatusCode_INVALID_ARGUMENT, "%s", err)
	}
	// Another cluster's leader gets OTHER_CLUSTER here as for every request
	// (DESIGN.md §13.1); a resolve carries no leader term to fence.
	a.mu.Lock()
	fenced := a.fenceClusterLocked(r.GetClusterID(), noLeaderTerm)
	a.mu.Unlock()
	if fenced != nil {
		return &wire.TResolveJobResponse{Status: fenced}, nil
	}
	if st := a.storeGate(ctx, r.DatasetURI, r.StorageOptions); st != nil {
		return &wire.TResolveJobResponse{Status: st}, nil
	}
	scrub := newScrubber(r.StorageOptions)
	run, st := a.runReadOnly(ctx, req, r.GetTimeoutMs())
	if st != nil {
		return &wire.TResolveJobResponse{Status: st}, nil
	}
	resp := resolveResponse(run.out, scrub, run.timedOut)
	fields := []zap.Field{zap.Int64("job_id", r.JobID), zap.Stringer("status", resp.Status.StatusCode), zap.Duration("took", run.took)}
	if resp.Status.StatusCode == wire.TStatusCode_OK {
		a.log.Info("resolve answered", append(fields, zap.Stringer("outcome", resp.GetOutcome()),
			zap.Int64("head_version", resp.GetHeadVersion()), zap.String("evidence", resp.GetEvidence()))...)
	} else {
		a.log.Info("resolve failed", append(fields, zap.Strings("message", resp.Status.ErrorMsgs),
			zap.String("stderr_tail", scrub.stderrTail(run.out.Stderr)))...)
	}
	return resp, nil
}

// resolveRequest checks a resolve request and makes the worker's frame. The
// uuids must be canonical uuids or empty; they go to the worker in lower
// case (Lance's form).
func resolveRequest(r *wire.TResolveJobRequest) (*frame.Request, error) {
	if err := job.CheckBytes("dataset_uri", r.DatasetURI, job.MaxURIBytes); err != nil || r.DatasetURI == "" {
		return nil, errors.New("dataset_uri is missing, too long or not UTF-8")
	}
	if err := checkStorageOptions(r.StorageOptions); err != nil {
		return nil, err
	}
	var mutation string
	switch r.MutationType {
	case wire.TLanceIndexMutationType_CREATE, wire.TLanceIndexMutationType_REPLACE, wire.TLanceIndexMutationType_DROP:
		mutation = r.MutationType.String()
	default:
		return nil, errors.New("mutation_type must be CREATE, REPLACE or DROP")
	}
	if err := job.CheckBytes("index_name", r.IndexName, job.MaxNameBytes); err != nil || strings.TrimSpace(r.IndexName) == "" {
		return nil, errors.New("index_name is missing, too long or not UTF-8")
	}
	if r.AdmittedDatasetVersion < 1 {
		return nil, errors.New("admitted_dataset_version must be positive")
	}
	uuid, admitted := strings.ToLower(r.GetIndexUUID()), strings.ToLower(r.GetAdmittedIndexUUID())
	for what, u := range map[string]string{"index_uuid": uuid, "admitted_index_uuid": admitted} {
		if u != "" && !frame.IsUUID(u) {
			return nil, errors.New(what + " is not a uuid")
		}
	}
	return &frame.Request{Protocol: frame.Protocol, Mode: frame.ModeResolve, DatasetURI: r.DatasetURI,
		StorageOptions: maps.Clone(r.StorageOptions), JobID: r.JobID, MutationType: mutation, IndexName: r.IndexName,
		AdmittedDatasetVersion: r.AdmittedDatasetVersion, IndexUUID: uuid,
		AdmittedIndexUUID: admitted, TrustExclusiveWriter: r.GetTrustExclusiveWriter()}, nil
}

// resolveResponse converts a resolve outcome. A frame that is not a
// well-formed resolve answer is INTERNAL_ERROR: an unreadable answer is no
// evidence. A COMMITTED or NOT_COMMITTED answer must carry the head version
// it read; a uuid is passed on only with COMMITTED.
func resolveResponse(out Outcome, scrub scrubber, timedOut bool) *wire.TResolveJobResponse {
	fail := func(code wire.TStatusCode, msg string) *wire.TResolveJobResponse {
		return &wire.TResolveJobResponse{Status: &wire.TStatus{StatusCode: code, ErrorMsgs: []string{scrub.message(msg)}}}
	}
	r := out.Result
	switch {
	case r == nil && timedOut:
		return fail(wire.TStatusCode_TIMEOUT, "the resolve worker did not answer in time")
	case r == nil:
		return fail(wire.TStatusCode_INTERNAL_ERROR, "the resolve worker gave no result: "+describeFailure(out))
	case r.Mode != frame.ModeResolve:
		return fail(wire.TStatusCode_INTERNAL_ERROR, "the resolve worker answered a frame of another mode")
	case !r.OK:
		msg := r.Message
		if msg == "" {
			msg = "the dataset could not be read"
		}
		return fail(readOnlyErrorStatus(r.ErrorCode), msg)
	}
	var outcome wire.TLanceResolveOutcome
	switch r.Outcome {
	case frame.OutcomeCommitted:
		outcome = wire.TLanceResolveOutcome_COMMITTED
	case frame.OutcomeNotCommitted:
		outcome = wire.TLanceResolveOutcome_NOT_COMMITTED
	case frame.OutcomeUnknown:
		outcome = wire.TLanceResolveOutcome_UNKNOWN
	default:
		return fail(wire.TStatusCode_INTERNAL_ERROR, "the resolve worker answered an unknown outcome")
	}
	// A proven outcome names the head it read; UNKNOWN may have read none
	// (no version retained).
	if (r.HeadVersion < 1 && outcome != wire.TLanceResolveOutcome_UNKNOWN) || r.HeadVersion < 0 ||
		(r.IndexUUID != "" && !frame.IsUUID(r.IndexUUID)) {
		return fail(wire.TStatusCode_INTERNAL_ERROR, "the resolve worker answered a malformed head version or uuid")
	}
	evidence := scrub.message(r.Evidence) // ≤ 1024 B, job.MaxMessageBytes
	resp := &wire.TResolveJobResponse{Status: okStatus(), Outcome: &outcome, Evidence: &evidence}
	if r.HeadVersion > 0 {
		head := r.HeadVersion
		resp.HeadVersion = &head
	}
	if r.IndexUUID != "" && outcome == wire.TLanceResolveOutcome_COMMITTED {
		u := r.IndexUUID
		resp.IndexUUID = &u
	}
	return resp
}

// readOnlyErrorStatus maps a read-only worker's error_code (inspect,
// resolve) to a status.
func readOnlyErrorStatus(code string) wire.TStatusCode {
	switch code {
	case "NOT_FOUND":
		return wire.TStatusCode_NOT_FOUND
	case "INVALID_ARGUMENT":
		return wire.TStatusCode_INVALID_ARGUMENT
	case "IO":
		return wire.TStatusCode_RUNTIME_ERROR
	}
	return wire.TStatusCode_INTERNAL_ERROR
}

// readOnlyRun is what one read-only worker run (inspect, resolve) ended with.
type readOnlyRun struct {
	out      Outcome
	timedOut bool
	took     time.Duration
}

// runReadOnly runs one read-only worker (inspect or resolve mode) under the
// inspect guards, in order: SHUTTING_DOWN while the agent closes (Close waits
// for every run it let in); NOT_READY when isolation is required and not
// verified; TIMEOUT when no inspect slot frees in time. The run is bounded by
// min(timeoutMs, InspectTimeout) (timeoutMs ≤ 0: InspectTimeout), the
// worker's own deadline a reserve (a fifth, at most inspectReserve)
// earlier, so that a hung worker is stopped (TERM, then KILL) and answered
// TIMEOUT before the caller gives up; the caller hanging up ends the worker
// too. A non-nil status is the refusal; otherwise the run's outcome, which
// the caller converts and scrubs (it holds the request's storage options).
//
// InspectLanceDataset can use it as is (its guards and bounds are these).
func (a *Agent) runReadOnly(ctx context.Context, req *frame.Request, timeoutMs int64) (readOnlyRun, *wire.TStatus) {
	a.mu.Lock()
	shutting, isolated := a.shutting, a.isolationOK()
	if !shutting {
		a.inspects.Add(1) // under mu: Close waits for every run it let in
	}
	a.mu.Unlock()
	if shutting {
		return readOnlyRun{}, statusf(wire.TStatusCode_SHUTTING_DOWN, "the backend is shutting down")
	}
	defer a.inspects.Done()
	if !isolated {
		return readOnlyRun{}, statusf(wire.TStatusCode_NOT_READY, "worker isolation is required but could not be verified")
	}
	timeout := a.cfg.InspectTimeout
	if timeoutMs > 0 && time.Duration(timeoutMs)*time.Millisecond < timeout {
		timeout = time.Duration(timeoutMs) * time.Millisecond
	}
	deadline := a.cfg.Clock().Add(timeout - min(timeout/5, inspectReserve))
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	select {
	case a.inspectSem <- struct{}{}:
		defer func() { <-a.inspectSem }()
	case <-rctx.Done():
		return readOnlyRun{}, statusf(wire.TStatusCode_TIMEOUT, "no %s worker became free within %s", req.Mode, timeout)
	}
	start := time.Now()
	out := a.runner.Run(rctx, req, deadline)
	timedOut := errors.Is(rctx.Err(), context.DeadlineExceeded) || !a.cfg.Clock().Before(deadline)
	return readOnlyRun{out: out, timedOut: timedOut, took: time.Since(start)}, nil
}
