package dispatch

import "time"

// Outcome classifies what became of one job a dispatch round planned
// (DESIGN.md §7). The string values are stable: metrics use them as label
// values.
type Outcome string

// Outcomes of a planned dispatch.
const (
	// OutcomeAccepted: the backend answered OK (enqueued); the report or the
	// deadline decides the job.
	OutcomeAccepted Outcome = "accepted"
	// OutcomeNotEnqueued: provably never enqueued (not sent, or refused with
	// a status): M2' NOT_COMMITTED, slot released.
	OutcomeNotEnqueued Outcome = "not_enqueued"
	// OutcomeUnknown: bytes may have left and no status came back: M2
	// NO_TRUSTED_RESULT, the job turns UNKNOWN and keeps its slot.
	OutcomeUnknown Outcome = "unknown"
	// OutcomeRecheckFailed: journaled RUNNING but not sent, because the
	// pre-send recheck failed (leadership, term or record changed); the job
	// converges by reconcile, a report or the deadline.
	OutcomeRecheckFailed Outcome = "recheck_failed"
	// OutcomeCASLost: the M1 entry's compare-and-set failed for the job (it
	// changed since it was read); nothing was sent.
	OutcomeCASLost Outcome = "cas_lost"
)

// Outcomes lists every outcome, in a fixed order.
func Outcomes() []Outcome {
	return []Outcome{OutcomeAccepted, OutcomeNotEnqueued, OutcomeUnknown, OutcomeRecheckFailed, OutcomeCASLost}
}

// Observer sees what the dispatcher does, for metrics. It must be cheap and
// must not block: RoundDone is called by the round's goroutine at the end of
// every RunRound, Dispatched by the round's send goroutines concurrently.
// Deps.Observer nil means no observer.
type Observer interface {
	// RoundDone reports one RunRound's wall time (sweeps, refresh step,
	// dispatch and sends).
	RoundDone(elapsed time.Duration)
	// Dispatched reports one planned job's outcome.
	Dispatched(o Outcome)
}

type nopObserver struct{}

func (nopObserver) RoundDone(time.Duration) {}
func (nopObserver) Dispatched(Outcome)      {}
