package raftfsm

import (
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/options"
)

// Catalog is a named, durable registration (DESIGN.md §1). CredentialsRef is
// a name under a node's secrets directory, never the secret itself.
type Catalog struct {
	ID             int64
	Name           string // user spelling; unique case-insensitively
	Provider       string // job.ProviderDirectory
	RootURI        string // normalized (job.NormalizeLocator)
	CredentialsRef string
	RefreshKind    string // RefreshNone, RefreshWebhook or RefreshMySQL
	RefreshURL     string // webhook: the URL POSTed to
	CreateTimeMs   int64
	UpdateTimeMs   int64

	// Refresh kind mysql (catalog_refresh.go): the HOST:PORT of a
	// MySQL-protocol endpoint, the statement template ("" is
	// DefaultRefreshStatement) and a credentials reference under the
	// secrets directory (keys user and password), never the secret.
	RefreshAddress        string
	RefreshStatement      string
	RefreshCredentialsRef string
	// The OPTIMIZE policy: admit an OPTIMIZE of a dataset when an index has
	// more than OptimizeUnindexedRows unindexed rows (0: the policy is off),
	// at most once per OptimizeMinIntervalSecond (stored as
	// DefaultOptimizeMinIntervalSecond when the policy is on and none was
	// given).
	OptimizeUnindexedRows     int64
	OptimizeMinIntervalSecond int64
}

// Refresh kinds of a catalog.
const (
	RefreshNone    = "none"
	RefreshWebhook = "webhook"
	RefreshMySQL   = "mysql"
)

// Backend is a registered agent (DESIGN.md §1).
type Backend struct {
	ID        int64
	Address   string // HOST:PORT; unique case-insensitively
	AddTimeMs int64
	// Drained: the leader dispatches nothing new to it (CmdDrainBackend);
	// DrainTimeMs and DrainActor say when and by whom it was last drained
	// or undrained.
	Drained     bool
	DrainTimeMs int64
	DrainActor  string
}

// JobFilter selects jobs for ListJobs. A zero field matches anything.
type JobFilter struct {
	CatalogID     int64
	DB, Table     string
	MutationState job.MutationState
	RefreshState  job.RefreshState
	// Unresolved keeps only jobs that still hold their fence or need an
	// operator (job.Record.Unresolved): a force-released UNKNOWN job, or a
	// resolved COMMITTED one, is left out.
	Unresolved bool
	// MutationStates and RefreshStates, when set, are several states at
	// once: a job matches when its state is any of them (and, with both
	// set, when both match). They add to MutationState / RefreshState.
	MutationStates []job.MutationState
	RefreshStates  []job.RefreshState
	// SinceMs keeps jobs created at or after this time (leader clock, ms).
	// No index serves it and no walk stops early on it: job ids are
	// allocated in log order but create times are each leader's clock, so
	// after a leader change to a master whose clock is behind, a larger id
	// may carry an earlier create time.
	SinceMs int64
	// MutationType and IndexType keep one kind of job (IndexType in its
	// canonical upper case; an OPTIMIZE has none).
	MutationType job.MutationType
	IndexType    string
	// Held keeps only the jobs a snapshot restore held (RestoreHold): their
	// dispatch history is unknown, so they are never dispatched again.
	Held bool
}

func (f JobFilter) match(r *job.Record) bool { return f.matchHead(headOf(r)) }

// matchRow is match without unpacking a packed row. A walk over retained
// jobs meets mostly rows that a db, table or catalog filter rejects: those
// are rejected on the row's own fields before anything else is read.
func (f *JobFilter) matchRow(w *row) bool {
	if w.live != nil {
		return f.match(w.live)
	}
	if p := &w.p; (f.Table != "" && p.Table != f.Table) || (f.DB != "" && p.DB != f.DB) ||
		(f.CatalogID != 0 && p.CatalogID != f.CatalogID) {
		return false
	}
	return f.matchHead(w.head(f))
}

