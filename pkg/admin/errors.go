package admin

import (
	"context"
	"errors"
	"fmt"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/options"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// adminError builds the wire's typed error.
func adminError(code adminapi.TErrorCode, format string, args ...any) *adminapi.TAdminError {
	return &adminapi.TAdminError{Code: code, Message: fmt.Sprintf(format, args...)}
}

// toAdminError turns any error into the wire's typed error. Typed domain and
// option errors keep their code; anything else is INTERNAL with a generic text
// (the detail is logged by the caller, never echoed with request content).
func toAdminError(err error) *adminapi.TAdminError {
	if err == nil {
		return nil
	}
	var ae *adminapi.TAdminError
	if errors.As(err, &ae) {
		return ae
	}
	var je *job.Error
	if errors.As(err, &je) {
		code, cerr := adminapi.TErrorCodeFromString(string(je.Code))
		if cerr != nil {
			code = adminapi.TErrorCode_INTERNAL
		}
		out := &adminapi.TAdminError{Code: code, Message: je.Message}
		if je.JobID != 0 {
			id := je.JobID
			out.JobID = &id
		}
		return out
	}
	var oe *options.Error
	if errors.As(err, &oe) {
		return adminError(adminapi.TErrorCode_INVALID, "%s", oe.Msg)
	}
	switch {
	case errors.Is(err, raftfsm.ErrNotLeader):
		return adminError(adminapi.TErrorCode_NOT_LEADER, "this master is not the leader")
	case errors.Is(err, raftfsm.ErrNoLeader):
		return adminError(adminapi.TErrorCode_UNAVAILABLE, "no leader is known; retry shortly")
	case outcomeUnknown(err):
		return outcomeUnknownError("the change")
	case notApplied(err):
		return adminError(adminapi.TErrorCode_UNAVAILABLE, "the change was not applied (nothing was written); it is safe to retry")
	case errors.Is(err, context.DeadlineExceeded):
		return adminError(adminapi.TErrorCode_TIMEOUT, "the request timed out; its outcome may be unknown, check with jobs list")
	}
	return adminError(adminapi.TErrorCode_INTERNAL, "internal error; see the master's log")
}

// outcomeUnknown reports a write whose fate is unknown (DESIGN.md §13.6):
// pkg/cluster's ErrFateUnknown (leadership lost after the append, a forward
// that failed after sending, the wait for the entry abandoned), recognised
// by its OutcomeUnknown method so that this package need not import the
// cluster, or ErrOutcomeUnknown from an operator adapter.
func outcomeUnknown(err error) bool {
	var m interface{ OutcomeUnknown() bool }
	return errors.Is(err, ErrOutcomeUnknown) || (errors.As(err, &m) && m.OutcomeUnknown())
}

// notApplied reports a write that provably was not applied (raft did not
// take it in time, a forward refused before sending): safe to retry.
func notApplied(err error) bool {
	var m interface{ NotApplied() bool }
	return errors.Is(err, ErrNotApplied) || (errors.As(err, &m) && m.NotApplied())
}

// outcomeUnknownError is OUTCOME_UNKNOWN for what ("the change", "snapshot
// restore"): the CLI exits 3 and says to check before retrying.
func outcomeUnknownError(what string) *adminapi.TAdminError {
	return adminError(adminapi.TErrorCode_OUTCOME_UNKNOWN,
		"%s may or may not have been applied (the leader changed, or the wait for the journal ended, after the "+
			"request was sent): check its effect (jobs list, catalogs list, config get, operator raft list-peers) "+
			"before retrying", what)
}

// applyError maps a non-OK Apply response to a typed error.
func applyError(resp *journal.TApplyResponse) *adminapi.TAdminError {
	msg := resp.GetMessage()
	var code adminapi.TErrorCode
	switch resp.Code {
	case journal.TApplyCode_NOT_FOUND:
		code = adminapi.TErrorCode_NOT_FOUND
	case journal.TApplyCode_FENCE_CONFLICT:
		code = adminapi.TErrorCode_FENCE_CONFLICT
	case journal.TApplyCode_QUOTA_EXCEEDED:
		code = adminapi.TErrorCode_QUOTA_EXCEEDED
	case journal.TApplyCode_MUTATION_DISABLED:
		code = adminapi.TErrorCode_MUTATION_DISABLED
	case journal.TApplyCode_ADMISSION_BLOCKED:
		code = adminapi.TErrorCode_ADMISSION_BLOCKED
	case journal.TApplyCode_CATALOG_IN_USE:
		code = adminapi.TErrorCode_CATALOG_IN_USE
	case journal.TApplyCode_ALREADY_EXISTS:
		code = adminapi.TErrorCode_ALREADY_EXISTS
	case journal.TApplyCode_INVALID:
		code = adminapi.TErrorCode_INVALID
	case journal.TApplyCode_BACKEND_IN_USE:
		code = adminapi.TErrorCode_BACKEND_IN_USE
	case journal.TApplyCode_CAS_FAILED:
		code = adminapi.TErrorCode_CONFLICT
	default:
		code = adminapi.TErrorCode_INTERNAL
	}
	if msg == "" {
		msg = resp.Code.String()
	}
	out := &adminapi.TAdminError{Code: code, Message: msg}
	if resp.IsSetConflictJobID() {
		id := resp.GetConflictJobID()
		out.JobID = &id
	}
	return out
}
