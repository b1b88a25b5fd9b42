// Package ordtree is the journal's storage engine for ordered indexes: a
// persistent (copy-on-write) B+tree, the ordered indexes of raftfsm.State.
package ordtree

import "sync/atomic"

// A persistent (copy-on-write) B+tree: the ordered indexes of raftfsm.State.
//
// Why not a library tree: the three orderings that cover every job (id,
// catalog, GC) must cost a small part of a retained job's ~290 bytes (a
// packed row and its strings; the budget is 400). google/btree's
// nodes end half full under the append-mostly inserts of a journal (job ids
// only grow, update times nearly so), and each ordering then costs ~20 bytes
// per 8-byte item (measured, v1.1.3); go-memdb costs ~370 bytes per entry per
// index. This tree stores only 8-byte items in 1 KiB nodes (one size class,
// one allocation each); a full last node gives an appended item a new node
// of its own, so appends leave full nodes behind; and Restore builds it
// bottom-up from sorted items with every node full: ~8.5 bytes per item.
//
// Node shapes: a change copies the whole node it lands in, so a tree whose
// changes land at random leaves, or that only holds what churns, is written
// with small nodes (SmallTxn and BuildSmall: 256 bytes, SmallCap entries), a
// quarter of the copy. The books are one (a new job's fence and table count
// sort anywhere), the job indexes of live jobs only another (a job enters
// and leaves them as it moves). The three job indexes that hold every
// retained job, where new items go to the end and memory per item counts,
// keep 1 KiB nodes. A tree is all of one shape: a new node takes the
// capacity of the node it splits from or is copied from, and only the first
// node of an empty tree takes its transaction's.
//
// Versions: a tree value (root, length) is immutable once published. A
// writer (Txn) copies a node before its first change and then changes its
// copy in place; nodes carry the id of the transaction that copied them, and
// ids are never reused, so a published node is never written again. A
// version therefore costs O(changed nodes × height) to make and O(1) to
// publish, and any number of goroutines may read a published version while a
// writer makes the next one.
//
// Invariants: items ascend strictly by the ordering's cmp; an inner node's
// items[i] is the first item of kids[i]'s subtree; all leaves are at one
// depth; every node off the rightmost path (where appends go) holds at least
// a quarter of its capacity (least) — the bulk build, the split rule and the rebalancing of
// delete keep it so. Nothing relies on the fill for correctness, only for
// memory.

const (
	// NodeCap is the entries per node of the 1 KiB shape: a 64-byte header
	// plus 120 8-byte items is 1024 bytes, a malloc size class. (Tests
	// elsewhere use it to make sure a walk crosses nodes.)
	NodeCap = 120
	// SmallCap is the entries per node of the small shape: 64 + 24×8 = 256
	// bytes.
	SmallCap = 24
)

type node[T any] struct {
	owner uint64     // the transaction that made this node; 0: built by Restore
	n     int        // entries used
	kids  []*node[T] // nil for a leaf; else as long as items
	items []T        // a leaf's items; an inner node's kids' first items. Its length is the node's capacity
}

// The two shapes: the header and its items in one allocation.
type bigNode[T any] struct {
	node[T]
	a [NodeCap]T
}

type smallNode[T any] struct {
	node[T]
	a [SmallCap]T
}

// newNode makes an empty node of capacity c (NodeCap or SmallCap) owned by
// owner; inner says it has kids.
func newNode[T any](c int, owner uint64, inner bool) *node[T] {
	var n *node[T]
	if c == SmallCap {
		s := new(smallNode[T])
		s.items, n = s.a[:], &s.node
	} else {
		b := new(bigNode[T])
		b.items, n = b.a[:], &b.node
	}
	n.owner = owner
	if inner {
		n.kids = make([]*node[T], len(n.items))
	}
	return n
}

func (n *node[T]) leaf() bool { return n.kids == nil }

// capacity is n's entries at most; least is the fewest it holds off the
// tree's rightmost path (a quarter).
func (n *node[T]) capacity() int { return len(n.items) }
func (n *node[T]) least() int    { return len(n.items) / 4 }

// Tree is one immutable version of an ordered set of T.
type Tree[T any] struct {
	root *node[T]
	size int
}

// txnIDs hands out transaction ids: never 0 (Restore's nodes), never reused.
var txnIDs atomic.Uint64

// NewOwner returns a fresh transaction id: the owner of the nodes one
// transaction copies (several Txns of one FSM entry may share it).
func NewOwner() uint64 { return txnIDs.Add(1) }

// Len is the number of items.
func (t Tree[T]) Len() int { return t.size }

// Shape is the capacity of the tree's nodes (NodeCap or SmallCap), 0 for
// an empty tree.
func (t Tree[T]) Shape() int {
	if t.root == nil {
		return 0
	}
	return t.root.capacity()
}

