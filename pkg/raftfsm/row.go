package raftfsm

import (
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/raftfsm/jobcodec"
)

// row is one job in the tables. A live job (unresolved, or holding a
// possible-live slot: what the leader services and Apply work on) keeps its
// whole record, which readers share. A retained job (packable: resolved,
// slot-free and in none of the leader services' indexes, nearly every job
// of a large journal) keeps the packed form of jobcodec.Packed, a third of
// the record's size, and a read unpacks a private copy of it. Which form a row takes follows from the record alone,
// so it is the same on every replica, and both forms read back the same
// record: snapshots, Apply and every reader see no difference.
//
// A row is immutable once in a table.
type row struct {
	live *job.Record // nil: packed
	p    jobcodec.Packed
}

// newRow makes the row of r: packed when r is retained. share shares the
// packed form's definition among jobs (nil: none); scratch is a buffer the
// packing may reuse (nil: none).
func newRow(r *job.Record, share jobcodec.SpecSharer, scratch *[]byte) *row {
	if packable(r) {
		return &row{p: jobcodec.Pack(r, share, scratch)}
	}
	return &row{live: r}
}

// packable: r is in exactly the indexes that hold packed rows (id, catalog
// and GC), so no index reads a packed row's record fields. (A resolved job
// may still be in another: a CANCELLED one whose refresh is RUNNING.)
func packable(r *job.Record) bool {
	for i := range jobIndexes {
		if s := &jobIndexes[i]; s.has(r) != s.packed {
			return false
		}
	}
	return true
}

// probeRow is a row that compares as r's row does, to find it in an index
// (nil for nil).
func probeRow(r *job.Record) *row {
	if r == nil {
		return nil
	}
	return &row{live: r}
}

// record is the row's record: the shared one of a live row, a private copy
// of a packed one.
func (w *row) record() *job.Record {
	if w.live != nil {
		return w.live
	}
	return w.p.Unpack()
}

// recordInto is record for a walk over many rows: a packed row is unpacked
// into scratch, a live row's record is returned as it is.
func (w *row) recordInto(scratch *job.Record) *job.Record {
	if w.live != nil {
		return w.live
	}
	w.p.UnpackInto(scratch)
	return scratch
}

func (w *row) id() int64 {
	if w.live != nil {
		return w.live.JobID
	}
	return w.p.JobID
}

func (w *row) catalogID() int64 {
	if w.live != nil {
		return w.live.CatalogID
	}
	return w.p.CatalogID
}

func (w *row) updateTimeMs() int64 {
	if w.live != nil {
		return w.live.UpdateTimeMs
	}
	return w.p.UpdateTimeMs
}

// facts reads JobFacts without unpacking: the create time from the packed
// rest, the kind from the shared definition; a packed row is resolved.
func (w *row) facts() JobFacts {
	if r := w.live; r != nil {
		return JobFacts{JobID: r.JobID, DB: r.DB, Table: r.Table, MutationType: r.MutationType,
			CreateTimeMs: r.CreateTimeMs, Unresolved: r.Unresolved()}
	}
	p := &w.p
	return JobFacts{JobID: p.JobID, DB: p.DB, Table: p.Table, MutationType: p.Spec().MutationType,
		CreateTimeMs: p.CreateTimeMs()}
}

// jobHead is what a JobFilter reads of a job.
type jobHead struct {
	unresolved   bool
	ms           job.MutationState
	rs           job.RefreshState
	catalogID    int64
	db, table    string
	createTimeMs int64 // only when the filter reads it
	mutationType job.MutationType
	indexType    string
	held         bool // restore hold
}

func headOf(r *job.Record) jobHead {
	return jobHead{unresolved: r.Unresolved(), ms: r.MutationState, rs: r.RefreshState, catalogID: r.CatalogID,
		db: r.DB, table: r.Table, createTimeMs: r.CreateTimeMs, mutationType: r.MutationType, indexType: r.IndexType,
		held: r.RestoreHold}
}

// head is headOf the row's record without unpacking it. It reads only what
// f reads beyond the row's own fields: the create time and the restore hold
// (from the packed rest), the mutation and index types (from the shared
// definition).
func (w *row) head(f *JobFilter) jobHead {
	if w.live != nil {
		return headOf(w.live)
	}
	p := &w.p
	h := jobHead{ms: p.MutationState, rs: p.RefreshState, catalogID: p.CatalogID, db: p.DB, table: p.Table}
	// unresolved: false, a packed row is resolved.
	if f.SinceMs != 0 {
		h.createTimeMs = p.CreateTimeMs()
	}
	if f.MutationType != 0 || f.IndexType != "" {
		h.mutationType, h.indexType = p.Spec().MutationType, p.Spec().IndexType
	}
	if f.Held {
		h.held = p.RestoreHold()
	}
	return h
}
