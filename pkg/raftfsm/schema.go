package raftfsm

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/lancemaster/lancemaster/pkg/raftfsm/jobcodec"
	"github.com/lancemaster/lancemaster/pkg/raftfsm/ordtree"

	"github.com/lancemaster/lancemaster/pkg/job"
)

// The tables of State: persistent B+trees (package ordtree) of shared pointers.
// A job is a row (row.go): a live job's record, or a retained job's packed form.
// Jobs have ten orderings. Two cover every job (id, catalog) and GC covers
// every retained one; the others hold only the rows a leader service asks
// for, keyed so that each query is one seek plus a walk over its matches: the
// dispatcher's queries cost O(log n + matches) however many retained jobs
// there are. Every key ends with the job id, so keys are unique.

type jobIndex int

const (
	ixID             jobIndex = iota // job_id, every job
	ixCatalog                        // (catalog_id, job_id), every job
	ixPending                        // job_id of PENDING jobs
	ixRunning                        // (deadline, job_id) of RUNNING jobs
	ixSlot                           // (backend_id, job_id) of slot holders
	ixRefreshDue                     // job_id of NeedsRefresh jobs
	ixRefreshRunning                 // job_id of refresh RUNNING jobs
	ixGC                             // (update_time, job_id) of resolved, slot-free jobs
	ixResolving                      // (resolve_after, job_id) of RESOLVING jobs (§13.3)
	ixEpoch                          // (backend_id, process_epoch, job_id) of slot holders and RUNNING jobs
	numJobIndexes
)

// ixKey is an index key: compared a first, then b, then c.
type ixKey struct{ a, b, c int64 }

func (k ixKey) cmp(o ixKey) int {
	if c := cmp.Compare(k.a, o.a); c != 0 {
		return c
	}
	if c := cmp.Compare(k.b, o.b); c != 0 {
		return c
	}
	return cmp.Compare(k.c, o.c)
}

// An index holds a record when holds says so. Keys are read off rows: the
// three orderings of every job (id, catalog, GC) read what a packed row
// keeps; the others hold live rows only (packable) and read the record.
type jobIndexSpec struct {
	holds func(r *job.Record) bool // nil: every record
	key   func(w *row) ixKey
	cmp   func(a, b *row) int // by key
	byID  bool                // key is (job_id, 0): id order
	// packed: the index holds retained rows (every index without holds, and
	// GC). It is kept in 1 KiB nodes; the others, which hold live jobs only
	// and change with every move of one, in small nodes (ordtree, "Node
	// shapes").
	packed bool
}

func (s *jobIndexSpec) has(r *job.Record) bool { return r != nil && (s.holds == nil || s.holds(r)) }

// hasRow is has for a row: a packed row is in the indexes of retained rows.
func (s *jobIndexSpec) hasRow(w *row) bool {
	if w.live == nil {
		return s.packed
	}
	return s.has(w.live)
}

// from is a lower bound for a walk: it compares a row's key with k.
func (s *jobIndexSpec) from(k ixKey) func(*row) int {
	return func(w *row) int { return s.key(w).cmp(k) }
}

var jobIndexes = func() [numJobIndexes]jobIndexSpec {
	byID := func(w *row) ixKey { return ixKey{w.id(), 0, 0} }
	specs := [numJobIndexes]jobIndexSpec{
		ixID:      {key: byID, byID: true, packed: true},
		ixCatalog: {key: func(w *row) ixKey { return ixKey{w.catalogID(), w.id(), 0} }, packed: true},
		ixPending: {key: byID, byID: true,
			holds: func(r *job.Record) bool { return r.MutationState == job.Pending }},
		ixRunning: {key: func(w *row) ixKey { return ixKey{w.live.DeadlineMs, w.live.JobID, 0} },
			holds: func(r *job.Record) bool { return r.MutationState == job.Running }},
		ixSlot: {key: func(w *row) ixKey { return ixKey{w.live.BackendID, w.live.JobID, 0} },
			holds: (*job.Record).HoldsPossibleLiveSlot},
		ixRefreshDue: {key: byID, byID: true, holds: (*job.Record).NeedsRefresh},
		ixRefreshRunning: {key: byID, byID: true,
			holds: func(r *job.Record) bool { return r.RefreshState == job.RefreshRunning }},
		ixGC: {key: func(w *row) ixKey { return ixKey{w.updateTimeMs(), w.id(), 0} },
			holds: gcEligible, packed: true},
		ixResolving: {key: func(w *row) ixKey { return ixKey{w.live.ResolveAfterMs, w.live.JobID, 0} },
			holds: func(r *job.Record) bool { return r.MutationState == job.Resolving }},
		ixEpoch: {key: func(w *row) ixKey { return ixKey{w.live.BackendID, w.live.ProcessEpoch, w.live.JobID} },
			holds: epochSwept},
	}
	for i := range specs {
		key := specs[i].key
		specs[i].cmp = func(a, b *row) int { return key(a).cmp(key(b)) }
	}
	return specs
}()

