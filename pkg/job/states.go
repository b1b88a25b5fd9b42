package job

// The numeric values of every enum here equal the journal's (idl/journal.thrift),
// so converting between the two is a cast.

// MutationType is what a job does to its index.
type MutationType int32

const (
	Create  MutationType = 1 // CREATE: fails if the name exists (unless IF NOT EXISTS)
	Replace MutationType = 2 // CREATE OR REPLACE
	Drop    MutationType = 3 // DROP INDEX
	// Optimize is a dataset-scoped maintenance job (DESIGN.md §14):
	// compaction, then every index brought up to date; versions are never
	// pruned. Its fence is the dataset (OptimizeFenceName).
	Optimize MutationType = 4
)

// OptimizeFenceName is the normalized index name an OPTIMIZE job's fence
// key carries. The reserved prefix "__lance" keeps it from any user index
// name, so it can never collide with an index job's key.
const OptimizeFenceName = "__lance_optimize"

func (t MutationType) String() string {
	switch t {
	case Create:
		return "CREATE"
	case Replace:
		return "REPLACE"
	case Drop:
		return "DROP"
	case Optimize:
		return "OPTIMIZE"
	}
	return "INVALID"
}

// MutationState is the job's mutation state machine (DESIGN.md §3).
type MutationState int32

const (
	Pending      MutationState = 1
	Running      MutationState = 2
	Committed    MutationState = 3
	NotCommitted MutationState = 4
	Unknown      MutationState = 5 // also what a missing value reads as
	Cancelled    MutationState = 6 // Improvement: PENDING -> CANCELLED by operator
	// Resolving (DESIGN.md §13.3): the worker is provably gone without a
	// trusted result; the outcome is read from the dataset (§13.4), else
	// UNKNOWN. Unresolved; holds no possible-live slot.
	Resolving MutationState = 7
)

var mutationStateNames = map[MutationState]string{
	Pending: "PENDING", Running: "RUNNING", Committed: "COMMITTED",
	NotCommitted: "NOT_COMMITTED", Unknown: "UNKNOWN", Cancelled: "CANCELLED", Resolving: "RESOLVING",
}

func (s MutationState) String() string {
	if n, ok := mutationStateNames[s]; ok {
		return n
	}
	return "UNKNOWN"
}

// IsOutcome reports whether s is one of the three terminal outcomes of a dispatch.
func (s MutationState) IsOutcome() bool {
	return s == Committed || s == NotCommitted || s == Unknown
}

// RefreshState is the job's refresh state machine (DESIGN.md §3, R1–R4).
type RefreshState int32

const (
	RefreshNotRequired RefreshState = 1
	RefreshRequired    RefreshState = 2 // also what a missing value reads as
	RefreshRunning     RefreshState = 3
	RefreshDone        RefreshState = 4
	RefreshFailed      RefreshState = 5
)

var refreshStateNames = map[RefreshState]string{
	RefreshNotRequired: "NOT_REQUIRED", RefreshRequired: "REQUIRED", RefreshRunning: "RUNNING",
	RefreshDone: "DONE", RefreshFailed: "FAILED",
}

func (s RefreshState) String() string {
	if n, ok := refreshStateNames[s]; ok {
		return n
	}
	return "REQUIRED"
}

// TerminationProof is what released a possible-live slot (DESIGN.md §4.3).
// CHILD_REAPED and NEVER_LAUNCHED come from the backend (same wire values);
// the rest are the master's own.
type TerminationProof int32

const (
	ProofNone             TerminationProof = 1
	ProofChildReaped      TerminationProof = 2
	ProofNeverLaunched    TerminationProof = 3
	ProofProcessEpochGone TerminationProof = 4
	ProofNotEnqueued      TerminationProof = 5
)

var proofNames = map[TerminationProof]string{
	ProofNone: "NONE", ProofChildReaped: "CHILD_REAPED", ProofNeverLaunched: "NEVER_LAUNCHED",
	ProofProcessEpochGone: "PROCESS_EPOCH_GONE", ProofNotEnqueued: "NOT_ENQUEUED",
}

func (p TerminationProof) String() string {
	if n, ok := proofNames[p]; ok {
		return n
	}
	return "INVALID"
}

// ParseMutationState parses a state name as shown by String.
func ParseMutationState(s string) (MutationState, bool) {
	for k, v := range mutationStateNames {
		if v == s {
			return k, true
		}
	}
	return 0, false
}

// ParseRefreshState parses a refresh state name as shown by String.
func ParseRefreshState(s string) (RefreshState, bool) {
	for k, v := range refreshStateNames {
		if v == s {
			return k, true
		}
	}
	return 0, false
}
