package job

import (
	"crypto/sha256"
	"crypto/subtle"
)

// What the leader checks of a backend's word before it journals it, shared
// by the report path (pkg/report) and reconcile (pkg/dispatch), which
// applies a stored result as if it had been reported (DESIGN.md §13.5).

// SecretMatches compares an echoed invocation secret with the journaled one
// in constant time. Both are hashed first, so that neither the comparison's
// time nor an early exit on a length mismatch says anything about the
// journaled secret. A missing secret, or a record without one,
// authenticates nothing.
func SecretMatches(given *string, recorded string) bool {
	if given == nil || recorded == "" {
		return false
	}
	a, b := sha256.Sum256([]byte(*given)), sha256.Sum256([]byte(recorded))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// IsWire reports whether a backend may send this completion reason: NONE
// and IF_CONDITION_NOOP. RESOLVED_FROM_DATASET is the leader's alone.
func (r CompletionReason) IsWire() bool { return r == ReasonNone || r == ReasonIfConditionNoop }

// CanonicalUUID returns s in lower case when it is a uuid in the canonical
// 8-4-4-4-12 hex form (a Lance index uuid, in either case); ok is false for
// anything else, the empty string included.
func CanonicalUUID(s string) (uuid string, ok bool) {
	if len(s) != 36 {
		return "", false
	}
	b := []byte(s)
	for i, c := range b {
		switch {
		case i == 8 || i == 13 || i == 18 || i == 23:
			if c != '-' {
				return "", false
			}
		case c >= '0' && c <= '9', c >= 'a' && c <= 'f':
		case c >= 'A' && c <= 'F':
			b[i] = c + ('a' - 'A')
		default:
			return "", false
		}
	}
	return string(b), true
}