// epochSwept: what the dispatcher's epoch sweep looks at — a job holding a
// possible-live slot, or RUNNING (its slot may be released already while
// its result is still awaited).
func epochSwept(r *job.Record) bool {
	return r.HoldsPossibleLiveSlot() || r.MutationState == job.Running
}

// gcEligible: retention may remove a record only when it is resolved and
// holds no slot (DESIGN.md §9); the cutoff is the caller's.
func gcEligible(r *job.Record) bool { return !r.Unresolved() && !r.HoldsPossibleLiveSlot() }

// folded is a row of a case-insensitive unique index: catalogs by name,
// backends by address.
type folded[T any] struct {
	key string // strings.ToLower of the name
	row T
}

func fold(s string) string { return strings.ToLower(s) }

func cmpFolded[T any](a, b folded[T]) int { return strings.Compare(a.key, b.key) }

func cmpCatalogID(a, b *Catalog) int { return cmp.Compare(a.ID, b.ID) }
func cmpBackendID(a, b *Backend) int { return cmp.Compare(a.ID, b.ID) }

// tables is one version of every table. It is a value: a State holds one and
// never changes it; a transaction (tableTxn) yields the next.
type tables struct {
	jobs         [numJobIndexes]ordtree.Tree[*row]
	catalogs     ordtree.Tree[*Catalog]
	catalogNames ordtree.Tree[folded[*Catalog]]
	backends     ordtree.Tree[*Backend]
	backendAddrs ordtree.Tree[folded[*Backend]]
}

// tableTxn is one FSM entry's writes. Apply discards it when the entry fails,
// so a failed entry changes nothing.
type tableTxn struct {
	jobs         [numJobIndexes]ordtree.Txn[*row]
	catalogs     ordtree.Txn[*Catalog]
	catalogNames ordtree.Txn[folded[*Catalog]]
	backends     ordtree.Txn[*Backend]
	backendAddrs ordtree.Txn[folded[*Backend]]
}

func (t *tables) txn() *tableTxn {
	owner := ordtree.NewOwner()
	x := &tableTxn{
		catalogs:     t.catalogs.Txn(owner, cmpCatalogID),
		catalogNames: t.catalogNames.Txn(owner, cmpFolded[*Catalog]),
		backends:     t.backends.Txn(owner, cmpBackendID),
		backendAddrs: t.backendAddrs.Txn(owner, cmpFolded[*Backend]),
	}
	for i := range x.jobs {
		if spec := &jobIndexes[i]; spec.packed {
			x.jobs[i] = t.jobs[i].Txn(owner, spec.cmp)
		} else {
			x.jobs[i] = t.jobs[i].SmallTxn(owner, spec.cmp)
		}
	}
	return x
}

func (x *tableTxn) commit() tables {
	t := tables{
		catalogs:     x.catalogs.Version(),
		catalogNames: x.catalogNames.Version(),
		backends:     x.backends.Version(),
		backendAddrs: x.backendAddrs.Version(),
	}
	for i := range x.jobs {
		t.jobs[i] = x.jobs[i].Version()
	}
	return t
}

// ---- reads, on a version or inside a transaction --------------------------------

func jobByID(t ordtree.Tree[*row], id int64) (*row, bool) {
	return t.Get(func(w *row) int { return cmp.Compare(w.id(), id) })
}

func catalogByID(t ordtree.Tree[*Catalog], id int64) (*Catalog, bool) {
	return t.Get(func(c *Catalog) int { return cmp.Compare(c.ID, id) })
}

func backendByID(t ordtree.Tree[*Backend], id int64) (*Backend, bool) {
	return t.Get(func(b *Backend) int { return cmp.Compare(b.ID, id) })
}

// byFold looks a name up case-insensitively.
func byFold[T any](t ordtree.Tree[folded[T]], name string) (T, bool) {
	key := fold(name)
	f, ok := t.Get(func(f folded[T]) int { return strings.Compare(f.key, key) })
	return f.row, ok
}

// ---- writes -----------------------------------------------------------------------

// putJob swaps new in for old (nil for a new record) in every index, as the
// row newRow makes of it (share and scratch are newRow's). A missing old row
// or a second row for a new id means the indexes no longer agree with each
// other: the entry is fatal rather than applied.
func (x *tableTxn) putJob(old, new *job.Record, share jobcodec.SpecSharer, scratch *[]byte) error {
	if old != nil && old.JobID != new.JobID {
		return errInvariant("job %d cannot replace job %d", new.JobID, old.JobID)
	}
	ow, nw := probeRow(old), newRow(new, share, scratch) // old's row as found, new's as kept
	for i := range jobIndexes {
		spec, ix := &jobIndexes[i], &x.jobs[i]
		was, is := spec.has(old), spec.has(new)
		if was && (!is || spec.cmp(ow, nw) != 0) {
			if _, ok := ix.Delete(ow); !ok {
				return errInvariant("job %d is missing from index %d", old.JobID, i)
			}
			was = false
		}
		if is {
			if _, replaced := ix.Set(nw); replaced != was {
				return errInvariant("job %d: index %d disagrees with the record (present %t)", new.JobID, i, replaced)
			}
		}
	}
	return nil
}

