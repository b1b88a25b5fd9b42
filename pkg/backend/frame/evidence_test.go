package frame

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/lancemaster/lancemaster/gen-go/wire"
)

const (
	u1 = "82bd4ae1-fb5d-4df3-9105-bbc59c9b221a"
	u2 = "0aea10f2-75e1-4bbf-916e-0f03f3802a97"
)

func TestParseProgressLine(t *testing.T) {
	// Lines as Lance 8 (LanceLogEnv) and the builder print them.
	lance := `[2026-12-01T19:58:40Z DEBUG lance::index::vector] build_vector_index; column="vector" name="vec2" uuid=` + u1 +
		` params=VectorIndexParams { stages: [Ivf(IvfBuildParams { num_partitions: Some(2), target_partition_size: None, max_iters: 50 }`
	cases := []struct {
		line        string
		uuid, phase string
		ok          bool
	}{
		{lance, u1, "building", true},
		{lance + "\n", u1, "building", true},
		{`lancemaster-progress {"index_uuid":"` + u2 + `"}` + "\n", u2, "", true},
		{`lancemaster-progress {"phase":"verifying"}`, "", "verifying", true},
		{`lancemaster-progress {"index_uuid":"` + u2 + `","phase":"building"}`, u2, "building", true},
		{`[2026-12-01T19:58:40Z INFO  lance::index::vector::ivf] Start to train IVF model`, "", "ivf_training", true},
		{`[2026-12-01T19:58:40Z INFO  lance::index::vector::builder] Start to train quantizer`, "", "quantizer_training", true},
		{`[2026-12-01T19:58:40Z INFO  lance::index::vector::builder] shuffle column vector over dataset`, "", "shuffling", true},
		{`[2026-12-01T19:58:40Z INFO  lance::index::vector::builder] merging 2 partitions`, "", "merging", true},
		{`[2026-12-01T19:58:40Z INFO  lance::index::vector::builder] merging 2 partitions done`, "", "", false},
		{`[2026-12-01T22:28:21Z INFO  lance::file_audit] mode="create" type="manifest" path="dummy"`, "", "committing", true},
		{`[2026-12-01T22:28:21Z INFO  lance::file_audit] mode="create" type="data" path="x type=\"manifest\""`, "", "", false},
		{`[2026-12-01T22:28:21Z INFO  other::file_audit] mode="create" type="manifest" path="dummy"`, "", "", false},
		{`[2026-12-01T19:58:40Z INFO  lance::index::vector::utils] Sample training data: scanning all 2000 rows`, "", "", false},

		// Refused: malformed, foreign, forged.
		{`lancemaster-progress {"index_uuid":"not-a-uuid"}`, "", "", false},
		{`lancemaster-progress {"index_uuid":"` + strings.ToUpper(u2) + `"}`, u2, "", true},
		{`[t DEBUG lance::index::vector] build_vector_index; column="v" name="n" uuid=` + strings.ToUpper(u1), u1, "building", true},
		{`lancemaster-progress {"index_uuid":"{` + u2 + `}"}`, "", "", false},
		{`lancemaster-progress {"index_uuid":"` + u2 + `","phase":""}`, "", "", false},
		{`lancemaster-progress {"phase":"` + strings.Repeat("p", 65) + `"}`, "", "", false},
		{`lancemaster-progress {"phase":"a\nb"}`, "", "", false},
		{`lancemaster-progress {}`, "", "", false},
		{`lancemaster-progress not json`, "", "", false},
		{`builder: build: CREATE BTREE done in 12 ms`, "", "", false},
		{`  lancemaster-progress {"phase":"x"}` + "\r\n", "", "x", true},
		{`xlancemaster-progress {"phase":"x"}`, "", "", false},
		{`[2026-12-01T19:58:40Z DEBUG other::crate] build_vector_index; column="v" name="n" uuid=` + u1, "", "", false},
		{`[2026-12-01T19:58:40Z DEBUG lance::index::vector::ivf] build_vector_index; column="v" name="n" uuid=` + u1, "", "", false},
		{`build_vector_index; column="v" name="n" uuid=` + u1, "", "", false},
		// An index name that tries to forge a uuid field: Lance's Debug formatting escapes the
		// quote (this line is Lance 8's, for an index named `x" uuid=<u2> q`).
		{`[2026-12-01T20:08:33Z DEBUG lance::index::vector] build_vector_index; column="vector" name="x\" uuid=` + u2 +
			` q" uuid=d2324ae8-ece2-47a1-af9f-7853a60a94d3 params=VectorIndexParams { stages: [Ivf(IvfBuildParams {`,
			"d2324ae8-ece2-47a1-af9f-7853a60a94d3", "building", true},
		{`[t DEBUG lance::index::vector] build_vector_index; column="v" name="x\" uuid=` + u2 + `" uuid=` + u1 + ` params=P`, u1, "building", true},
		{`[t DEBUG lance::index::vector] build_vector_index; column="v" name="x" uuid=` + u2 + ` uuid=` + u1, "", "", false},
		{`[t DEBUG lance::index::vector] build_vector_index; column="v" name="unterminated uuid=` + u1, "", "", false},
		{`[t DEBUG lance::index::vector] build_vector_index; column="v" name="n" params=P uuid=` + u1, "", "", false},
		{`[t DEBUG lance::index::vector] build_vector_index; column="v" name="n" uuid=` + u1[:35], "", "", false},
	}
	for _, c := range cases {
		uuid, phase, ok := ParseProgressLine(c.line)
		if uuid != c.uuid || phase != c.phase || ok != c.ok {
			t.Errorf("%q: got (%q, %q, %v), want (%q, %q, %v)", c.line, uuid, phase, ok, c.uuid, c.phase, c.ok)
		}
	}
}

