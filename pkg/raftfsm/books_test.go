package raftfsm

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/lancemaster/lancemaster/pkg/raftfsm/ordtree"

	"github.com/lancemaster/lancemaster/pkg/job"
)

// The persistent books against the plain ones, by random changes over few
// keys (so that one fence key holds hundreds of jobs, across many tree
// nodes, next to other keys), over many transactions, with every published
// version checked again after later transactions (copy-on-write).
func TestBookTreeMatchesPlainBooks(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	keys := []job.FenceKey{
		{CatalogID: 1, Provider: "DIRECTORY", Locator: "/d/a.lance", NormalizedIndexName: "idx"},
		{CatalogID: 1, Provider: "DIRECTORY", Locator: "/d/a.lance", NormalizedIndexName: "idx2"},
		{CatalogID: 1, Provider: "DIRECTORY", Locator: "/d/b.lance", NormalizedIndexName: "idx"},
		{CatalogID: 2, Provider: "DIRECTORY", Locator: "/d/a.lance", NormalizedIndexName: "idx"},
		// The dataset's OPTIMIZE key, and a key of another provider on the
		// same table (a table's count spans providers, a dataset does not).
		{CatalogID: 1, Provider: "DIRECTORY", Locator: "/d/a.lance", NormalizedIndexName: job.OptimizeFenceName},
		{CatalogID: 1, Provider: "S3", Locator: "/d/a.lance", NormalizedIndexName: "idx"},
	}
	type version struct {
		tree *bookTree
		want Books
	}
	var versions []version
	tree, plain := newBookTree(), newBooks()
	held := map[job.FenceKey][]int64{}
	nextID := int64(1)
	for range 800 {
		x := tree.txn()
		for range 1 + rng.IntN(20) {
			switch k := keys[rng.IntN(len(keys))]; rng.IntN(5) {
			case 0, 1, 2:
				x.fence(k, nextID, 1)
				plain.fence(k, nextID, 1)
				held[k] = append(held[k], nextID)
				nextID++
			case 3:
				if ids := held[k]; len(ids) > 0 {
					i := rng.IntN(len(ids))
					x.fence(k, ids[i], -1)
					plain.fence(k, ids[i], -1)
					held[k] = slices.Delete(ids, i, i+1)
				}
			case 4:
				id, d := int64(1+rng.IntN(3)), 1-2*rng.IntN(2)
				x.catalog(id, d)
				plain.catalog(id, d)
				x.slot(id, -d)
				plain.slot(id, -d)
			}
			// Reads inside the transaction see its own changes.
			if got, want := x.view().fenceHolders(keys[0]), plain.Fence[keys[0]]; !slices.Equal(got, want) {
				t.Fatalf("in the transaction: holders %v, want %v", got, want)
			}
		}
		tree = x.commit()
		versions = append(versions, version{tree, clonePlain(plain)})
	}
	if len(held[keys[0]]) < 2*ordtree.NodeCap {
		t.Fatalf("only %d jobs on one key: the walk never crossed nodes", len(held[keys[0]]))
	}
	for i, v := range versions {
		if got := v.tree.view().plain(); !reflect.DeepEqual(got, v.want) {
			t.Fatalf("version %d changed after later transactions", i)
		}
		for _, k := range keys {
			if got := v.tree.view().fenceHolders(k); !slices.Equal(got, v.want.Fence[k]) {
				t.Fatalf("version %d: holders of %v = %v, want %v", i, k, got, v.want.Fence[k])
			}
		}
		for _, k := range keys {
			if got, want := v.tree.view().tableHolds(k), holdsOf(v.want, k); got != want {
				t.Fatalf("version %d: holds of %v = %+v, want %+v", i, k, got, want)
			}
		}
		for id := int64(1); id <= 3; id++ {
			if v.tree.view().catalogCount(id) != v.want.PerCatalog[id] || v.tree.view().slotCount(id) != v.want.Slots[id] {
				t.Fatalf("version %d: counts of %d differ", i, id)
			}
		}
	}
}

// holdsOf is tableHolds computed from the plain books.
func holdsOf(b Books, k job.FenceKey) holds {
	h := holds{table: b.PerTable[k.Table()]}
	least := func(ids []int64) int64 {
		if len(ids) == 0 {
			return 0
		}
		return ids[0]
	}
	for key, ids := range b.Fence {
		if key.CatalogID == k.CatalogID && key.Provider == k.Provider && key.Locator == k.Locator {
			if l := least(ids); h.dataset == 0 || l < h.dataset {
				h.dataset = l
			}
		}
	}
	h.own = least(b.Fence[k])
	opt := k
	opt.NormalizedIndexName = job.OptimizeFenceName
	h.optimize = least(b.Fence[opt])
	return h
}

func clonePlain(b *Books) Books {
	c := *newBooks()
	for k, ids := range b.Fence {
		c.Fence[k] = slices.Clone(ids)
	}
	for k, n := range b.PerTable {
		c.PerTable[k] = n
	}
	for k, n := range b.PerCatalog {
		c.PerCatalog[k] = n
	}
	for k, n := range b.Slots {
		c.Slots[k] = n
	}
	c.Global, c.Corrupt = b.Global, b.Corrupt
	return c
}
