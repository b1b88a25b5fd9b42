package job

// ProviderDirectory is the only catalog provider today: table db.tbl is the
// Lance dataset at <root>/<db>/<tbl>.lance.
const ProviderDirectory = "DIRECTORY"

// Record is one admitted index mutation (DESIGN.md §2). A published record is
// never mutated: every transition copies it (Clone), changes the copy and
// swaps it in.
type Record struct {
	JobID   int64
	Creator string
	// ClaimedCreator is the name the client claimed (--as) when Creator is
	// the identity its verified certificate proves; "" otherwise.
	ClaimedCreator string
	Rev            int64 // +1 on every durable transition; the CAS token
	CreateTimeMs   int64
	UpdateTimeMs   int64 // the retention clock

	CatalogID int64
	DB        string
	Table     string
	Provider  string
	Locator   string // normalized dataset URI; never shown in lists or logged

	// An OPTIMIZE has no index name ("") and the fence name
	// OptimizeFenceName: its fence is the dataset.
	DisplayIndexName    string
	NormalizedIndexName string

	MutationType MutationType
	IfNotExists  bool
	IfExists     bool

	IndexType      string // "" for DROP and OPTIMIZE
	Column         string // "" for DROP and OPTIMIZE
	PropertiesJSON string // canonical (CanonicalProperties)

	AdmittedDatasetVersion int64
	SchemaContract         string

	MutationState MutationState
	RefreshState  RefreshState
	Result        Result

	// The dispatch identity, written once by M1.
	BackendID        int64
	ProcessEpoch     int64
	DispatchRevision int64
	InvocationID     string
	InvocationSecret string // journal only: never shown, logged or exported
	DeadlineMs       int64
	LeaderTerm       int64 // the fencing token of the dispatching leader

	PossibleLiveOwned bool
	TerminationProof  TerminationProof

	ForceReleased bool
	ForceActor    string
	ForceTimeMs   int64
	ForceNote     string
	ForceWarning  string

	RefreshFailureTimeMs int64
	CancelActor          string

	// Evidence (DESIGN.md §13).
	DispatchAttempts   int32  // M2'' returns to PENDING (§13.2)
	IndexUUID          string // the uuid this dispatch built: announced early, or verified with NATIVE_OK
	AdmittedIndexUUID  string // the uuid of the named index at admission, if it existed (§13.7)
	TerminationMessage string // why the worker ended, from the backend (§13.3)
	BuildPhase         string // the worker's last announced phase
	ResolveAfterMs     int64  // RESOLVING: the dataset is not read before this time

	// What the current dispatch's build cost and said (jobs show, jobs logs).
	LeftoverIndexUUID string    // not committed: the index directory the build left behind
	Resources         Resources // the worker, as its backend's supervisor measured it
	LogTail           string    // the last part of the worker's redacted stderr (≤ 4 KiB)
	DispatchTimeMs    int64     // M1 of the current dispatch (master clock)
	BuildElapsedMs    int64     // the worker's elapsed time at its last progress report
	ProgressTimeMs    int64     // when that report was applied (master clock)
	// Results a NATIVE_OK brings (M2): the dataset version the builder
	// verified, and an OPTIMIZE's per-index before/after in the canonical
	// form of EncodeOptimized ("" for none).
	ResultDatasetVersion int64
	OptimizedIndexes     string

	// AdmitIndex is the journal index of the admission entry (0: admitted
	// before it was recorded); Timeline the transitions since, encoded
	// ("" until the first), bounded by MaxTimeline (timeline.go).
	AdmitIndex uint64
	Timeline   string

	// RestoreHold: the job came back PENDING, RUNNING or RESOLVING from an
	// operator snapshot restore, and the journal the restore replaced could
	// not vouch for its dispatch history (another invocation of it may have
	// been accepted after the file was saved). It is never dispatched again
	// (M1 refuses it); reports, reconcile and the sweeps still settle it,
	// and an operator may cancel it while it is PENDING.
	RestoreHold bool
}