// ---- reading ---------------------------------------------------------------------

// Ascend calls fn for the items from the first one with from(item) >= 0 (all
// items when from is nil), in order, until fn returns false. from compares an
// item with the lower bound: negative when the item sorts before it.
func (t Tree[T]) Ascend(from func(T) int, fn func(T) bool) {
	if t.root != nil {
		ascendNode(t.root, from, fn)
	}
}

func ascendNode[T any](n *node[T], from func(T) int, fn func(T) bool) bool {
	if n.leaf() {
		i := 0
		if from != nil {
			i = searchNode(n, from)
		}
		for ; i < n.n; i++ {
			if !fn(n.items[i]) {
				return false
			}
		}
		return true
	}
	i := 0
	if from != nil {
		i = kidFor(n, from)
	}
	if !ascendNode(n.kids[i], from, fn) {
		return false
	}
	for i++; i < n.n; i++ {
		if !ascendNode(n.kids[i], nil, fn) {
			return false
		}
	}
	return true
}

// Descend calls fn for the items before the upper bound (every item when
// below is nil), last first, until fn returns false. below compares an item
// with the bound: negative when the item sorts before it, so the item equal
// to the bound is left out.
func (t Tree[T]) Descend(below func(T) int, fn func(T) bool) {
	if t.root != nil {
		descendNode(t.root, below, fn)
	}
}

func descendNode[T any](n *node[T], below func(T) int, fn func(T) bool) bool {
	i := n.n
	if below != nil {
		i = searchNode(n, below) // entries [0, i) sort before the bound
	}
	if n.leaf() {
		for i--; i >= 0; i-- {
			if !fn(n.items[i]) {
				return false
			}
		}
		return true
	}
	// An inner entry is its kid's first item: kid i-1 is the last whose
	// subtree starts before the bound, and the only one that may reach it.
	if i--; i < 0 {
		return true
	}
	if !descendNode(n.kids[i], below, fn) {
		return false
	}
	for i--; i >= 0; i-- {
		if !descendNode(n.kids[i], nil, fn) {
			return false
		}
	}
	return true
}

// Get returns the item with to(item) == 0.
func (t Tree[T]) Get(to func(T) int) (T, bool) {
	var zero T
	n := t.root
	if n == nil {
		return zero, false
	}
	for !n.leaf() {
		n = n.kids[kidFor(n, to)]
	}
	if i := searchNode(n, to); i < n.n && to(n.items[i]) == 0 {
		return n.items[i], true
	}
	return zero, false
}

