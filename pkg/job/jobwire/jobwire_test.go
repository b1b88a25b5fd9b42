package jobwire

import (
	"reflect"
	"testing"

	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/job"
)

func testSnapshot() *job.Snapshot {
	return &job.Snapshot{
		Version: 7,
		Fields: []job.Field{
			{ID: 0, Name: "id", Type: "int32"},
			{ID: 1, Name: "vector", Type: "fixed_size_list", ListDimension: 8, ElementType: "float32", ElementNullable: true},
			{ID: 2, Name: "text", Type: "utf8", Nullable: true},
			{ID: 3, Name: "tags", Type: "list", ElementType: "utf8", ElementNullable: true},
		},
		Indexes: []job.IndexInfo{
			{Name: "id_idx", IndexType: "BTREE", Columns: []string{"id"}},
			{Name: "vec_idx", IndexType: "IVF_PQ", Columns: []string{"vector"}, PropertiesJSON: `{"metric":"l2"}`},
		},
	}
}

func TestInspectResponseSetsOnlyWhatTheSnapshotHas(t *testing.T) {
	snap := testSnapshot()
	r := InspectResponse(snap)
	if r.GetStatus().GetStatusCode() != wire.TStatusCode_OK || !r.IsSetDatasetVersion() || r.GetDatasetVersion() != 7 {
		t.Fatalf("status %v, version %v", r.GetStatus(), r.DatasetVersion)
	}
	id, vec := r.Fields[0], r.Fields[1]
	if id.IsSetListDimension() || id.IsSetElementType() || id.IsSetElementNullable() {
		t.Errorf("a scalar field carries list attributes: %v", id)
	}
	if vec.GetListDimension() != 8 || vec.GetElementType() != "float32" || !vec.GetElementNullable() {
		t.Errorf("vector field: %v", vec)
	}
	// A list's element travels like a vector's (LABEL_LIST is checked against it).
	if tags := r.Fields[3]; tags.IsSetListDimension() || tags.GetElementType() != "utf8" || !tags.GetElementNullable() {
		t.Errorf("list field: %v", tags)
	}
	if r.Indexes[0].IsSetPropertiesJSON() || r.Indexes[1].GetPropertiesJSON() != `{"metric":"l2"}` {
		t.Errorf("indexes: %v", r.Indexes)
	}
	// Nothing is shared.
	r.Indexes[0].Columns[0] = "changed"
	if snap.Indexes[0].Columns[0] != "id" {
		t.Error("the answer shares the snapshot's columns")
	}

	empty := InspectResponse(&job.Snapshot{})
	if empty.Fields == nil || empty.Indexes == nil {
		t.Error("an empty snapshot answers nil fields or indexes (required on the wire)")
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	want := testSnapshot()
	r := InspectResponse(want)
	r.Fields = append(r.Fields, nil)
	r.Indexes = append([]*wire.TLanceIndexInfo{nil}, r.Indexes...)
	got := Snapshot(r)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, want)
	}
	r.Indexes[1].Columns[0] = "changed"
	if got.Indexes[0].Columns[0] != "id" {
		t.Error("the snapshot shares the answer's columns")
	}
	if s := Snapshot(&wire.TInspectDatasetResponse{}); s.Version != 0 || s.Fields != nil || s.Indexes != nil {
		t.Errorf("an empty answer: %+v", s)
	}
}