// Resources is what a build cost, as the backend's supervisor measured it
// (the backend's clock). PeakMemorySource is "cgroup" (the worker's own
// cgroup's peak) or "rusage" (the worker's max RSS).
type Resources struct {
	StartTimeMs      int64
	FinishTimeMs     int64
	WallMs           int64
	PeakMemoryBytes  int64
	PeakMemorySource string
}

// Peak memory sources (Resources.PeakMemorySource).
const (
	PeakFromCgroup = "cgroup"
	PeakFromRusage = "rusage"
)

// Bounds of a worker's log: MaxLogTailBytes a log tail a backend reports
// and the journal keeps, MaxJobLogBytes one jobs logs answer (a backend's
// and a master's; also the default).
const (
	MaxLogTailBytes = 4 << 10
	MaxJobLogBytes  = 256 << 10
)

// Clone returns a copy to transition. Record holds no reference types, so a
// shallow copy is a deep copy.
func (r *Record) Clone() *Record {
	c := *r
	return &c
}

// Unresolved reports whether the record holds its fence and quota
// (DESIGN.md §2): PENDING or RUNNING; UNKNOWN and not force-released;
// COMMITTED/NOT_COMMITTED while refresh is REQUIRED, RUNNING or FAILED.
func (r *Record) Unresolved() bool {
	switch r.MutationState {
	case Pending, Running, Resolving:
		return true
	case Unknown:
		return !r.ForceReleased
	case Committed, NotCommitted:
		switch r.RefreshState {
		case RefreshNotRequired, RefreshDone:
			return false
		}
		// REQUIRED, RUNNING, FAILED, and a missing value (reads as REQUIRED).
		return true
	case Cancelled:
		return false
	}
	// An unrecognized state reads as UNKNOWN.
	return !r.ForceReleased
}

// HoldsPossibleLiveSlot reports whether a worker for this job may still be
// running (DESIGN.md §4.3).
// A missing proof reads as NONE: only a recorded proof releases the slot.
func (r *Record) HoldsPossibleLiveSlot() bool {
	noProof := r.TerminationProof == ProofNone || r.TerminationProof == 0
	return r.PossibleLiveOwned && noProof && !r.ForceReleased
}

// HasFenceIdentity reports whether the record carries everything its fence
// and quota keys need. An unresolved record without it is corrupt and blocks
// every admission, fail-closed (DESIGN.md §4.2).
func (r *Record) HasFenceIdentity() bool {
	return r.CatalogID > 0 && r.Provider != "" && r.Locator != "" && r.NormalizedIndexName != ""
}

// Terminal reports whether the mutation reached an outcome or was cancelled.
func (r *Record) Terminal() bool {
	return r.MutationState.IsOutcome() || r.MutationState == Cancelled
}

// NeedsRefresh reports whether the refresh driver should pick the job up:
// an outcome, not force-released, refresh REQUIRED or FAILED.
func (r *Record) NeedsRefresh() bool {
	return r.MutationState.IsOutcome() && !r.ForceReleased &&
		(r.RefreshState == RefreshRequired || r.RefreshState == RefreshFailed || r.RefreshState == 0)
}

// FenceKey is the same-name fence (DESIGN.md §4.1).
type FenceKey struct {
	CatalogID           int64
	Provider            string
	Locator             string
	NormalizedIndexName string
}

// TableKey is the per-table quota key (DESIGN.md §4.2).
type TableKey struct {
	CatalogID int64
	Locator   string
}

// Fence returns the record's fence key.
func (r *Record) Fence() FenceKey {
	return FenceKey{r.CatalogID, r.Provider, r.Locator, r.NormalizedIndexName}
}

// Table returns the table a fence key is on: its per-table quota key.
func (k FenceKey) Table() TableKey { return TableKey{k.CatalogID, k.Locator} }

// TableQuotaKey returns the record's per-table quota key: its fence key's
// table.
func (r *Record) TableQuotaKey() TableKey { return r.Fence().Table() }

// MatchesIdentity reports whether a report or proof names this record's
// current dispatch: dispatch revision, invocation id and process epoch.
func (r *Record) MatchesIdentity(dispatchRevision int64, invocationID string, epoch int64) bool {
	return r.InvocationID != "" && r.DispatchRevision == dispatchRevision &&
		r.InvocationID == invocationID && r.ProcessEpoch == epoch
}