// searchNode is the first entry with to(entry) >= 0, or n.n.
func searchNode[T any](n *node[T], to func(T) int) int {
	lo, hi := 0, n.n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if to(n.items[m]) < 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// kidFor is the child of an inner node whose range holds the target: the
// last kid whose first item is <= the target, or the first kid.
func kidFor[T any](n *node[T], to func(T) int) int {
	lo, hi := 0, n.n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if to(n.items[m]) <= 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return max(lo-1, 0)
}

// ---- building ------------------------------------------------------------------

// Build builds a tree of 1 KiB nodes over items, which must ascend
// strictly, with every node full except the last one or two of each level
// (which share their entries evenly when the last would be under a quarter).
func Build[T any](items []T) Tree[T] { return build(items, NodeCap) }

// BuildSmall is Build for a tree of small nodes (SmallCap entries).
func BuildSmall[T any](items []T) Tree[T] { return build(items, SmallCap) }

func build[T any](items []T, c int) Tree[T] {
	if len(items) == 0 {
		return Tree[T]{}
	}
	level := make([]*node[T], 0, (len(items)+c-1)/c)
	for _, size := range chunks(len(items), c) {
		n := newNode[T](c, 0, false)
		n.n = size
		copy(n.items, items[:size])
		items = items[size:]
		level = append(level, n)
	}
	total := 0
	for _, n := range level {
		total += n.n
	}
	for len(level) > 1 {
		up := make([]*node[T], 0, (len(level)+c-1)/c)
		for _, size := range chunks(len(level), c) {
			n := newNode[T](c, 0, true)
			n.n = size
			for i, k := range level[:size] {
				n.kids[i], n.items[i] = k, k.items[0]
			}
			level = level[size:]
			up = append(up, n)
		}
		level = up
	}
	return Tree[T]{root: level[0], size: total}
}

// chunks splits n entries into nodes of c, the last two sharing evenly when
// the remainder would be under a quarter of c.
func chunks(n, c int) []int {
	out := make([]int, 0, (n+c-1)/c)
	for ; n > c; n -= c {
		out = append(out, c)
	}
	out = append(out, n)
	if k := len(out); k > 1 && n < c/4 {
		both := c + n
		out[k-2], out[k-1] = both-both/2, both/2
	}
	return out
}

// ---- writing -------------------------------------------------------------------

// Txn changes a tree: it starts from a published version and yields a new
// one (tree) without touching the old. One transaction's owner id may be
// shared by several ordTxns (the indexes of one FSM entry).
type Txn[T any] struct {
	Tree[T]
	owner uint64
	cmp   func(a, b T) int
	cap   int // the capacity of an empty tree's first node
}

// Txn starts a transaction on t; an empty tree gets 1 KiB nodes.
func (t Tree[T]) Txn(owner uint64, cmp func(a, b T) int) Txn[T] {
	return Txn[T]{Tree: t, owner: owner, cmp: cmp, cap: NodeCap}
}

// SmallTxn is Txn for a tree of small nodes: an empty tree gets nodes of
// SmallCap entries (a tree that has nodes keeps their shape).
func (t Tree[T]) SmallTxn(owner uint64, cmp func(a, b T) int) Txn[T] {
	return Txn[T]{Tree: t, owner: owner, cmp: cmp, cap: SmallCap}
}

func (x *Txn[T]) Version() Tree[T] { return x.Tree }

// To is the bound of item under the transaction's order (for Get, Ascend
// and Descend): negative for an entry before item, 0 for its equal.
func (x *Txn[T]) To(item T) func(T) int {
	return func(e T) int { return x.cmp(e, item) }
}

// mutable returns n itself if this transaction made it, else a copy it owns.
func (x *Txn[T]) mutable(n *node[T]) *node[T] {
	if n.owner == x.owner {
		return n
	}
	c := newNode[T](n.capacity(), x.owner, n.kids != nil)
	c.n = n.n
	copy(c.items, n.items[:n.n])
	if n.kids != nil {
		copy(c.kids, n.kids[:n.n])
	}
	return c
}

// Set inserts item, or replaces the item equal to it (returning that one).
func (x *Txn[T]) Set(item T) (old T, replaced bool) { return x.set(item, nil) }

// Upsert puts merge(old, found) in the place of probe: in place of the item
// equal to probe (found), else inserted. merge must return an item equal to
// probe under the transaction's order. It is a Get and a Set in one descent
// (a counter's increment, say).
func (x *Txn[T]) Upsert(probe T, merge func(old T, found bool) T) { x.set(probe, merge) }

// set is Set of item, or with merge non-nil Upsert of probe item.
func (x *Txn[T]) set(item T, merge func(old T, found bool) T) (old T, replaced bool) {
	if x.root == nil {
		if merge != nil {
			item = merge(old, false)
		}
		x.root = newNode[T](x.cap, x.owner, false)
		x.root.n, x.root.items[0] = 1, item
		x.size = 1
		return old, false
	}
	x.root = x.mutable(x.root)
	right, old, replaced := x.setIn(x.root, true, item, x.To(item), merge)
	if right != nil {
		root := newNode[T](x.root.capacity(), x.owner, true)
		root.n = 2
		root.kids[0], root.kids[1] = x.root, right
		root.items[0], root.items[1] = x.root.items[0], right.items[0]
		x.root = root
	}
	if !replaced {
		x.size++
	}
	return old, replaced
}

// setIn puts item (or merge's, see set) into the subtree of n (already
// mutable; last says n is on the tree's rightmost path). A full node splits;
// the new right sibling is returned for the parent to adopt.
func (x *Txn[T]) setIn(n *node[T], last bool, item T, to func(T) int, merge func(T, bool) T) (right *node[T], old T, replaced bool) {
	if n.leaf() {
		i := searchNode(n, to)
		found := i < n.n && to(n.items[i]) == 0
		if found {
			old = n.items[i]
		}
		if merge != nil {
			item = merge(old, found)
		}
		if found {
			n.items[i] = item
			return nil, old, true
		}
		return x.insertAt(n, last, i, item, nil), old, false
	}
	i := kidFor(n, to)
	k := x.mutable(n.kids[i])
	n.kids[i] = k
	r, old, replaced := x.setIn(k, last && i == n.n-1, item, to, merge)
	n.items[i] = k.items[0]
	if r == nil {
		return nil, old, replaced
	}
	return x.insertAt(n, last, i+1, r.items[0], r), old, replaced
}

// insertAt puts an entry (an item, and for an inner node the kid it leads
// to) at position i of n, splitting n when it is full.
//
// Where a full node splits decides how full the index stays. An entry past
// the end of the tree's last node starts a new last node on its own, so
// appends (new job ids, new update times) leave full nodes behind. Elsewhere
// n splits at the insertion point, clamped to leave both halves at least
// n.least(): repeated inserts at one spot (the end of one catalog's jobs) then
// leave nodes three quarters full or more, and descending runs do too.
func (x *Txn[T]) insertAt(n *node[T], last bool, i int, item T, kid *node[T]) (right *node[T]) {
	c := n.capacity()
	if n.n < c {
		copy(n.items[i+1:n.n+1], n.items[i:n.n])
		n.items[i] = item
		if kid != nil {
			copy(n.kids[i+1:n.n+1], n.kids[i:n.n])
			n.kids[i] = kid
		}
		n.n++
		return nil
	}
	right = newNode[T](c, x.owner, kid != nil)
	if last && i == c {
		right.n, right.items[0] = 1, item
		if kid != nil {
			right.kids[0] = kid
		}
		return right
	}
	at := min(max(i, n.least()), c-n.least())
	moveTail(n, right, at)
	if i <= at {
		x.insertAt(n, false, i, item, kid)
	} else {
		x.insertAt(right, false, i-at, item, kid)
	}
	return right
}

// moveTail moves n's entries from `from` on to the empty node dst.
func moveTail[T any](n, dst *node[T], from int) {
	dst.n = copy(dst.items, n.items[from:n.n])
	if n.kids != nil {
		copy(dst.kids, n.kids[from:n.n])
	}
	truncate(n, from)
}

// truncate keeps n's first k entries. Vacated slots are cleared: a stale
// reference would keep a removed record alive.
func truncate[T any](n *node[T], k int) {
	clear(n.items[k:n.n])
	if n.kids != nil {
		clear(n.kids[k:n.n])
	}
	n.n = k
}

// dropHead removes n's first k entries.
func dropHead[T any](n *node[T], k int) {
	copy(n.items, n.items[k:n.n])
	if n.kids != nil {
		copy(n.kids, n.kids[k:n.n])
	}
	truncate(n, n.n-k)
}

// Delete removes the item equal to item and returns it.
func (x *Txn[T]) Delete(item T) (old T, found bool) {
	to := x.To(item)
	if old, found = x.Get(to); !found {
		return old, false // nothing copied for a miss
	}
	x.root = x.mutable(x.root)
	x.deleteIn(x.root, true, to)
	for x.root.n == 1 && !x.root.leaf() {
		x.root = x.root.kids[0]
	}
	if x.root.n == 0 {
		x.root = nil
	}
	x.size--
	return old, true
}

// deleteIn removes the item to finds (present) from the subtree of n
// (already mutable; last: on the rightmost path, where appends go). A kid
// left under its least is rebalanced, unless it is the non-empty last node
// that appends are filling.
func (x *Txn[T]) deleteIn(n *node[T], last bool, to func(T) int) {
	if n.leaf() {
		i := searchNode(n, to)
		removeAt(n, i)
		return
	}
	i := kidFor(n, to)
	k := x.mutable(n.kids[i])
	n.kids[i] = k
	kLast := last && i == n.n-1
	x.deleteIn(k, kLast, to)
	if k.n > 0 {
		n.items[i] = k.items[0]
	}
	if k.n < k.least() && !(kLast && k.n > 0) {
		x.rebalance(n, i)
	}
}

func removeAt[T any](n *node[T], i int) {
	copy(n.items[i:], n.items[i+1:n.n])
	if n.kids != nil {
		copy(n.kids[i:], n.kids[i+1:n.n])
	}
	truncate(n, n.n-1)
}

// rebalance fixes kid i of n, which fell under its least: it merges it with a
// sibling when both fit in one node, else shares their entries evenly.
func (x *Txn[T]) rebalance(n *node[T], i int) {
	if n.n < 2 {
		return // the root's only kid: delete collapses the root
	}
	l := max(i-1, 0)
	a, b := x.mutable(n.kids[l]), x.mutable(n.kids[l+1])
	n.kids[l], n.kids[l+1] = a, b
	if a.n+b.n <= a.capacity() {
		copy(a.items[a.n:], b.items[:b.n])
		if a.kids != nil {
			copy(a.kids[a.n:], b.kids[:b.n])
		}
		a.n += b.n
		removeAt(n, l+1)
		if a.n == 0 {
			removeAt(n, l)
		} else {
			n.items[l] = a.items[0]
		}
		return
	}
	want := (a.n + b.n) / 2
	if k := a.n - want; k > 0 {
		// a's tail moves to b's front.
		copy(b.items[k:b.n+k], b.items[:b.n])
		copy(b.items[:k], a.items[want:a.n])
		if b.kids != nil {
			copy(b.kids[k:b.n+k], b.kids[:b.n])
			copy(b.kids[:k], a.kids[want:a.n])
		}
		b.n += k
		truncate(a, want)
	} else {
		// b's head moves to a's end.
		k = -k
		copy(a.items[a.n:], b.items[:k])
		if a.kids != nil {
			copy(a.kids[a.n:], b.kids[:k])
		}
		a.n += k
		dropHead(b, k)
	}
	n.items[l], n.items[l+1] = a.items[0], b.items[0]
}