func (f *JobFilter) matchHead(r jobHead) bool {
	return (!f.Unresolved || r.unresolved) &&
		(len(f.MutationStates) == 0 || slices.Contains(f.MutationStates, r.ms)) &&
		(len(f.RefreshStates) == 0 || slices.Contains(f.RefreshStates, r.rs)) &&
		(f.CatalogID == 0 || r.catalogID == f.CatalogID) &&
		(f.DB == "" || r.db == f.DB) &&
		(f.Table == "" || r.table == f.Table) &&
		(f.MutationState == 0 || r.ms == f.MutationState) &&
		(f.RefreshState == 0 || r.rs == f.RefreshState) &&
		(f.SinceMs == 0 || r.createTimeMs >= f.SinceMs) &&
		(f.MutationType == 0 || r.mutationType == f.MutationType) &&
		(f.IndexType == "" || r.indexType == f.IndexType) &&
		(!f.Held || r.held)
}

// State is an immutable view of the journal as of one applied entry.
//
// Concurrency: a *State is never modified after FSM.State returns it, so any
// number of goroutines may query it, concurrently with Apply and Restore on
// raft's FSM goroutine (which publish new views and leave old ones alone).
// Records, catalogs and backends it returns are shared with the FSM: they
// must not be modified (job.Record.Clone gives a private copy). A retained
// job's record is unpacked on each read (row.go): equal, not identical.
//
// Limits: a limit <= 0 means "no limit"; the result is then bounded by the
// matches of the query's index.
type State struct {
	t tables // persistent trees: later entries do not change this version
	m *meta
}

// meta is everything outside the tables. Like them it is never modified
// once published; a transaction copies it (tx.m) and swaps.
type meta struct {
	lastJobID, lastCatalogID, lastBackendID int64
	jobs, catalogs, backends                int64             // row counts, for the snapshot header
	options                                 map[string]string // only keys explicitly set; canonical values
	members                                 map[string]string // node id -> RPC address (the address book)
	clusterID                               string            // names this Raft history (clusterid.go)
	resolved                                options.Options
	appliedIndex                            uint64
	books                                   *bookTree
	counts                                  stateCounts // jobs per state (counts.go)
	audit                                   auditBook   // the audit trail (audit.go)
}

func emptyMeta() *meta {
	return &meta{options: map[string]string{}, resolved: options.Resolve(nil), books: newBookTree()}
}

// collect walks a job index from a lower bound (from; nil for the start) and
// keeps the records of the rows matching keep until limit; stop ends the walk
// early (the index is past the range).
func (s *State) collect(ix jobIndex, from func(*row) int, limit int, stop, keep func(*row) bool) (out []*job.Record, more bool) {
	return s.walk(ix, from, false, limit, stop, keep)
}

// walk is collect in either direction: ascending from a lower bound, or
// (desc) descending from below an upper bound (bound nil: the whole index).
// Only the rows kept are unpacked.
func (s *State) walk(ix jobIndex, bound func(*row) int, desc bool, limit int, stop, keep func(*row) bool) (out []*job.Record, more bool) {
	visit := func(w *row) bool {
		if stop != nil && stop(w) {
			return false
		}
		if keep != nil && !keep(w) {
			return true
		}
		if limit > 0 && len(out) == limit {
			more = true
			return false
		}
		out = append(out, w.record())
		return true
	}
	if desc {
		s.t.jobs[ix].Descend(bound, visit)
	} else {
		s.t.jobs[ix].Ascend(bound, visit)
	}
	return out, more
}

// Job returns the record of id.
func (s *State) Job(id int64) (*job.Record, bool) {
	w, ok := jobByID(s.t.jobs[ixID], id)
	if !ok {
		return nil, false
	}
	return w.record(), true
}

// ListJobs returns the jobs matching f with id > afterID, in id order
// (oldest first), and whether more follow.
func (s *State) ListJobs(f JobFilter, afterID int64, limit int) (jobs []*job.Record, more bool) {
	if afterID == math.MaxInt64 {
		return nil, false
	}
	return s.listJobs(f, afterID+1, false, limit)
}

// ListJobsNewestFirst returns the jobs matching f with id < beforeID
// (beforeID <= 0: from the newest), largest id first, and whether more
// follow: the next page is the one before the last job returned.
func (s *State) ListJobsNewestFirst(f JobFilter, beforeID int64, limit int) (jobs []*job.Record, more bool) {
	if beforeID <= 0 {
		beforeID = math.MaxInt64 // ids never reach it: they count entries
	}
	return s.listJobs(f, beforeID, true, limit)
}