func TestLanceLogEnv(t *testing.T) {
	if LanceLogEnv != "error,lance::index::vector=debug,lance::file_audit=info" {
		t.Fatalf("LanceLogEnv = %q; builder.js's lanceAnnouncesVectorUuid matches this value", LanceLogEnv)
	}
}

func i64(v int64) *int64 { return &v }

func TestApplyIndexStats(t *testing.T) {
	seg := int32(1)
	stats := []IndexStats{
		{Name: "a", IndexUUID: u1, CreatedAtMs: i64(1796155459804), IndexedRows: i64(2000), UnindexedRows: i64(0), Segments: &seg, SizeBytes: i64(7272)},
		{Name: "b", IndexUUID: "bogus", IndexedRows: i64(-1)},
	}
	indexes := []*wire.TLanceIndexInfo{{Name: "a"}, {Name: "b"}, nil, {Name: "A"}}
	ApplyIndexStats(indexes, stats)
	a := indexes[0]
	if a.GetIndexUUID() != u1 || a.GetCreatedAtMs() != 1796155459804 || a.GetIndexedRows() != 2000 || a.UnindexedRows == nil ||
		a.GetUnindexedRows() != 0 || a.GetSegments() != 1 || a.GetSizeBytes() != 7272 {
		t.Fatalf("a: %+v", a)
	}
	if b := indexes[1]; b.IndexUUID != nil || b.IndexedRows != nil || b.CreatedAtMs != nil || b.Segments != nil {
		t.Fatalf("b: %+v", b)
	}
	if indexes[3].IndexUUID != nil {
		t.Fatal("stats matched by a case-insensitive name")
	}
	stats[0].IndexedRows = i64(5) // nothing is shared
	if a.GetIndexedRows() != 2000 {
		t.Fatal("the answer shares the stats' memory")
	}
}

func TestApplyVerifiedCommit(t *testing.T) {
	rep := &wire.TLanceIndexJobReport{}
	ApplyVerifiedCommit(rep, &Result{Mode: ModeBuild, ResultCode: "NATIVE_OK", IndexUUID: u1, DatasetVersion: 5, NewDatasetVersion: 5})
	if rep.GetIndexUUID() != u1 || rep.GetDatasetVersion() != 5 {
		t.Fatalf("%+v", rep)
	}
	for _, r := range []*Result{
		{Mode: ModeBuild, ResultCode: "NATIVE_INTERNAL", IndexUUID: u1, DatasetVersion: 5},
		{Mode: ModeInspect, ResultCode: "NATIVE_OK", IndexUUID: u1, DatasetVersion: 5},
		{Mode: ModeBuild, ResultCode: "NATIVE_OK", IndexUUID: "x", DatasetVersion: -1},
		nil,
	} {
		rep := &wire.TLanceIndexJobReport{}
		ApplyVerifiedCommit(rep, r)
		if rep.IndexUUID != nil || rep.DatasetVersion != nil {
			t.Fatalf("%+v gave %+v", r, rep)
		}
	}
	ApplyVerifiedCommit(nil, &Result{}) // no panic
	// A DROP's NATIVE_OK: the version, no uuid.
	rep = &wire.TLanceIndexJobReport{}
	ApplyVerifiedCommit(rep, &Result{Mode: ModeBuild, ResultCode: "NATIVE_OK", DatasetVersion: 6})
	if rep.IndexUUID != nil || rep.GetDatasetVersion() != 6 {
		t.Fatalf("%+v", rep)
	}
}

