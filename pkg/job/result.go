package job

// ResultCode is a typed result of an invocation (DESIGN.md §6). Values 1..12
// are the wire's; NoTrustedResult is master-only and never on the wire.
type ResultCode int32

const (
	PreInvocationStaleAdmission            ResultCode = 1
	PreInvocationUnsupportedSchemaContract ResultCode = 2
	PreInvocationCredentialExpired         ResultCode = 3
	PreInvocationResourceRejected          ResultCode = 4
	NativeOK                               ResultCode = 5
	NativeCommitConflict                   ResultCode = 6
	NativeNotFound                         ResultCode = 7
	NativeInvalidArgument                  ResultCode = 8
	NativeNotSupported                     ResultCode = 9
	NativeIndex                            ResultCode = 10
	NativeIO                               ResultCode = 11
	NativeInternal                         ResultCode = 12
	NoTrustedResult                        ResultCode = 100
)

var resultCodeNames = map[ResultCode]string{
	PreInvocationStaleAdmission:            "PRE_INVOCATION_STALE_ADMISSION",
	PreInvocationUnsupportedSchemaContract: "PRE_INVOCATION_UNSUPPORTED_SCHEMA_CONTRACT",
	PreInvocationCredentialExpired:         "PRE_INVOCATION_CREDENTIAL_EXPIRED",
	PreInvocationResourceRejected:          "PRE_INVOCATION_RESOURCE_REJECTED",
	NativeOK:                               "NATIVE_OK",
	NativeCommitConflict:                   "NATIVE_COMMIT_CONFLICT",
	NativeNotFound:                         "NATIVE_NOT_FOUND",
	NativeInvalidArgument:                  "NATIVE_INVALID_ARGUMENT",
	NativeNotSupported:                     "NATIVE_NOT_SUPPORTED",
	NativeIndex:                            "NATIVE_INDEX",
	NativeIO:                               "NATIVE_IO",
	NativeInternal:                         "NATIVE_INTERNAL",
	NoTrustedResult:                        "NO_TRUSTED_RESULT",
}

func (c ResultCode) String() string {
	if n, ok := resultCodeNames[c]; ok {
		return n
	}
	return "INVALID"
}

// Known reports whether c is a result code lancemaster understands.
func (c ResultCode) Known() bool { _, ok := resultCodeNames[c]; return ok }

// IsWire reports whether c may arrive from a backend (1..12).
func (c ResultCode) IsWire() bool { return c >= PreInvocationStaleAdmission && c <= NativeInternal }

// CompletionReason qualifies an outcome.
type CompletionReason int32

const (
	ReasonNone            CompletionReason = 1
	ReasonIfConditionNoop CompletionReason = 2
	// ReasonResolvedFromDataset: the outcome was proven from the dataset's
	// retained versions after the worker was provably gone (§13.4).
	ReasonResolvedFromDataset CompletionReason = 3
)

func (r CompletionReason) String() string {
	switch r {
	case ReasonIfConditionNoop:
		return "IF_CONDITION_NOOP"
	case ReasonResolvedFromDataset:
		return "RESOLVED_FROM_DATASET"
	}
	return "NONE"
}

// Result is what an invocation produced, as journaled. Message is sanitized
// and bounded by MaxMessageBytes.
type Result struct {
	Code                     ResultCode // 0 while no result
	Reason                   CompletionReason
	Message                  string
	ExternalMetadataAdvanced bool
}

// Classification is the outcome a result maps to.
type Classification struct {
	State   MutationState
	Refresh RefreshState
	Reason  CompletionReason
}

// ClassifyResolved maps an outcome the leader proved from the dataset
// (DESIGN.md §13.4, reason RESOLVED_FROM_DATASET) to its classification:
// NATIVE_OK is COMMITTED (refresh REQUIRED: the index changed), and
// NO_TRUSTED_RESULT is NOT_COMMITTED (refresh NOT_REQUIRED: the dataset
// shows no change of ours). Any other code classifies as Classify does.
func ClassifyResolved(code ResultCode, externalMetadataAdvanced bool, mt MutationType, ifExists bool) Classification {
	switch code {
	case NativeOK:
		return Classification{State: Committed, Refresh: RefreshRequired, Reason: ReasonResolvedFromDataset}
	case NoTrustedResult:
		return Classification{State: NotCommitted, Refresh: RefreshNotRequired, Reason: ReasonResolvedFromDataset}
	}
	return Classify(code, externalMetadataAdvanced, mt, ifExists)
}

// Classify maps a typed result to an outcome (DESIGN.md §6). Only the code,
// the external-metadata flag and the job's own mutation type and IF flag are
// read; message text never is. An unknown code is NO_TRUSTED_RESULT.
func Classify(code ResultCode, externalMetadataAdvanced bool, mt MutationType, ifExists bool) Classification {
	switch code {
	case PreInvocationStaleAdmission, PreInvocationUnsupportedSchemaContract,
		PreInvocationCredentialExpired, PreInvocationResourceRejected:
		refresh := RefreshNotRequired
		if externalMetadataAdvanced {
			refresh = RefreshRequired
		}
		return Classification{NotCommitted, refresh, ReasonNone}
	case NativeOK:
		return Classification{Committed, RefreshRequired, ReasonNone}
	case NativeCommitConflict:
		return Classification{NotCommitted, RefreshRequired, ReasonNone}
	case NativeNotFound:
		if mt == Drop {
			reason := ReasonNone
			if ifExists {
				reason = ReasonIfConditionNoop
			}
			return Classification{NotCommitted, RefreshRequired, reason}
		}
	}
	// NATIVE_NOT_FOUND on CREATE/REPLACE, NATIVE_INVALID_ARGUMENT.._INTERNAL,
	// NO_TRUSTED_RESULT and anything unknown: nobody can say what happened.
	return Classification{Unknown, RefreshNotRequired, ReasonNone}
}
