package dispatch

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/job"
)

// The checks a backend's text must pass before the leader journals it.
// Reconcile applies a backend's stored result as if it had been reported
// (DESIGN.md §13.5: "reconcile applies the same checks as the report
// path"): the secret, the codes and the uuid shape are pkg/job's shared
// rules (SecretMatches, IsWire, CanonicalUUID), as pkg/report uses them.

// checkStoredResult returns why a stored result may not be applied to rec,
// or "": it must name rec's dispatch identity, echo its invocation secret,
// carry a result code a backend may send (1..12), a completion reason of
// the wire enum only (RESOLVED_FROM_DATASET is the leader's), and a message
// of at most job.MaxMessageBytes of valid UTF-8. The reasons name fields,
// never values.
func checkStoredResult(rec *job.Record, rep *wire.TLanceIndexJobReport) string {
	switch {
	case rep.JobID != rec.JobID || rep.InvocationID != rec.InvocationID ||
		rep.DispatchRevision != rec.DispatchRevision || rep.BeProcessEpoch != rec.ProcessEpoch:
		return "it names another dispatch"
	case !job.SecretMatches(rep.InvocationSecret, rec.InvocationSecret):
		return "its invocation secret is missing or wrong"
	case rep.ResultCode == nil || !job.ResultCode(*rep.ResultCode).IsWire():
		return "it has no result code a backend may send"
	}
	if rep.CompletionReason != nil && !job.CompletionReason(*rep.CompletionReason).IsWire() {
		return fmt.Sprintf("its completion reason %d is not one a backend may send", int64(*rep.CompletionReason))
	}
	if why := checkMessage(rep.GetSanitizedMessage()); why != "" {
		return "its sanitized message " + why
	}
	return ""
}

// checkMessage returns why a backend's message may not be journaled, or "".
func checkMessage(msg string) string {
	if len(msg) > job.MaxMessageBytes {
		return fmt.Sprintf("is %d bytes; at most %d are allowed", len(msg), job.MaxMessageBytes)
	}
	if !utf8.ValidString(msg) {
		return "is not valid UTF-8"
	}
	return ""
}

// boundedText makes a backend's free text (resolve evidence, a termination
// cause) fit a journaled message: invalid UTF-8 replaced, cut to max bytes
// on a rune boundary. For text the leader quotes, not for a result it
// applies as reported (those are refused instead: checkStoredResult).
func boundedText(s string, max int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= max {
		return s
	}
	const ellipsis = "…"
	cut := max - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ellipsis
}
