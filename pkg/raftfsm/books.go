package raftfsm

import (
	"cmp"
	"math"
	"slices"
	"strings"

	"github.com/lancemaster/lancemaster/pkg/raftfsm/ordtree"

	"github.com/lancemaster/lancemaster/pkg/job"
)

// Books are the fence, quota and slot counters (DESIGN.md §4). They are never
// journaled: every replica rebuilds them from the records on restore with the
// same function that maintains them on apply (book), so they cannot drift
// from the records.
//
// Books is the plain form, handed out by State.Books and built by tests.
// The FSM keeps the same content in bookTree, a persistent (copy-on-write)
// form, so that publishing a new view after every entry costs O(changes)
// rather than a copy of every unresolved job's entry.
//
// Zero counts and empty fence lists are kept out of the maps, so two Books
// over the same records are reflect.DeepEqual.
type Books struct {
	// Fence maps a fence key to the unresolved jobs holding it, ascending.
	// Normally one; more only if records were admitted around the fence
	// (an older journal, a hand-edited snapshot).
	Fence map[job.FenceKey][]int64
	// PerTable, PerCatalog and Global count unresolved jobs with a fence
	// identity, the three quota levels.
	PerTable   map[job.TableKey]int
	PerCatalog map[int64]int
	Global     int
	// Slots counts possible-live slots held per backend id.
	Slots map[int64]int
	// Corrupt counts unresolved records without a fence identity; any blocks
	// admission, fail-closed.
	Corrupt int
}

func newBooks() *Books {
	return &Books{
		Fence:      map[job.FenceKey][]int64{},
		PerTable:   map[job.TableKey]int{},
		PerCatalog: map[int64]int{},
		Slots:      map[int64]int{},
	}
}

// ledger is what book writes to: *Books and *bookTxn. A fence posting is
// also the job's per-table quota count: a table's count is the number of
// fence entries on it.
type ledger interface {
	fence(k job.FenceKey, id int64, d int)
	catalog(id int64, d int)
	global(d int)
	slot(backendID int64, d int)
	corrupt(d int)
}

// charge is what one record books.
type charge struct {
	fenced  bool // unresolved with a fence identity: fence + three quotas
	corrupt bool // unresolved without one
	slot    bool // holds a possible-live slot on backend
	fence   job.FenceKey
	backend int64
}

func chargeOf(r *job.Record) charge {
	if r == nil {
		return charge{}
	}
	var c charge
	if r.Unresolved() {
		if r.HasFenceIdentity() {
			c.fenced, c.fence = true, r.Fence()
		} else {
			c.corrupt = true
		}
	}
	if r.HoldsPossibleLiveSlot() {
		c.slot, c.backend = true, r.BackendID
	}
	return c
}

// book releases what old booked (old may be nil: a new record) and charges
// what new needs (new may be nil: a removed record). It is the one place
// that knows what a record holds; Apply calls it for every change and
// Restore calls book(l, nil, rec) for every record. A holding that a
// transition keeps (same job, same key) is left alone rather than released
// and charged again.
func book(l ledger, old, new *job.Record) {
	var was, is charge
	var oldID, newID int64
	if old != nil {
		was, oldID = chargeOf(old), old.JobID
	}
	if new != nil {
		is, newID = chargeOf(new), new.JobID
	}
	same := oldID == newID
	if !same || was.fenced != is.fenced || was.fence != is.fence {
		if was.fenced {
			postFence(l, was.fence, oldID, -1)
		}
		if is.fenced {
			postFence(l, is.fence, newID, +1)
		}
	}
	if !same || was.corrupt != is.corrupt {
		if was.corrupt {
			l.corrupt(-1)
		}
		if is.corrupt {
			l.corrupt(+1)
		}
	}
	if !same || was.slot != is.slot || was.backend != is.backend {
		if was.slot {
			l.slot(was.backend, -1)
		}
		if is.slot {
			l.slot(is.backend, +1)
		}
	}
}

// postFence books the fence and the three quota levels of one job (the
// fence entry is the per-table count).
func postFence(l ledger, k job.FenceKey, id int64, d int) {
	l.fence(k, id, d)
	l.catalog(k.CatalogID, d)
	l.global(d)
}

// ---- the plain form ----------------------------------------------------------

func (b *Books) fence(k job.FenceKey, id int64, d int) {
	ids := b.Fence[k]
	i, found := slices.BinarySearch(ids, id)
	switch {
	case d > 0 && !found:
		ids = slices.Insert(ids, i, id)
		addCount(b.PerTable, k.Table(), +1)
	case d < 0 && found:
		ids = slices.Delete(ids, i, i+1)
		addCount(b.PerTable, k.Table(), -1)
	}
	if len(ids) == 0 {
		delete(b.Fence, k)
	} else {
		b.Fence[k] = ids
	}
}

