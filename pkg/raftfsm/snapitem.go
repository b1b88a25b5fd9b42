package raftfsm

import (
	"fmt"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/raftfsm/jobcodec"
)

// A snapshot item's direct decoder (Restore): job records, by far the most
// items, go to jobcodec's decoder; the rare catalogs, backends and audit
// events go to the generated code. The differential tests
// (snapitem_test.go) hold it to the generated code.

// snapshotItem is one decoded TSnapshotItem.
type snapshotItem struct {
	job     *job.Record
	catalog *Catalog
	backend *Backend
	audit   *AuditEvent
	last    bool
}

// decodeSnapshotItem decodes one frame. The result does not reference b.
// Catalogs and backends are rare: their byte range goes to the generated code.
func decodeSnapshotItem(b []byte, in *jobcodec.Interner) (snapshotItem, error) {
	r := jobcodec.NewReader(b)
	var it snapshotItem
	var last int16
	var err error
	// sub is the byte range of the struct value at r, skipped.
	sub := func() ([]byte, bool) {
		start := r.Pos()
		r.Skip(jobcodec.TypeStruct)
		return b[start:r.Pos()], r.Err() == nil
	}
	for r.Err() == nil && err == nil {
		typ, id := r.Field(&last)
		if typ == jobcodec.TypeStop {
			break
		}
		switch {
		case id == 1 && typ == jobcodec.TypeStruct:
			if v, ok := sub(); ok {
				it.catalog, err = decodeCatalogBytes(v)
			}
		case id == 2 && typ == jobcodec.TypeStruct:
			if v, ok := sub(); ok {
				it.backend, err = decodeBackendBytes(v)
			}
		case id == 3 && typ == jobcodec.TypeStruct:
			it.job = r.JobRecord(in)
		case id == 5 && typ == jobcodec.TypeStruct:
			if v, ok := sub(); ok {
				it.audit, err = decodeAuditEventBytes(v)
			}
		case id == 4 && (typ == jobcodec.TypeTrue || typ == jobcodec.TypeFalse):
			it.last = typ == jobcodec.TypeTrue
		default:
			r.Skip(typ)
		}
	}
	if r.Err() != nil {
		return snapshotItem{}, r.Err()
	}
	if err != nil {
		return snapshotItem{}, fmt.Errorf("%w: %v", jobcodec.ErrMalformed, err)
	}
	return it, nil
}

// decodeCatalogBytes and decodeBackendBytes decode a struct's byte range
// with the generated code (a compact struct is self-delimiting).
func decodeCatalogBytes(b []byte) (*Catalog, error) {
	t := journal.NewTCatalogRecord()
	if err := decodeCompact(b, t); err != nil {
		return nil, err
	}
	return CatalogFromThrift(t), nil
}

func decodeBackendBytes(b []byte) (*Backend, error) {
	t := journal.NewTBackendRecord()
	if err := decodeCompact(b, t); err != nil {
		return nil, err
	}
	return BackendFromThrift(t), nil
}
