// Package jobwire converts a dataset snapshot (job.Snapshot, what admission
// works from) to and from the backend wire's inspect answer
// (wire.TInspectDatasetResponse, whose TLanceField and TLanceIndexInfo the
// admin API shows as they are). It is the one place that knows which of the
// wire's optional fields a snapshot sets.
package jobwire

import (
	"slices"

	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/job"
)

// InspectResponse is the OK answer to an inspect of a dataset whose snapshot
// is snap. Fields and Indexes are never nil; a field's list_dimension is set
// only when non-zero, its element_type and element_nullable only with an
// element type, an index's properties_json only when non-empty. Nothing of
// snap is shared with the answer.
func InspectResponse(snap *job.Snapshot) *wire.TInspectDatasetResponse {
	version := snap.Version
	resp := &wire.TInspectDatasetResponse{Status: &wire.TStatus{StatusCode: wire.TStatusCode_OK}, DatasetVersion: &version,
		Fields: make([]*wire.TLanceField, 0, len(snap.Fields)), Indexes: make([]*wire.TLanceIndexInfo, 0, len(snap.Indexes))}
	for _, f := range snap.Fields {
		wf := &wire.TLanceField{FieldID: f.ID, Name: f.Name, DataType: f.Type, Nullable: f.Nullable}
		if f.ListDimension != 0 {
			d := f.ListDimension
			wf.ListDimension = &d
		}
		if f.ElementType != "" {
			et, en := f.ElementType, f.ElementNullable
			wf.ElementType, wf.ElementNullable = &et, &en
		}
		resp.Fields = append(resp.Fields, wf)
	}
	for _, ix := range snap.Indexes {
		wi := &wire.TLanceIndexInfo{Name: ix.Name, IndexType: ix.IndexType, Columns: append([]string{}, ix.Columns...)}
		if ix.PropertiesJSON != "" {
			p := ix.PropertiesJSON
			wi.PropertiesJSON = &p
		}
		if ix.UUID != "" {
			u := ix.UUID
			wi.IndexUUID = &u
		}
		resp.Indexes = append(resp.Indexes, wi)
	}
	return resp
}

// Snapshot converts an inspect answer's dataset version, fields and indexes;
// an unset optional field converts to its zero value, and nil entries are
// skipped. It does not look at the status: the caller checks that the
// answer is OK and carries a version first. Nothing of r is shared with the
// snapshot.
func Snapshot(r *wire.TInspectDatasetResponse) *job.Snapshot {
	snap := &job.Snapshot{Version: r.GetDatasetVersion()}
	for _, f := range r.GetFields() {
		if f == nil {
			continue
		}
		snap.Fields = append(snap.Fields, job.Field{
			ID: f.FieldID, Name: f.Name, Type: f.DataType, Nullable: f.Nullable,
			ListDimension: f.GetListDimension(), ElementType: f.GetElementType(), ElementNullable: f.GetElementNullable(),
		})
	}
	for _, ix := range r.GetIndexes() {
		if ix == nil {
			continue
		}
		snap.Indexes = append(snap.Indexes, job.IndexInfo{
			Name: ix.Name, IndexType: ix.IndexType, Columns: slices.Clone(ix.Columns), PropertiesJSON: ix.GetPropertiesJSON(),
			UUID: ix.GetIndexUUID()})
	}
	return snap
}