// listJobs walks the index that serves f, from the id bound (inclusive
// ascending, exclusive descending). A catalog filter walks that catalog's
// jobs only; a PENDING or refresh-RUNNING filter walks its own index; other
// filters walk all jobs and skip what does not match.
func (s *State) listJobs(f JobFilter, id int64, desc bool, limit int) ([]*job.Record, bool) {
	ix, k, stop := ixID, ixKey{id, 0, 0}, func(*row) bool { return false }
	switch {
	case f.CatalogID != 0:
		ix, k, stop = ixCatalog, ixKey{f.CatalogID, id, 0}, func(w *row) bool { return w.catalogID() != f.CatalogID }
	case f.MutationState == job.Pending:
		ix = ixPending
	case f.RefreshState == job.RefreshRunning:
		ix = ixRefreshRunning
	}
	return s.walk(ix, jobIndexes[ix].from(k), desc, limit, stop, (&f).matchRow)
}

// JobFacts is what the OPTIMIZE policy reads of a job: its dataset, kind,
// admission time and whether it is resolved.
type JobFacts struct {
	JobID        int64
	DB, Table    string
	MutationType job.MutationType
	CreateTimeMs int64
	Unresolved   bool
}

// EachJobOfCatalog calls fn with the facts of every job of a catalog, in id
// order, until fn returns false. A retained job's packed row is read in
// place, not unpacked: a walk over a catalog's million jobs allocates no
// record.
func (s *State) EachJobOfCatalog(catalogID int64, fn func(JobFacts) bool) {
	s.t.jobs[ixCatalog].Ascend(jobIndexes[ixCatalog].from(ixKey{catalogID, 0, 0}), func(w *row) bool {
		return w.catalogID() == catalogID && fn(w.facts())
	})
}

// PendingInIDOrder returns the PENDING jobs the dispatcher may dispatch,
// oldest (smallest id) first: not those held by a snapshot restore (M1
// refuses them), which are walked past, not counted against limit.
func (s *State) PendingInIDOrder(limit int) []*job.Record {
	out, _ := s.collect(ixPending, nil, limit, nil, func(w *row) bool { return !w.live.RestoreHold })
	return out
}

// RunningByDeadline returns RUNNING jobs whose deadline is before
// deadlineBeforeMs (strictly), earliest deadline first. Pass math.MaxInt64
// for every RUNNING job.
func (s *State) RunningByDeadline(deadlineBeforeMs int64, limit int) []*job.Record {
	out, _ := s.collect(ixRunning, nil, limit,
		func(w *row) bool { return w.live.DeadlineMs >= deadlineBeforeMs }, nil)
	return out
}

// ResolvingDue returns RESOLVING jobs whose resolve_after is at most nowMs,
// in (resolve_after, id) order, at most limit (0: no limit): those whose
// outcome may now be read from the dataset (DESIGN.md §13.4).
func (s *State) ResolvingDue(nowMs int64, limit int) []*job.Record {
	out, _ := s.collect(ixResolving, nil, limit,
		func(w *row) bool { return w.live.ResolveAfterMs > nowMs }, nil)
	return out
}

// SlotHolders returns the jobs holding a possible-live slot on a backend, in
// id order.
func (s *State) SlotHolders(backendID int64) []*job.Record {
	out, _ := s.collect(ixSlot, jobIndexes[ixSlot].from(ixKey{backendID, math.MinInt64, 0}), 0,
		func(w *row) bool { return w.live.BackendID != backendID }, nil)
	return out
}

// OffEpoch returns the jobs of a backend that hold a possible-live slot or
// are RUNNING and were dispatched at another process epoch than epoch: the
// older ones first, by (epoch, id), then the newer ones. In steady state,
// when every job runs at the backend's epoch, it is one seek and no walk
// (the epoch sweep, pkg/dispatch, asks it on every round).
func (s *State) OffEpoch(backendID, epoch int64) []*job.Record {
	at := func(e int64) func(*row) int { return jobIndexes[ixEpoch].from(ixKey{backendID, e, math.MinInt64}) }
	older, _ := s.collect(ixEpoch, at(math.MinInt64), 0,
		func(w *row) bool { return w.live.BackendID != backendID || w.live.ProcessEpoch >= epoch }, nil)
	if epoch == math.MaxInt64 {
		return older
	}
	newer, _ := s.collect(ixEpoch, at(epoch+1), 0, func(w *row) bool { return w.live.BackendID != backendID }, nil)
	return append(older, newer...)
}