func (b *Books) catalog(id int64, d int) { addCount(b.PerCatalog, id, d) }
func (b *Books) global(d int)            { b.Global += d }
func (b *Books) slot(id int64, d int)    { addCount(b.Slots, id, d) }
func (b *Books) corrupt(d int)           { b.Corrupt += d }

func addCount[K comparable](m map[K]int, k K, d int) {
	if n := m[k] + d; n != 0 {
		m[k] = n
	} else {
		delete(m, k)
	}
}

// ---- the persistent form -------------------------------------------------------

// bookTree is an immutable version of the books: two copy-on-write B+trees
// (package ordtree) that share every unchanged node with the previous version.
// Items are never changed once published: a new count is a new item.
//
//	fence:  (catalog, locator, provider, index name, job id): the unresolved
//	        jobs holding each fence key
//	counts: ('c', catalog) | ('s', backend) → n
//
// The fence entries are ordered by table (catalog, locator) first, so one
// walk over a table's entries (tableHolds) finds its per-table quota count
// and every holder of a fence key on it: admission checks the fence and the
// per-table quota with one descent, and books a job with one insert. (A
// separate per-table count, until 2026-12-06, cost each admission two more
// descents to a random leaf, and each release two; a table holds few
// entries, at most its quota unless records were admitted around it.)
//
// (Before 2026-11-30 these were go-immutable-radix trees, whose per-entry
// transactions allocated an LRU of written nodes: ~30% of the bytes an
// admission allocated, docs/decisions.md.)
type bookTree struct {
	fence             ordtree.Tree[*fenceEntry]
	counts            ordtree.Tree[*countEntry]
	globals, corrupts int
}

type fenceEntry struct {
	key job.FenceKey
	id  int64
}

type countEntry struct {
	kind byte
	id   int64 // kind 'c' (catalog) or 's' (backend)
	n    int
}

// cmpFenceKey orders fence keys by table (catalog, locator), then provider
// (a table's keys on one dataset are next to each other), then index name.
func cmpFenceKey(a, b job.FenceKey) int {
	if c := cmp.Compare(a.CatalogID, b.CatalogID); c != 0 {
		return c
	}
	if c := strings.Compare(a.Locator, b.Locator); c != 0 {
		return c
	}
	if c := strings.Compare(a.Provider, b.Provider); c != 0 {
		return c
	}
	return strings.Compare(a.NormalizedIndexName, b.NormalizedIndexName)
}

func cmpFenceEntry(a, b *fenceEntry) int {
	if c := cmpFenceKey(a.key, b.key); c != 0 {
		return c
	}
	return cmp.Compare(a.id, b.id)
}

func cmpCountEntry(a, b *countEntry) int {
	if c := cmp.Compare(a.kind, b.kind); c != 0 {
		return c
	}
	return cmp.Compare(a.id, b.id)
}

func newBookTree() *bookTree { return &bookTree{} }

// bookTxn is one entry's changes to a bookTree; it is also how Apply reads
// the books, so a batch sees its own earlier changes.
type bookTxn struct {
	fenceTx           ordtree.Txn[*fenceEntry]
	countsTx          ordtree.Txn[*countEntry]
	globals, corrupts int
}

// txn starts an entry's changes. The books' trees have small nodes: a new
// job's fence and table count sort anywhere among the others, and each
// change copies the whole leaf it lands in (ordtree, "Node shapes").
func (t *bookTree) txn() *bookTxn {
	owner := ordtree.NewOwner()
	return &bookTxn{fenceTx: t.fence.SmallTxn(owner, cmpFenceEntry), countsTx: t.counts.SmallTxn(owner, cmpCountEntry),
		globals: t.globals, corrupts: t.corrupts}
}

func (x *bookTxn) commit() *bookTree {
	return &bookTree{fence: x.fenceTx.Version(), counts: x.countsTx.Version(), globals: x.globals, corrupts: x.corrupts}
}

func (x *bookTxn) fence(k job.FenceKey, id int64, d int) {
	e := &fenceEntry{k, id}
	if d > 0 {
		x.fenceTx.Set(e)
	} else {
		x.fenceTx.Delete(e)
	}
}

