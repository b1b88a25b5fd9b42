package ordtree

import (
	"cmp"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

// The persistent B+tree against a sorted slice: random inserts, replacements
// (Set and Upsert) and deletes over many transactions, every published
// version checked afterwards (old versions must not change), plus the
// structural invariants.

type ordItem struct {
	k int64
	v int // tells a replacement from the item it replaced
}

func cmpOrdItem(a, b *ordItem) int { return cmp.Compare(a.k, b.k) }

func ordModelSet(m []*ordItem, it *ordItem) ([]*ordItem, bool) {
	i, found := slices.BinarySearchFunc(m, it, cmpOrdItem)
	if found {
		m[i] = it
		return m, true
	}
	return slices.Insert(m, i, it), false
}

func ordModelDelete(m []*ordItem, k int64) ([]*ordItem, bool) {
	i, found := slices.BinarySearchFunc(m, &ordItem{k: k}, cmpOrdItem)
	if !found {
		return m, false
	}
	return slices.Delete(m, i, i+1), true
}

// checkOrdTree verifies t holds exactly want (same pointers, in order) and
// the invariants of ordered.go.
func checkOrdTree(t *testing.T, tr Tree[*ordItem], want []*ordItem) {
	t.Helper()
	var got []*ordItem
	tr.Ascend(nil, func(it *ordItem) bool { got = append(got, it); return true })
	if !slices.Equal(got, want) || tr.size != len(want) {
		t.Fatalf("tree holds %d items (size %d), want %d; equal %t", len(got), tr.size, len(want), slices.Equal(got, want))
	}
	if tr.root == nil {
		return
	}
	var walk func(n *node[*ordItem], last bool, depth int) int
	leafDepth := -1
	shape := tr.root.capacity()
	walk = func(n *node[*ordItem], last bool, depth int) int {
		if c := n.capacity(); c != shape || (c != NodeCap && c != SmallCap) || (n.kids != nil && len(n.kids) != c) {
			t.Fatalf("a node of capacity %d (kids %d) in a tree of %d", c, len(n.kids), shape)
		}
		if !last && n.n < n.least() {
			t.Fatalf("a non-root node holds %d entries (min %d)", n.n, n.least())
		}
		if n.n == 0 || n.n > n.capacity() {
			t.Fatalf("node with %d entries", n.n)
		}
		for i := n.n; i < n.capacity(); i++ {
			if n.items[i] != nil || (n.kids != nil && n.kids[i] != nil) {
				t.Fatalf("stale entry past the end of a node")
			}
		}
		if n.leaf() {
			if leafDepth == -1 {
				leafDepth = depth
			} else if leafDepth != depth {
				t.Fatalf("leaves at depths %d and %d", leafDepth, depth)
			}
			return n.n
		}
		total := 0
		for i := 0; i < n.n; i++ {
			if n.items[i] != n.kids[i].items[0] {
				t.Fatalf("separator %d is not its kid's first item", i)
			}
			total += walk(n.kids[i], last && i == n.n-1, depth+1)
		}
		return total
	}
	if walk(tr.root, true, 0) != len(want) {
		t.Fatalf("node counts disagree")
	}
	// Lower bounds and point lookups.
	for _, k := range []int64{-1, 0, 1, 500, 999, 5000, 1 << 40} {
		from := func(it *ordItem) int { return cmp.Compare(it.k, k) }
		i, found := slices.BinarySearchFunc(want, &ordItem{k: k}, cmpOrdItem)
		var first *ordItem
		tr.Ascend(from, func(it *ordItem) bool { first = it; return false })
		if i < len(want) && first != want[i] || i == len(want) && first != nil {
			t.Fatalf("ascend from %d starts at %v", k, first)
		}
		g, ok := tr.Get(from)
		if ok != found || found && g != want[i] {
			t.Fatalf("get %d = %v %t", k, g, ok)
		}
		checkDescend(t, tr, want, k, 7)
	}
	checkDescend(t, tr, want, 1<<62, -1)
}

// checkDescend verifies that descend below k (1<<62: no bound) yields
// want's items under k, last first, and stops after stopAfter of them
// (-1: never).
func checkDescend(t *testing.T, tr Tree[*ordItem], want []*ordItem, k int64, stopAfter int) {
	t.Helper()
	var below func(*ordItem) int
	if k != 1<<62 {
		below = func(it *ordItem) int { return cmp.Compare(it.k, k) }
	}
	i, _ := slices.BinarySearchFunc(want, &ordItem{k: k}, cmpOrdItem) // want[:i] sort before k
	from := 0
	if stopAfter >= 0 {
		from = max(i-stopAfter, 0) // only the last stopAfter of them are walked
	}
	exp := slices.Clone(want[from:i])
	slices.Reverse(exp)
	got := []*ordItem{}
	calls := 0
	tr.Descend(below, func(it *ordItem) bool {
		calls++
		if stopAfter >= 0 && len(got) == stopAfter {
			return false
		}
		got = append(got, it)
		return true
	})
	if calls > len(got)+1 {
		t.Fatalf("descend below %d went on %d calls after fn returned false", k, calls-len(got)-1)
	}
	if !slices.Equal(got, exp) && !(len(got) == 0 && len(exp) == 0) {
		t.Fatalf("descend below %d (stop after %d): %d items, want %d", k, stopAfter, len(got), len(exp))
	}
}

// TestOrdTreeDescend walks a three-level tree made by splits (appends,
// then inserts into full nodes) backwards from every node boundary, the
// keys around it and keys outside the range, stopping early or not.
func TestOrdTreeDescend(t *testing.T) {
	var tr Tree[*ordItem]
	byKey := map[int64]*ordItem{} // the model, sorted once at the end
	x := tr.Txn(NewOwner(), cmpOrdItem)
	for k := int64(0); k < 40_000; k += 2 { // appends: new last nodes
		it := &ordItem{k: k}
		x.Set(it)
		byKey[k] = it
	}
	rng := rand.New(rand.NewPCG(5, 5))
	for range 20_000 { // odd keys inside full nodes: splits in the middle
		it := &ordItem{k: 2*rng.Int64N(20_000) + 1}
		x.Set(it)
		byKey[it.k] = it
	}
	model := slices.SortedFunc(maps.Values(byKey), cmpOrdItem)
	tr = x.Version()
	if tr.root.leaf() || tr.root.kids[0].leaf() {
		t.Fatalf("the tree is not three levels deep")
	}
	checkOrdTree(t, tr, model)
	// Every leaf's first key is a separator somewhere above: a bound equal
	// to it, one below and one above must each start in the right leaf.
	var bounds []int64
	var leaves func(n *node[*ordItem])
	leaves = func(n *node[*ordItem]) {
		if n.leaf() {
			bounds = append(bounds, n.items[0].k-1, n.items[0].k, n.items[0].k+1, n.items[n.n-1].k, n.items[n.n-1].k+1)
			return
		}
		for _, k := range n.kids[:n.n] {
			leaves(k)
		}
	}
	leaves(tr.root)
	bounds = append(bounds, -5, 0, 1, 39_998, 39_999, 40_000, 1<<40)
	for i, k := range bounds {
		for _, stop := range []int{-1, 0, 1, NodeCap - 1, NodeCap + 3} {
			if stop == -1 && i%10 != 0 {
				continue // full walks of a sample of bounds keep it fast
			}
			checkDescend(t, tr, model, k, stop)
		}
	}
	checkDescend(t, tr, model, 1<<62, NodeCap*NodeCap+1) // early stop deep in the tree
	var empty Tree[*ordItem]
	checkDescend(t, empty, nil, 1<<62, -1)
	checkDescend(t, empty, nil, 3, -1)
}

// txnOf starts a transaction of the shape under test.
func txnOf(tr Tree[*ordItem], small bool) Txn[*ordItem] {
	if small {
		return tr.SmallTxn(NewOwner(), cmpOrdItem)
	}
	return tr.Txn(NewOwner(), cmpOrdItem)
}

func TestOrdTreeAgainstModel(t *testing.T) {
	for _, small := range []bool{false, true} {
		t.Run(map[bool]string{false: "1 KiB nodes", true: "small nodes"}[small], func(t *testing.T) { ordTreeAgainstModel(t, small) })
	}
}

func ordTreeAgainstModel(t *testing.T, small bool) {
	for _, seed := range []uint64{1, 2, 3, 4} {
		rng := rand.New(rand.NewPCG(seed, 99))
		keys := int64(200 + rng.IntN(5000))
		var tr Tree[*ordItem]
		var model []*ordItem
		type version struct {
			tr    Tree[*ordItem]
			model []*ordItem
		}
		var versions []version
		for round := 0; round < 120; round++ {
			// Now and then a transaction of the other shape: a tree that
			// has nodes keeps their shape (checkOrdTree: one shape).
			x := txnOf(tr, small != (round%7 == 3))
			model = slices.Clone(model) // saved versions keep theirs
			ops := 1 + rng.IntN(400)
			mode := rng.IntN(4) // 0 random, 1 appends, 2 deletes from the front, 3 mixed
			next := int64(0)
			if len(model) > 0 {
				next = model[len(model)-1].k + 1
			}
			for i := 0; i < ops; i++ {
				switch {
				case mode == 1 || mode == 3 && rng.IntN(3) == 0:
					it := &ordItem{k: next, v: round}
					next++
					x.Set(it)
					model, _ = ordModelSet(model, it)
				case mode == 2 && len(model) > 0:
					k := model[0].k
					if _, ok := x.Delete(&ordItem{k: k}); !ok {
						t.Fatalf("delete of the first item missed")
					}
					model, _ = ordModelDelete(model, k)
				case rng.IntN(2) == 0:
					it := &ordItem{k: rng.Int64N(keys), v: round*1000 + i}
					var replaced bool
					if rng.IntN(2) == 0 {
						_, replaced = x.Set(it)
					} else {
						// Upsert: merge sees the item it replaces (the
						// model's), or none, and what it returns goes in.
						var had *ordItem
						if j, ok := slices.BinarySearchFunc(model, it, cmpOrdItem); ok {
							had = model[j]
						}
						x.Upsert(&ordItem{k: it.k}, func(old *ordItem, found bool) *ordItem {
							if found != (had != nil) || old != had {
								t.Fatalf("upsert of %d: merge got %v (found %t), want %v", it.k, old, found, had)
							}
							replaced = found
							return it
						})
					}
					var want bool
					model, want = ordModelSet(model, it)
					if replaced != want {
						t.Fatalf("set replaced = %t, want %t", replaced, want)
					}
				default:
					k := rng.Int64N(keys)
					_, ok := x.Delete(&ordItem{k: k})
					var want bool
					model, want = ordModelDelete(model, k)
					if ok != want {
						t.Fatalf("delete found = %t, want %t", ok, want)
					}
				}
			}
			tr = x.Version()
			checkOrdTree(t, tr, model)
			versions = append(versions, version{tr, model})
			if rng.IntN(10) == 0 {
				// Rebuild the way Restore does, in the tree's shape, then
				// keep writing on it.
				if small {
					tr = BuildSmall(model)
				} else {
					tr = Build(model)
				}
				checkOrdTree(t, tr, model)
			}
		}
		for _, v := range versions {
			checkOrdTree(t, v.tr, v.model)
		}
	}
}

func TestOrdTreeBuild(t *testing.T) {
	for _, shape := range []struct {
		c     int
		build func([]*ordItem) Tree[*ordItem]
	}{{NodeCap, Build[*ordItem]}, {SmallCap, BuildSmall[*ordItem]}} {
		c, least := shape.c, shape.c/4
		for _, n := range []int{0, 1, 2, least - 1, least, c - 1, c, c + 1, c + least,
			2 * c, c*c + 1, c*c + least - 1, 100_000} {
			items := make([]*ordItem, n)
			for i := range items {
				items[i] = &ordItem{k: int64(i) * 2}
			}
			tr := shape.build(items)
			checkOrdTree(t, tr, items)
			if tr.root != nil && tr.root.capacity() != c {
				t.Fatalf("built with nodes of %d entries, want %d", tr.root.capacity(), c)
			}
			// Deleting everything, front to back, keeps the invariants.
			if n <= 2*c+1 {
				x := tr.Txn(NewOwner(), cmpOrdItem)
				for i := range items {
					x.Delete(items[i])
					if i%17 == 0 {
						checkOrdTree(t, x.Version(), items[i+1:])
					}
				}
				checkOrdTree(t, x.Version(), nil)
			}
			checkOrdTree(t, tr, items)
		}
	}
}

// TestOrdTreeAppendsFillNodes: ascending inserts (new job ids, new update
// times) leave full nodes, one transaction or many.
func TestOrdTreeAppendsFillNodes(t *testing.T) {
	const n = 100_000
	var tr Tree[*ordItem]
	for i := 0; i < n; {
		x := tr.Txn(NewOwner(), cmpOrdItem)
		for j := 0; j < 7 && i < n; j, i = j+1, i+1 {
			x.Set(&ordItem{k: int64(i)})
		}
		tr = x.Version()
	}
	leaves := 0
	var count func(n *node[*ordItem])
	count = func(n *node[*ordItem]) {
		if n.leaf() {
			leaves++
			return
		}
		for _, k := range n.kids[:n.n] {
			count(k)
		}
	}
	count(tr.root)
	if want := (n + NodeCap - 1) / NodeCap; leaves != want {
		t.Fatalf("%d leaves for %d appended items, want %d", leaves, n, want)
	}
}

// TestOrdTreeDeep drives a three-level tree through inner-node splits,
// merges and redistributions, then empties it.
func TestOrdTreeDeep(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	const keys = 60_000
	perm := rng.Perm(keys)
	var tr Tree[*ordItem]
	var model []*ordItem
	var versions []Tree[*ordItem]
	var models [][]*ordItem
	apply := func(ops []func(x *Txn[*ordItem])) {
		x := tr.Txn(NewOwner(), cmpOrdItem)
		for _, op := range ops {
			op(&x)
		}
		tr = x.Version()
	}
	// Fill in random order, in transactions of 2,000.
	for lo := 0; lo < keys; lo += 2000 {
		model = slices.Clone(model)
		var ops []func(x *Txn[*ordItem])
		for _, k := range perm[lo : lo+2000] {
			it := &ordItem{k: int64(k)}
			ops = append(ops, func(x *Txn[*ordItem]) { x.Set(it) })
			model, _ = ordModelSet(model, it)
		}
		apply(ops)
		checkOrdTree(t, tr, model)
		versions, models = append(versions, tr), append(models, model)
	}
	if tr.root.leaf() || tr.root.kids[0].leaf() {
		t.Fatalf("the tree is not three levels deep")
	}
	// Delete in another random order: ranges first (they empty whole inner
	// nodes), then the rest.
	order := append([]int{}, perm...)
	slices.Sort(order[:keys/2])
	for lo := 0; lo < keys; lo += 3000 {
		model = slices.Clone(model)
		var ops []func(x *Txn[*ordItem])
		for _, k := range order[lo : lo+3000] {
			ops = append(ops, func(x *Txn[*ordItem]) {
				if _, ok := x.Delete(&ordItem{k: int64(k)}); !ok {
					t.Fatalf("delete %d missed", k)
				}
			})
			model, _ = ordModelDelete(model, int64(k))
		}
		apply(ops)
		checkOrdTree(t, tr, model)
		versions, models = append(versions, tr), append(models, model)
	}
	if tr.root != nil || tr.size != 0 {
		t.Fatalf("an emptied tree keeps %d items", tr.size)
	}
	for i, v := range versions {
		checkOrdTree(t, v, models[i])
	}
}

// TestOrdTreeDescendingRuns: inserts that keep landing just after one full
// node (a descending run) must not leave a node per item.
func TestOrdTreeDescendingRuns(t *testing.T) {
	items := make([]*ordItem, NodeCap)
	for i := range items {
		items[i] = &ordItem{k: int64(i)}
	}
	tr := Build(items)
	x := tr.Txn(NewOwner(), cmpOrdItem)
	x.Set(&ordItem{k: 1 << 30}) // a new last node
	for k := int64(1<<30 - 1); k > 1<<30-5000; k-- {
		x.Set(&ordItem{k: k})
	}
	nodes := 0
	var count func(n *node[*ordItem])
	count = func(n *node[*ordItem]) {
		nodes++
		if !n.leaf() {
			for _, k := range n.kids[:n.n] {
				count(k)
			}
		}
	}
	count(x.root)
	if per := float64(x.size) / float64(nodes); per < NodeCap/2 {
		t.Fatalf("%.1f items per node after descending runs", per)
	}
}