// HeldSlots is the number of possible-live slots a backend holds.
func (s *State) HeldSlots(backendID int64) int { return s.m.books.view().slotCount(backendID) }

// RefreshDue returns jobs the refresh driver should pick up (NeedsRefresh),
// in id order. The FAILED retry throttle is the caller's (it needs a clock).
func (s *State) RefreshDue(limit int) []*job.Record {
	out, _ := s.collect(ixRefreshDue, nil, limit, nil, nil)
	return out
}

// RefreshRunning returns every job whose refresh is RUNNING, in id order
// (a new leader turns them back to REQUIRED, R4).
func (s *State) RefreshRunning() []*job.Record {
	out, _ := s.collect(ixRefreshRunning, nil, 0, nil, nil)
	return out
}

// GCEligible returns the ids of resolved, slot-free jobs last updated
// before cutoffMs, oldest update first (ties by id). Ids only: the GC
// proposes ids, and a retained job's packed row is not unpacked to name it.
func (s *State) GCEligible(cutoffMs int64, limit int) []int64 {
	var out []int64
	s.t.jobs[ixGC].Ascend(nil, func(w *row) bool {
		if w.updateTimeMs() >= cutoffMs || (limit > 0 && len(out) == limit) {
			return false
		}
		out = append(out, w.id())
		return true
	})
	return out
}

// UnresolvedForFence returns the unresolved jobs holding a fence key,
// ascending. The slice is the caller's.
func (s *State) UnresolvedForFence(k job.FenceKey) []int64 {
	return s.m.books.view().fenceHolders(k)
}

// Catalog looks a catalog up by name, case-insensitively.
func (s *State) Catalog(name string) (*Catalog, bool) {
	c, ok := byFold(s.t.catalogNames, name)
	if !ok || !strings.EqualFold(c.Name, name) {
		return nil, false
	}
	return c, true
}

// CatalogByID looks a catalog up by id.
func (s *State) CatalogByID(id int64) (*Catalog, bool) { return catalogByID(s.t.catalogs, id) }

// Catalogs returns every catalog by id.
func (s *State) Catalogs() []*Catalog {
	var out []*Catalog
	s.t.catalogs.Ascend(nil, func(c *Catalog) bool { out = append(out, c); return true })
	return out
}

// UnresolvedInCatalog counts the unresolved jobs (with a fence identity)
// targeting a catalog; while it is positive the catalog may not be removed
// or re-rooted (DESIGN.md §5).
func (s *State) UnresolvedInCatalog(catalogID int64) int {
	return s.m.books.view().catalogCount(catalogID)
}

// Backend looks a backend up by id.
func (s *State) Backend(id int64) (*Backend, bool) { return backendByID(s.t.backends, id) }

// BackendByAddress looks a backend up by address, case-insensitively.
func (s *State) BackendByAddress(addr string) (*Backend, bool) {
	b, ok := byFold(s.t.backendAddrs, addr)
	if !ok || !strings.EqualFold(b.Address, addr) {
		return nil, false
	}
	return b, true
}

// Backends returns every backend by id.
func (s *State) Backends() []*Backend {
	var out []*Backend
	s.t.backends.Ascend(nil, func(b *Backend) bool { out = append(out, b); return true })
	return out
}

// OptionValues returns the options explicitly set, canonical values. The
// map is the caller's.
func (s *State) OptionValues() map[string]string { return maps.Clone(s.m.options) }

// OptionValue returns one explicitly set option's canonical value, without
// copying the others.
func (s *State) OptionValue(key string) (string, bool) {
	v, ok := s.m.options[key]
	return v, ok
}

// Options returns every option resolved and clamped (options.Resolve).
func (s *State) Options() options.Options { return s.m.resolved }

// Books returns a deep copy of the fence, quota and slot books.
func (s *State) Books() Books { return s.m.books.view().plain() }

// CorruptUnresolved counts unresolved records without a fence identity; any
// blocks admission (ADMISSION_BLOCKED) until it is resolved.
func (s *State) CorruptUnresolved() int { return s.m.books.corrupts }

// AppliedIndex is the Raft index of the last entry applied to this view; 0
// after a restore until the next entry (the snapshot does not carry it).
func (s *State) AppliedIndex() uint64 { return s.m.appliedIndex }

// LastJobID is the last job id allocated (an addition to the contract, for
// diagnostics and tests).
func (s *State) LastJobID() int64 { return s.m.lastJobID }
