package job

import (
	"fmt"
	"unicode/utf8"
)

// Byte bounds (UTF-8 bytes), DESIGN.md §2 and §10.
const (
	MaxNameBytes         = 1024 // names, creator, actor
	MaxPropertiesBytes   = 4096
	MaxInvocationIDBytes = 256
	MaxNoteBytes         = 1024 // force note and warning
	MaxMessageBytes      = 1024 // sanitized result message
	MaxURIBytes          = 4096 // catalog root and dataset URIs
	MaxSchemaBytes       = 64 << 10
	MaxIndexUUIDBytes    = 64 // a Lance index uuid (36 bytes) with room to spare
	MaxPhaseBytes        = 64 // a worker's announced build phase

	MaxStorageOptions        = 64
	MaxStorageOptionKeyBytes = 256
	MaxStorageOptionValBytes = 4096
	// MaxCredentialsRefBytes bounds a credentials reference (a file name).
	MaxCredentialsRefBytes = 255
	MaxFrameBytes          = 512 << 10
)

// CheckBytes returns an INVALID error naming the field when s is longer than
// max bytes or is not valid UTF-8. The value itself is never echoed.
func CheckBytes(field, s string, max int) error {
	if len(s) > max {
		return Errorf(CodeInvalid, "%s is %d bytes; at most %d are allowed", field, len(s), max)
	}
	if !utf8.ValidString(s) {
		return Errorf(CodeInvalid, "%s is not valid UTF-8", field)
	}
	return nil
}

// TruncateMessage bounds a result message to MaxMessageBytes on a rune boundary.
func TruncateMessage(s string) string {
	if len(s) <= MaxMessageBytes {
		return s
	}
	cut := MaxMessageBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// Code is a stable, user-facing error code (the admin API's TErrorCode names).
type Code string

const (
	CodeNotFound           Code = "NOT_FOUND"
	CodeInvalid            Code = "INVALID"
	CodeFenceConflict      Code = "FENCE_CONFLICT"
	CodeQuotaExceeded      Code = "QUOTA_EXCEEDED"
	CodeMutationDisabled   Code = "MUTATION_DISABLED"
	CodeCatalogInUse       Code = "CATALOG_IN_USE"
	CodeNotLeader          Code = "NOT_LEADER"
	CodeAlreadyExists      Code = "ALREADY_EXISTS"
	CodeConflict           Code = "CONFLICT"
	CodeUnavailable        Code = "UNAVAILABLE"
	CodeInternal           Code = "INTERNAL"
	CodeAdmissionBlocked   Code = "ADMISSION_BLOCKED"
	CodeBackendInUse       Code = "BACKEND_IN_USE"
	CodeTimeout            Code = "TIMEOUT"
	CodeInspectFailed      Code = "INSPECT_FAILED"
	CodeAmbiguous          Code = "AMBIGUOUS"
	CodeDefinitionMismatch Code = "DEFINITION_MISMATCH"
	// CodeOutcomeUnknown: the write may or may not have been applied
	// (leadership lost after the append, a forward that failed after
	// sending); check before retrying (§13.6).
	CodeOutcomeUnknown Code = "OUTCOME_UNKNOWN"
)

// Error is a typed, user-facing error. Its message never carries a locator,
// a storage credential or an invocation secret.
type Error struct {
	Code    Code
	Message string
	JobID   int64 // FENCE_CONFLICT: the smallest fencing job id
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

// Errorf builds a typed error.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}
