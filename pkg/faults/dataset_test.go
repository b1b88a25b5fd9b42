package faults

import (
	"fmt"
	"hash/fnv"
	"sync"
)

// datasets is the harness's model of the Lance datasets the builds write:
// per dataset URI, consecutive versions from the admitted one (3), each
// build that commits adds one version listing its index name with the uuid
// its invocation built. Nothing prunes versions, so a resolve can always
// read the whole window. Safe for concurrent use.
type datasets struct {
	mu sync.Mutex
	m  map[string]*dataset
}

type dataset struct {
	head    int64
	indexes map[string]string // index name → uuid
}

// admittedVersion is the version every inspect of a fresh dataset answers.
const admittedVersion = 3

func (d *datasets) get(uri string) *dataset {
	if d.m == nil {
		d.m = map[string]*dataset{}
	}
	ds, ok := d.m[uri]
	if !ok {
		ds = &dataset{head: admittedVersion, indexes: map[string]string{}}
		d.m[uri] = ds
	}
	return ds
}

func (d *datasets) headOf(uri string) int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.get(uri).head
}

// commit adds a version listing name with uuid and returns it.
func (d *datasets) commit(uri, name, uuid string) int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	ds := d.get(uri)
	ds.head++
	ds.indexes[name] = uuid
	return ds.head
}

// resolve answers what §13.4 lets a reader prove for a CREATE of name by
// the invocation that built uuid ("" when the worker never announced it):
// COMMITTED when a version lists name with uuid; NOT_COMMITTED when no
// version lists name; UNKNOWN when one does but the uuid cannot be bound.
func (d *datasets) resolve(uri, name, uuid string) (outcome, evidence string, head int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	ds := d.get(uri)
	got, ok := ds.indexes[name]
	switch {
	case ok && uuid != "" && got == uuid:
		return "COMMITTED", fmt.Sprintf("versions %d..%d: %s with this invocation's uuid", admittedVersion+1, ds.head, name), ds.head
	case !ok:
		return "NOT_COMMITTED", fmt.Sprintf("versions %d..%d are contiguous and none lists %s", admittedVersion+1, ds.head, name), ds.head
	}
	return "UNKNOWN", fmt.Sprintf("versions %d..%d list %s but this invocation's uuid is not known", admittedVersion+1, ds.head, name), ds.head
}

// uuidOf is the index uuid an invocation's build creates (lowercase
// canonical, as Lance writes it).
func uuidOf(invocationID string) string {
	h := fnv.New128a()
	h.Write([]byte(invocationID))
	b := h.Sum(nil)
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
