package report

import "sync/atomic"

// Reason is why a report (or one part of it, the proof or the result) was
// dropped, applied or passed on. The string values are stable: the metrics
// export uses them as label values.
type Reason int

// Reasons, counted by Handler.Counts. One envelope may count twice: its
// proof and its result are judged on their own (a report whose proof is
// applied and whose result is malformed counts applied_proof and
// malformed_code).
const (
	ReasonUnauthenticated  Reason = iota // missing or wrong invocation secret, or a job that has none
	ReasonUnknownJob                     // no such job (never admitted, or collected)
	ReasonStaleIdentity                  // names another dispatch than the record's
	ReasonMalformedCode                  // result code missing, or not a wire code (1..12)
	ReasonOversizedMessage               // sanitized message over job.MaxMessageBytes
	ReasonInvalidField                   // any other malformed field (reason, proof, UTF-8, invocation id)
	ReasonForwarded                      // a follower passed the envelope to the leader
	ReasonNoLeader                       // a follower knows no leader (or does not forward)
	ReasonForwardFailed                  // a follower could not reach the leader
	ReasonAppliedResult                  // M2 journaled
	ReasonAppliedProof                   // P journaled
	ReasonDuplicate                      // already applied for this dispatch: acknowledged, nothing written
	ReasonLateResult                     // the job already has another outcome (deadline, M2'): acknowledged, not applied
	ReasonUnavailable                    // the journal could not be written now; the backend retries
	ReasonInternal                       // an Apply answer this package does not expect (a bug)
	ReasonUnconfirmed                    // a refusal not given: the leader could not confirm it still leads (NOT_LEADER)
	ReasonAppliedProgress                // a progress report (index uuid, phase) journaled
	numReasons
)

var reasonNames = [numReasons]string{
	ReasonUnauthenticated:  "unauthenticated",
	ReasonUnknownJob:       "unknown_job",
	ReasonStaleIdentity:    "stale_identity",
	ReasonMalformedCode:    "malformed_code",
	ReasonOversizedMessage: "oversized_message",
	ReasonInvalidField:     "invalid_field",
	ReasonForwarded:        "forwarded",
	ReasonNoLeader:         "no_leader",
	ReasonForwardFailed:    "forward_failed",
	ReasonAppliedResult:    "applied_result",
	ReasonAppliedProof:     "applied_proof",
	ReasonDuplicate:        "duplicate",
	ReasonLateResult:       "late_result",
	ReasonUnavailable:      "unavailable",
	ReasonInternal:         "internal",
	ReasonUnconfirmed:      "unconfirmed_leader",
	ReasonAppliedProgress:  "applied_progress",
}

// String returns the reason's stable name.
func (r Reason) String() string {
	if r >= 0 && r < numReasons {
		return reasonNames[r]
	}
	return "invalid"
}

// ReasonNames lists every reason's name, in a fixed order.
func ReasonNames() []string { return append([]string(nil), reasonNames[:]...) }

// counters are lock-free so the hot path never contends on a mutex.
type counters [numReasons]atomic.Int64

func (c *counters) add(r Reason) { c[r].Add(1) }

// snapshot returns every reason, zeros included, so an exporter sees a
// stable label set.
func (c *counters) snapshot() map[string]int64 {
	out := make(map[string]int64, numReasons)
	for i := range c {
		out[reasonNames[i]] = c[i].Load()
	}
	return out
}