// The JSON the builder writes (builders/lancedb/test/resolve.test.js) decodes
// into Result as documented.
func TestResultDecodesTheBuilderFrames(t *testing.T) {
	for _, c := range []struct {
		json  string
		check func(r Result) bool
	}{
		{`{"protocol":1,"mode":"build","result_code":"NATIVE_OK","message":"m","new_dataset_version":2,"dataset_version":2,"index_uuid":"` + u1 + `"}`,
			func(r Result) bool { return r.IndexUUID == u1 && r.DatasetVersion == 2 }},
		{`{"protocol":1,"mode":"resolve","ok":true,"outcome":"COMMITTED","head_version":4,"evidence":"e","index_uuid":"` + u1 + `"}`,
			func(r Result) bool {
				return r.OK && r.Outcome == OutcomeCommitted && r.HeadVersion == 4 && r.Evidence == "e" && r.IndexUUID == u1
			}},
		{`{"protocol":1,"mode":"inspect","ok":true,"dataset_version":2,"fields":[],"indexes":[{"name":"id","index_type":"BTREE","columns":["id"],"properties_json":""}],` +
			`"index_stats":[{"name":"id","index_uuid":"` + u1 + `","created_at_ms":17,"indexed_rows":2000,"unindexed_rows":0,"segments":1,"size_bytes":7272}]}`,
			func(r Result) bool {
				s := r.IndexStats
				return len(s) == 1 && s[0].UnindexedRows != nil && *s[0].UnindexedRows == 0 && *s[0].Segments == 1 && len(r.Indexes) == 1
			}},
	} {
		var buf bytes.Buffer
		var raw json.RawMessage = []byte(c.json)
		if err := Write(&buf, raw, MaxResultBytes); err != nil {
			t.Fatal(err)
		}
		var r Result
		if err := Read(&buf, &r, MaxResultBytes); err != nil || !c.check(r) {
			t.Fatalf("%s: %+v %v", c.json, r, err)
		}
	}
}

// An OPTIMIZE's per-index before/after reaches the report only from a
// NATIVE_OK build, within its bounds: malformed uuids and negative counts
// are left out, not passed on.
func TestApplyOptimized(t *testing.T) {
	n := func(v int64) *int64 { return &v }
	seg := int32(1)
	good := "0f8e2a4c-1b3d-4e5f-8a9b-0c1d2e3f4a5b"
	r := &Result{Mode: ModeBuild, ResultCode: "NATIVE_OK", OptimizedIndexes: []OptimizedIndex{
		{Name: "vec", Before: &IndexCounts{IndexUUID: good, IndexedRows: n(2000), UnindexedRows: n(6000), Segments: &seg},
			After: &IndexCounts{IndexUUID: "not-a-uuid", IndexedRows: n(8000), UnindexedRows: n(-1)}},
		{Name: ""},
	}}
	rep := &wire.TLanceIndexJobReport{}
	ApplyOptimized(rep, r)
	if len(rep.OptimizedIndexes) != 1 {
		t.Fatalf("relayed %d indexes", len(rep.OptimizedIndexes))
	}
	ix := rep.OptimizedIndexes[0]
	if ix.Name != "vec" || ix.Before.GetIndexUUID() != good || ix.Before.GetUnindexedRows() != 6000 || ix.Before.GetSegments() != 1 ||
		ix.After.IsSetIndexUUID() || ix.After.GetIndexedRows() != 8000 || ix.After.IsSetUnindexedRows() {
		t.Fatalf("relayed %+v before %+v after %+v", ix, ix.Before, ix.After)
	}
	for _, code := range []string{"NATIVE_INDEX", "NATIVE_COMMIT_CONFLICT"} {
		rep := &wire.TLanceIndexJobReport{}
		ApplyOptimized(rep, &Result{Mode: ModeBuild, ResultCode: code, OptimizedIndexes: r.OptimizedIndexes})
		if rep.OptimizedIndexes != nil {
			t.Errorf("%s relayed indexes", code)
		}
	}
}