func (x *bookTxn) add(e countEntry, d int) {
	if d > 0 {
		// A count grows: the lookup and the new item in one descent. (It
		// reaches zero only from below, which counts never are; the plain
		// form's rule still holds then: no zero counts.)
		x.countsTx.Upsert(&e, func(old *countEntry, found bool) *countEntry {
			if found {
				e.n = old.n
			}
			e.n += d
			return &e
		})
		if e.n == 0 {
			x.countsTx.Delete(&e)
		}
		return
	}
	if old, ok := x.countsTx.Get(x.countsTx.To(&e)); ok {
		e.n = old.n
	}
	if e.n += d; e.n != 0 {
		x.countsTx.Set(&e)
	} else {
		x.countsTx.Delete(&e)
	}
}

func (x *bookTxn) catalog(id int64, d int) { x.add(countEntry{kind: 'c', id: id}, d) }
func (x *bookTxn) slot(id int64, d int)    { x.add(countEntry{kind: 's', id: id}, d) }
func (x *bookTxn) global(d int)            { x.globals += d }
func (x *bookTxn) corrupt(d int)           { x.corrupts += d }

// bookView reads one version of the books: a committed tree or an open txn.
type bookView struct {
	fence             ordtree.Tree[*fenceEntry]
	counts            ordtree.Tree[*countEntry]
	globals, corrupts int
}

func (t *bookTree) view() bookView {
	return bookView{t.fence, t.counts, t.globals, t.corrupts}
}
func (x *bookTxn) view() bookView {
	return bookView{x.fenceTx.Version(), x.countsTx.Version(), x.globals, x.corrupts}
}

// fenceHolders returns the unresolved jobs holding k, ascending.
func (v bookView) fenceHolders(k job.FenceKey) []int64 {
	var ids []int64
	// The bound sorts before every entry of k (job ids are positive), so the
	// walk starts at k's first entry.
	bound := &fenceEntry{k, math.MinInt64}
	v.fence.Ascend(func(e *fenceEntry) int { return cmpFenceEntry(e, bound) }, func(e *fenceEntry) bool {
		if cmpFenceKey(e.key, k) != 0 {
			return false
		}
		ids = append(ids, e.id)
		return true
	})
	return ids
}

// holds is what one walk of a table's fence entries finds (tableHolds):
// its per-table quota count, and the smallest unresolved job holding any
// key on the dataset, the key itself, and the dataset's OPTIMIZE key (0:
// none).
type holds struct {
	table                  int
	dataset, own, optimize int64
}

// tableHolds walks the fence entries of k's table (catalog, locator): as
// many as the table has unresolved jobs, at most its quota unless records
// were admitted around it.
func (v bookView) tableHolds(k job.FenceKey) holds {
	var h holds
	// The bound sorts before every entry of the table: an empty provider
	// and name sort first, and job ids are positive.
	bound := &fenceEntry{job.FenceKey{CatalogID: k.CatalogID, Locator: k.Locator}, math.MinInt64}
	v.fence.Ascend(func(e *fenceEntry) int { return cmpFenceEntry(e, bound) }, func(e *fenceEntry) bool {
		if e.key.CatalogID != k.CatalogID || e.key.Locator != k.Locator {
			return false
		}
		h.table++
		if e.key.Provider != k.Provider {
			return true // another dataset on the table's place
		}
		// A key's holders ascend, so the first one met is its smallest.
		if h.dataset == 0 || e.id < h.dataset {
			h.dataset = e.id
		}
		if h.own == 0 && e.key.NormalizedIndexName == k.NormalizedIndexName {
			h.own = e.id
		}
		if h.optimize == 0 && e.key.NormalizedIndexName == job.OptimizeFenceName {
			h.optimize = e.id
		}
		return true
	})
	return h
}

func (v bookView) count(probe countEntry) int {
	if e, ok := v.counts.Get(func(e *countEntry) int { return cmpCountEntry(e, &probe) }); ok {
		return e.n
	}
	return 0
}

func (v bookView) catalogCount(id int64) int { return v.count(countEntry{kind: 'c', id: id}) }
func (v bookView) slotCount(id int64) int    { return v.count(countEntry{kind: 's', id: id}) }

// plain copies the books into the plain form.
func (v bookView) plain() Books {
	b := *newBooks()
	b.Global, b.Corrupt = v.globals, v.corrupts
	v.fence.Ascend(nil, func(f *fenceEntry) bool {
		b.Fence[f.key] = append(b.Fence[f.key], f.id) // ascending ids per key
		b.PerTable[f.key.Table()]++
		return true
	})
	v.counts.Ascend(nil, func(c *countEntry) bool {
		switch c.kind {
		case 'c':
			b.PerCatalog[c.id] = c.n
		case 's':
			b.Slots[c.id] = c.n
		}
		return true
	})
	return b
}
