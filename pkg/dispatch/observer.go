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
	// a status) with the job's dispatch attempts used up: M2' NOT_COMMITTED,
	// slot released.
	OutcomeNotEnqueued Outcome = "not_enqueued"
	// OutcomeReturnedToPending: provably never enqueued, with attempts left:
	// M2″ back to PENDING, slot released (DESIGN.md §13.2).
	OutcomeReturnedToPending Outcome = "returned_to_pending"
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
	return []Outcome{OutcomeAccepted, OutcomeNotEnqueued, OutcomeReturnedToPending, OutcomeUnknown, OutcomeRecheckFailed, OutcomeCASLost}
}

// Observer sees what the dispatcher does, for metrics. It must be cheap and
// must not block: RoundDone is called by the round's goroutine at the end of
// every RunRound, Dispatched by the send goroutines concurrently.
// Deps.Observer nil means no observer.
type Observer interface {
	// RoundDone reports one RunRound's wall time (sweeps, resolve step,
	// refresh step, dispatch; not the sends and resolves it started, which
	// run on their own).
	RoundDone(elapsed time.Duration)
	// Dispatched reports one planned job's outcome.
	Dispatched(o Outcome)
}

// EvidenceObserver is what an Observer may also implement to count
// evidence errors (DESIGN.md §13.1). Optional: the dispatcher checks for it
// with a type assertion. It must be cheap and must not block.
type EvidenceObserver interface {
	// LowerEpoch counts a backend answering with a process epoch lower than
	// one a job was dispatched at (an error, never a proof), once per
	// backend and epoch.
	LowerEpoch()
}

type nopObserver struct{}

func (nopObserver) RoundDone(time.Duration) {}
func (nopObserver) Dispatched(Outcome)      {}