// deleteJob removes a record from every index that holds it.
func (x *tableTxn) deleteJob(old *job.Record) error {
	probe := probeRow(old)
	for i := range jobIndexes {
		if jobIndexes[i].has(old) {
			if _, ok := x.jobs[i].Delete(probe); !ok {
				return errInvariant("job %d is missing from index %d", old.JobID, i)
			}
		}
	}
	return nil
}

// putCatalog inserts a catalog or replaces the one with its id and name.
func (x *tableTxn) putCatalog(c *Catalog) {
	x.catalogs.Set(c)
	x.catalogNames.Set(folded[*Catalog]{fold(c.Name), c})
}

func (x *tableTxn) deleteCatalog(c *Catalog) {
	x.catalogs.Delete(c)
	x.catalogNames.Delete(folded[*Catalog]{fold(c.Name), c})
}

func (x *tableTxn) putBackend(b *Backend) {
	x.backends.Set(b)
	x.backendAddrs.Set(folded[*Backend]{fold(b.Address), b})
}

func (x *tableTxn) deleteBackend(b *Backend) {
	x.backends.Delete(b)
	x.backendAddrs.Delete(folded[*Backend]{fold(b.Address), b})
}

// errInvariant: the tables no longer agree with each other, so the entry
// cannot be applied (FSM.OnFatal).
func errInvariant(format string, args ...any) error {
	return fmt.Errorf("broken index invariant: "+format, args...)
}

// ---- bulk build (Restore) ---------------------------------------------------------

// buildJobIndexes builds every job index from rows in ascending id order.
func buildJobIndexes(all []*row) [numJobIndexes]ordtree.Tree[*row] {
	var out [numJobIndexes]ordtree.Tree[*row]
	for i := range jobIndexes {
		spec := &jobIndexes[i]
		rows := all
		if spec.holds != nil {
			rows = nil
			for _, w := range all {
				if spec.hasRow(w) {
					rows = append(rows, w)
				}
			}
		}
		switch {
		case spec.byID:
		case jobIndex(i) == ixCatalog:
			rows = byCatalog(rows)
		default:
			rows = sortedBy(rows, spec.key)
		}
		if spec.packed {
			out[i] = ordtree.Build(rows)
		} else {
			out[i] = ordtree.BuildSmall(rows)
		}
	}
	return out
}

// byCatalog orders records (in id order) by (catalog, id) with a counting
// sort: catalogs are few, and the order within each is kept.
func byCatalog(recs []*row) []*row {
	counts := map[int64]int{}
	for _, r := range recs {
		counts[r.catalogID()]++
	}
	ids := make([]int64, 0, len(counts))
	for id := range counts {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	at := make(map[int64]int, len(ids))
	off := 0
	for _, id := range ids {
		at[id] = off
		off += counts[id]
	}
	out := make([]*row, len(recs))
	for _, r := range recs {
		c := r.catalogID()
		i := at[c]
		out[i] = r
		at[c] = i + 1
	}
	return out
}

// sortedBy returns rows ordered by their keys, sorting a copy only when they
// are not in order already. It sorts (key, row) pairs: no record is read
// during the sort, which matters for a million retained jobs.
func sortedBy(rows []*row, key func(*row) ixKey) []*row {
	type keyed struct {
		k ixKey
		r *row
	}
	ks := make([]keyed, len(rows))
	sorted := true
	for i, r := range rows {
		ks[i] = keyed{key(r), r}
		sorted = sorted && (i == 0 || ks[i-1].k.cmp(ks[i].k) < 0)
	}
	if sorted {
		return rows
	}
	slices.SortFunc(ks, func(a, b keyed) int { return a.k.cmp(b.k) })
	out := make([]*row, len(ks))
	for i := range ks {
		out[i] = ks[i].r
	}
	return out
}

func buildCatalogs(cs []*Catalog) (ordtree.Tree[*Catalog], ordtree.Tree[folded[*Catalog]]) {
	names := make([]folded[*Catalog], len(cs))
	for i, c := range cs {
		names[i] = folded[*Catalog]{fold(c.Name), c}
	}
	slices.SortFunc(names, cmpFolded[*Catalog])
	return ordtree.Build(cs), ordtree.Build(names)
}

func buildBackends(bs []*Backend) (ordtree.Tree[*Backend], ordtree.Tree[folded[*Backend]]) {
	addrs := make([]folded[*Backend], len(bs))
	for i, b := range bs {
		addrs[i] = folded[*Backend]{fold(b.Address), b}
	}
	slices.SortFunc(addrs, cmpFolded[*Backend])
	return ordtree.Build(bs), ordtree.Build(addrs)
}
