package report

import (
	"fmt"
	"unicode/utf8"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/job"
)

// identity is the dispatch a report names: with the job id, the quad the
// M2 and P guards compare (DESIGN.md §3).
type identity struct {
	jobID            int64
	dispatchRevision int64
	invocationID     string
	epoch            int64
}

// wireProof maps the proofs a backend may send; NONE and anything else is
// not a proof (PROCESS_EPOCH_GONE and NOT_ENQUEUED are the master's own).
func wireProof(p wire.TLanceIndexTerminationProof) (job.TerminationProof, bool) {
	switch p {
	case wire.TLanceIndexTerminationProof_CHILD_REAPED:
		return job.ProofChildReaped, true
	case wire.TLanceIndexTerminationProof_NEVER_LAUNCHED:
		return job.ProofNeverLaunched, true
	}
	return 0, false
}

// parsedResult is a result that passed parseResult.
type parsedResult struct {
	code      job.ResultCode
	message   string
	ema       bool
	indexUUID string // NATIVE_OK: the verified index's uuid ("" when not reported)
	build     buildInfo
	// NATIVE_OK: the dataset version the builder verified, and an
	// OPTIMIZE's per-index before/after (raftfsm.RelayResult).
	datasetVersion *int64
	optimized      []*journal.TOptimizedIndexRecord
}

// termination is what a termination report that says the worker ended
// without a result adds to its proof (DESIGN.md §13.3).
type termination struct {
	message, indexUUID string
	resolveAfterMs     int64
}

// parseResult checks the result part of a report (§9, §10). On failure it
// returns the reason and a message that names fields, never values.
func parseResult(r *wire.TLanceIndexJobReport) (parsedResult, Reason, string) {
	if !r.IsSetResultCode() {
		return parsedResult{}, ReasonMalformedCode, "the result code is missing"
	}
	// NO_TRUSTED_RESULT (100) is master-only; only 1..12 may come from a backend.
	code := job.ResultCode(r.GetResultCode())
	if !code.IsWire() {
		return parsedResult{}, ReasonMalformedCode, fmt.Sprintf("result code %d is not one a backend may send", int64(code))
	}
	if r.IsSetCompletionReason() && !job.CompletionReason(r.GetCompletionReason()).IsWire() {
		return parsedResult{}, ReasonInvalidField,
			fmt.Sprintf("completion reason %d is unknown", int64(r.GetCompletionReason()))
	}
	msg, reason, why := parseMessage(r.GetSanitizedMessage())
	if why != "" {
		return parsedResult{}, reason, why
	}
	return parsedResult{code: code, message: msg, ema: r.GetExternalMetadataAdvanced()}, 0, ""
}

// parseMessage checks a sanitized message: at most job.MaxMessageBytes of
// valid UTF-8. The message text is never read to decide anything (§6).
func parseMessage(msg string) (string, Reason, string) {
	if len(msg) > job.MaxMessageBytes {
		return "", ReasonOversizedMessage,
			fmt.Sprintf("the sanitized message is %d bytes; at most %d are allowed", len(msg), job.MaxMessageBytes)
	}
	if !utf8.ValidString(msg) {
		return "", ReasonInvalidField, "the sanitized message is not valid UTF-8"
	}
	return msg, 0, ""
}

// indexUUID checks an optional index uuid: absent or empty is fine (""),
// else it must have the shape of a uuid, 8-4-4-4-12 hex digits (a Lance
// index uuid), which is returned in lower case. ok is false for anything
// else: the field is dropped.
func indexUUID(p *string) (string, bool) {
	if p == nil || *p == "" {
		return "", true
	}
	return job.CanonicalUUID(*p)
}

// maxPhaseBytes bounds a worker's announced build phase.
const maxPhaseBytes = job.MaxPhaseBytes

// completion is the M2 item for a parsed result, with the report's identity.
func completion(id identity, res parsedResult) *journal.TCompletion {
	code := journal.TResultCode(res.code)
	c := &journal.TCompletion{
		JobID: id.jobID, DispatchRevision: id.dispatchRevision, InvocationID: id.invocationID, ProcessEpoch: id.epoch,
		Result_: &journal.TJobResult_{Code: &code, Message: thrift.StringPtr(res.message),
			ExternalMetadataAdvanced: thrift.BoolPtr(res.ema)},
	}
	if res.indexUUID != "" && res.code == job.NativeOK {
		c.IndexUUID = thrift.StringPtr(res.indexUUID)
	}
	res.build.onCompletion(c)
	c.DatasetVersion, c.OptimizedIndexes = res.datasetVersion, res.optimized
	return c
}

// Statuses. Messages carry ids and field names only: never a secret, a
// message text or any other request content.

func statusOK() *wire.TStatus { return &wire.TStatus{StatusCode: wire.TStatusCode_OK} }

func status(code wire.TStatusCode, jobID int64, format string, args ...any) *wire.TStatus {
	msg := fmt.Sprintf(format, args...)
	if jobID != 0 {
		msg = fmt.Sprintf("job %d: %s", jobID, msg)
	}
	return &wire.TStatus{StatusCode: code, ErrorMsgs: []string{msg}}
}

func invalid(jobID int64, msg string) *wire.TStatus {
	return status(wire.TStatusCode_INVALID_ARGUMENT, jobID, "%s", msg)
}
