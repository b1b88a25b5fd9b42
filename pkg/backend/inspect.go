package backend

import (
	"context"
	"errors"
	"maps"
	"time"

	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/backend/frame"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/job/jobwire"
)

// inspectReserve caps the time kept between an inspect worker's deadline and
// the caller's timeout.
const inspectReserve = 5 * time.Second

// InspectLanceDataset takes the admission snapshot of a dataset (DESIGN.md
// §5 step 3) by running the worker in inspect mode, bounded by
// min(timeout_ms, InspectTimeout) (the worker's own deadline a little
// earlier). It does not need a master heartbeat (the
// first admission may come before the first heartbeat), but it needs
// verified isolation when isolation is required: the worker opens the
// dataset with the caller's credentials either way.
//
// A failure is a non-OK status with a scrubbed message: NOT_FOUND and
// INVALID_ARGUMENT as the worker classified them, RUNTIME_ERROR for an I/O
// error, TIMEOUT when the deadline passed, INTERNAL_ERROR otherwise.
func (s *service) InspectLanceDataset(ctx context.Context, r *wire.TInspectDatasetRequest) (*wire.TInspectDatasetResponse, error) {
	a := s.a
	fail := func(code wire.TStatusCode, format string, args ...any) (*wire.TInspectDatasetResponse, error) {
		return &wire.TInspectDatasetResponse{Status: statusf(code, format, args...)}, nil
	}
	if r == nil {
		return fail(wire.TStatusCode_INVALID_ARGUMENT, "no request")
	}
	if err := job.CheckBytes("dataset_uri", r.DatasetURI, job.MaxURIBytes); err != nil || r.DatasetURI == "" {
		return fail(wire.TStatusCode_INVALID_ARGUMENT, "dataset_uri is missing, too long or not UTF-8")
	}
	if err := checkStorageOptions(r.StorageOptions); err != nil {
		return fail(wire.TStatusCode_INVALID_ARGUMENT, "%s", err)
	}
	a.mu.Lock()
	shutting, isolated := a.shutting, a.isolationOK()
	if !shutting {
		a.inspects.Add(1) // under mu: Close waits for every inspect it let in
	}
	a.mu.Unlock()
	if shutting {
		return fail(wire.TStatusCode_SHUTTING_DOWN, "the backend is shutting down")
	}
	defer a.inspects.Done()
	if !isolated {
		return fail(wire.TStatusCode_NOT_READY, "worker isolation is required but could not be verified")
	}
	if st := a.storeGate(ctx, r.DatasetURI, r.StorageOptions); st != nil {
		return &wire.TInspectDatasetResponse{Status: st}, nil
	}

	timeout := a.cfg.InspectTimeout
	if ms := r.GetTimeoutMs(); ms > 0 && time.Duration(ms)*time.Millisecond < timeout {
		timeout = time.Duration(ms) * time.Millisecond
	}
	// The worker's deadline keeps a reserve (a fifth, at most 5 s) before
	// the caller's timeout, so that a hung worker is stopped (TERM, then
	// KILL) and answered TIMEOUT before the caller gives up on the call.
	deadline := a.cfg.Clock().Add(timeout - min(timeout/5, inspectReserve))
	// The connection's context: a caller that hangs up (or a server Close)
	// ends the worker too.
	ictx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	select {
	case a.inspectSem <- struct{}{}:
		defer func() { <-a.inspectSem }()
	case <-ictx.Done():
		return fail(wire.TStatusCode_TIMEOUT, "no inspect worker became free within %s", timeout)
	}

	scrub := newScrubber(r.StorageOptions)
	req := &frame.Request{Protocol: frame.Protocol, Mode: frame.ModeInspect, DatasetURI: r.DatasetURI,
		StorageOptions: maps.Clone(r.StorageOptions)}
	start := time.Now()
	out := a.runner.Run(ictx, req, deadline)
	timedOut := errors.Is(ictx.Err(), context.DeadlineExceeded) || !a.cfg.Clock().Before(deadline)
	resp := inspectResponse(out, scrub, timedOut)
	fields := []zap.Field{zap.Stringer("status", resp.Status.StatusCode), zap.Duration("took", time.Since(start))}
	if resp.Status.StatusCode == wire.TStatusCode_OK {
		a.log.Debug("inspect answered", fields...)
	} else {
		a.log.Info("inspect failed", append(fields, zap.Strings("message", resp.Status.ErrorMsgs),
			zap.String("stderr_tail", scrub.stderrTail(out.Stderr)))...)
	}
	return resp, nil
}

// inspectResponse converts an inspect outcome.
func inspectResponse(out Outcome, scrub scrubber, timedOut bool) *wire.TInspectDatasetResponse {
	fail := func(code wire.TStatusCode, msg string) *wire.TInspectDatasetResponse {
		return &wire.TInspectDatasetResponse{Status: &wire.TStatus{StatusCode: code, ErrorMsgs: []string{scrub.message(msg)}}}
	}
	r := out.Result
	switch {
	case r == nil && timedOut:
		return fail(wire.TStatusCode_TIMEOUT, "the inspect worker did not answer in time")
	case r == nil:
		return fail(wire.TStatusCode_INTERNAL_ERROR, "the inspect worker gave no result: "+workerCause(out))
	case r.Mode != "" && r.Mode != frame.ModeInspect:
		return fail(wire.TStatusCode_INTERNAL_ERROR, "the inspect worker answered a frame of another mode")
	case !r.OK:
		code := wire.TStatusCode_INTERNAL_ERROR
		switch r.ErrorCode {
		case "NOT_FOUND":
			code = wire.TStatusCode_NOT_FOUND
		case "INVALID_ARGUMENT":
			code = wire.TStatusCode_INVALID_ARGUMENT
		case "IO":
			code = wire.TStatusCode_RUNTIME_ERROR
		}
		msg := r.Message
		if msg == "" {
			msg = "the dataset could not be inspected"
		}
		return fail(code, msg)
	case r.DatasetVersion < 0:
		return fail(wire.TStatusCode_INTERNAL_ERROR, "the inspect worker answered a negative dataset version")
	}
	snap := &job.Snapshot{Version: r.DatasetVersion, Fields: make([]job.Field, 0, len(r.Fields)),
		Indexes: make([]job.IndexInfo, 0, len(r.Indexes))}
	for _, f := range r.Fields {
		snap.Fields = append(snap.Fields, job.Field{ID: f.FieldID, Name: f.Name, Type: f.DataType, Nullable: f.Nullable,
			ListDimension: f.ListDimension, ElementType: f.ElementType, ElementNullable: f.ElementNullable})
	}
	for _, ix := range r.Indexes {
		snap.Indexes = append(snap.Indexes, job.IndexInfo{Name: ix.Name, IndexType: ix.IndexType, Columns: ix.Columns,
			PropertiesJSON: ix.PropertiesJSON}) // jobwire copies Columns; the uuid comes with the stats below
	}
	resp := jobwire.InspectResponse(snap)
	// §13.7: per index its uuid, created time, indexed and unindexed rows,
	// segments and size, where the library gives them.
	frame.ApplyIndexStats(resp.Indexes, r.IndexStats)
	return resp
}
