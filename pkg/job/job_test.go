package job

import (
	"strings"
	"testing"
)

func TestNormalizeLocator(t *testing.T) {
	ok := []struct{ in, want string }{
		{"/data/x", "/data/x"},
		{"  /data/x/  ", "/data/x"},
		{"/data/x///", "/data/x"},
		{"/", "/"},
		{"S3://Bucket/Path/", "s3://Bucket/Path"},
		{"s3://bucket", "s3://bucket"},
		{"s3://bucket/", "s3://bucket"},
		{"FILE:///data/t.lance/", "file:///data/t.lance"},
		{"file:///", "file:///"},
		{"gs://b/p", "gs://b/p"},
	}
	for _, c := range ok {
		got, err := NormalizeLocator(c.in)
		if err != nil || got != c.want {
			t.Errorf("NormalizeLocator(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	bad := []string{"", "   ", "relative/path", "s3://", "s3://user:secret@bucket/p", "s3://key@bucket", "file://", "/data/\x00x", strings.Repeat("/a", MaxURIBytes)}
	for _, in := range bad {
		got, err := NormalizeLocator(in)
		if err == nil {
			t.Errorf("NormalizeLocator(%q) = %q; want an error", in, got)
			continue
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("error echoes the URI: %v", err)
		}
		if e, ok := err.(*Error); !ok || e.Code != CodeInvalid {
			t.Errorf("NormalizeLocator(%q) error %v is not INVALID", in, err)
		}
	}
}

func TestDatasetLocatorAndLocal(t *testing.T) {
	got, err := DatasetLocator("/data/lake/", "db1", "items")
	if err != nil || got != "/data/lake/db1/items.lance" {
		t.Fatalf("DatasetLocator = %q, %v", got, err)
	}
	if !IsLocalLocator(got) || !IsLocalLocator("file:///x") || IsLocalLocator("s3://b/x") {
		t.Fatal("IsLocalLocator misclassifies")
	}
	got, err = DatasetLocator("s3://B/root", "d", "t")
	if err != nil || got != "s3://B/root/d/t.lance" {
		t.Fatalf("DatasetLocator(s3) = %q, %v", got, err)
	}
}

func TestValidateNames(t *testing.T) {
	if err := ValidateIndexName("vec_idx"); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"", " x", "__lance_x", "__LANCE_y", "a\nb", strings.Repeat("x", MaxNameBytes+1), "bad\xff"} {
		if ValidateIndexName(n) == nil {
			t.Errorf("ValidateIndexName(%q) accepted", n)
		}
	}
	for _, n := range []string{"a/b", "..", ".", `a\b`, ""} {
		if ValidatePathName("db", n) == nil {
			t.Errorf("ValidatePathName(%q) accepted", n)
		}
	}
	if NormalizeIndexName("Vec_IDX") != "vec_idx" {
		t.Fatal("NormalizeIndexName")
	}
}

func TestCanonicalProperties(t *testing.T) {
	lim := Limits{MaxNumPartitions: 4096, MaxNumSubVectors: 256}
	got, err := CanonicalProperties(IndexIVFPQ, []Property{{"NUM_PARTITIONS", "64"}, {"Metric", "COSINE"}, {"num_sub_vectors", "16"}, {"num_bits", "8"}}, lim)
	want := `{"metric":"cosine","num_bits":8,"num_partitions":64,"num_sub_vectors":16}`
	if err != nil || got != want {
		t.Fatalf("got %s, %v; want %s", got, err, want)
	}
	if got, err := CanonicalProperties(IndexBTree, nil, lim); err != nil || got != "{}" {
		t.Fatalf("BTREE: %s %v", got, err)
	}
	bad := []struct {
		typ   string
		props []Property
	}{
		{IndexBTree, []Property{{"metric", "l2"}}},
		{IndexBitmap, []Property{{"x", "1"}}},
		{IndexIVFPQ, []Property{{"metric", "hamming"}}},
		{IndexIVFPQ, []Property{{"num_partitions", "0"}}},
		{IndexIVFPQ, []Property{{"num_partitions", "4097"}}},
		{IndexIVFPQ, []Property{{"num_sub_vectors", "257"}}},
		{IndexIVFPQ, []Property{{"num_bits", "7"}}},
		{IndexIVFPQ, []Property{{"num_partitions", "x"}}},
		{IndexIVFPQ, []Property{{"unknown", "1"}}},
		{IndexIVFPQ, []Property{{"metric", "l2"}, {"METRIC", "dot"}}},
		{"HNSW", nil},
	}
	for _, c := range bad {
		if _, err := CanonicalProperties(c.typ, c.props, lim); err == nil {
			t.Errorf("%s %v accepted", c.typ, c.props)
		}
	}
	if _, err := CanonicalProperties(IndexIVFPQ, []Property{{"num_partitions", "100"}}, Limits{MaxNumPartitions: 50, MaxNumSubVectors: 8}); err == nil {
		t.Error("lowered max_num_partitions not enforced")
	}
}

func TestNormalizeIndexType(t *testing.T) {
	if v, err := NormalizeIndexType(" ivf_pq "); err != nil || v != IndexIVFPQ {
		t.Fatal(v, err)
	}
	if _, err := NormalizeIndexType("hnsw"); err == nil {
		t.Fatal("accepted hnsw")
	}
}

func TestClassify(t *testing.T) {
	cases := []struct {
		code ResultCode
		ema  bool
		mt   MutationType
		ifEx bool
		want Classification
	}{
		{PreInvocationStaleAdmission, false, Create, false, Classification{NotCommitted, RefreshNotRequired, ReasonNone}},
		{PreInvocationUnsupportedSchemaContract, true, Create, false, Classification{NotCommitted, RefreshRequired, ReasonNone}},
		{PreInvocationCredentialExpired, false, Replace, false, Classification{NotCommitted, RefreshNotRequired, ReasonNone}},
		{PreInvocationResourceRejected, true, Drop, false, Classification{NotCommitted, RefreshRequired, ReasonNone}},
		{NativeOK, false, Create, false, Classification{Committed, RefreshRequired, ReasonNone}},
		{NativeCommitConflict, false, Create, false, Classification{NotCommitted, RefreshRequired, ReasonNone}},
		{NativeNotFound, false, Drop, false, Classification{NotCommitted, RefreshRequired, ReasonNone}},
		{NativeNotFound, false, Drop, true, Classification{NotCommitted, RefreshRequired, ReasonIfConditionNoop}},
		{NativeNotFound, false, Create, false, Classification{Unknown, RefreshNotRequired, ReasonNone}},
		{NativeNotFound, false, Replace, false, Classification{Unknown, RefreshNotRequired, ReasonNone}},
		{NativeInvalidArgument, true, Create, false, Classification{Unknown, RefreshNotRequired, ReasonNone}},
		{NativeNotSupported, false, Create, false, Classification{Unknown, RefreshNotRequired, ReasonNone}},
		{NativeIndex, false, Create, false, Classification{Unknown, RefreshNotRequired, ReasonNone}},
		{NativeIO, false, Create, false, Classification{Unknown, RefreshNotRequired, ReasonNone}},
		{NativeInternal, false, Create, false, Classification{Unknown, RefreshNotRequired, ReasonNone}},
		{NoTrustedResult, false, Create, false, Classification{Unknown, RefreshNotRequired, ReasonNone}},
		{ResultCode(42), false, Create, false, Classification{Unknown, RefreshNotRequired, ReasonNone}},
	}
	for _, c := range cases {
		if got := Classify(c.code, c.ema, c.mt, c.ifEx); got != c.want {
			t.Errorf("Classify(%s, ema=%v, %s, ifExists=%v) = %+v; want %+v", c.code, c.ema, c.mt, c.ifEx, got, c.want)
		}
	}
}

func TestPredicates(t *testing.T) {
	base := Record{JobID: 1, CatalogID: 1, Provider: ProviderDirectory, Locator: "/d/t.lance", NormalizedIndexName: "i", TerminationProof: ProofNone}
	cases := []struct {
		name       string
		mod        func(r *Record)
		unresolved bool
		slot       bool
	}{
		{"pending", func(r *Record) { r.MutationState = Pending }, true, false},
		{"running with slot", func(r *Record) { r.MutationState = Running; r.PossibleLiveOwned = true }, true, true},
		{"unknown", func(r *Record) { r.MutationState = Unknown; r.PossibleLiveOwned = true }, true, true},
		{"unknown force-released", func(r *Record) { r.MutationState = Unknown; r.PossibleLiveOwned = true; r.ForceReleased = true }, false, false},
		{"committed refresh required", func(r *Record) { r.MutationState = Committed; r.RefreshState = RefreshRequired }, true, false},
		{"committed refresh running", func(r *Record) { r.MutationState = Committed; r.RefreshState = RefreshRunning }, true, false},
		{"committed refresh failed", func(r *Record) { r.MutationState = Committed; r.RefreshState = RefreshFailed }, true, false},
		{"committed refresh done, slot held", func(r *Record) {
			r.MutationState = Committed
			r.RefreshState = RefreshDone
			r.PossibleLiveOwned = true
		}, false, true},
		{"not committed not required, proof", func(r *Record) {
			r.MutationState = NotCommitted
			r.RefreshState = RefreshNotRequired
			r.PossibleLiveOwned = true
			r.TerminationProof = ProofChildReaped
		}, false, false},
		{"cancelled", func(r *Record) { r.MutationState = Cancelled }, false, false},
		{"missing state reads unknown", func(r *Record) { r.MutationState = 0 }, true, false},
		{"missing refresh reads required", func(r *Record) { r.MutationState = Committed; r.RefreshState = 0 }, true, false},
		{"missing proof reads none", func(r *Record) {
			r.MutationState = Running
			r.PossibleLiveOwned = true
			r.TerminationProof = 0
		}, true, true},
	}
	for _, c := range cases {
		r := base
		c.mod(&r)
		if r.Unresolved() != c.unresolved || r.HoldsPossibleLiveSlot() != c.slot {
			t.Errorf("%s: unresolved=%v slot=%v; want %v %v", c.name, r.Unresolved(), r.HoldsPossibleLiveSlot(), c.unresolved, c.slot)
		}
	}
	bad := base
	bad.CatalogID = 0
	if bad.HasFenceIdentity() || !base.HasFenceIdentity() {
		t.Fatal("HasFenceIdentity")
	}
}

func TestSchemaContract(t *testing.T) {
	snap := &Snapshot{Version: 3, Fields: []Field{
		{ID: 0, Name: "id", Type: "int32"},
		{ID: 1, Name: "vector", Type: "fixed_size_list", ListDimension: 128, ElementType: "float32", Nullable: true},
		{ID: 2, Name: "Text", Type: "utf8", Nullable: true},
		{ID: 3, Name: "ints", Type: "fixed_size_list", ListDimension: 4, ElementType: "int32"},
		{ID: 4, Name: "dup", Type: "int32"}, {ID: 5, Name: "DUP", Type: "int32"},
	}, Indexes: []IndexInfo{{Name: "A_idx"}, {Name: "a_IDX"}, {Name: "solo", IndexType: "BTREE", Columns: []string{"id"}}}}
	f, err := snap.FindColumn("vector")
	if err != nil {
		t.Fatal(err)
	}
	c, err := SchemaContract(f, IndexIVFPQ)
	want := `{"v":1,"fields":[{"id":1,"name":"vector","type":"fixed_size_list","nullable":true,"dim":128,"elem":"float32"}]}`
	if err != nil || c != want {
		t.Fatalf("contract %s %v", c, err)
	}
	if f, err := snap.FindColumn("text"); err != nil || f.ID != 2 {
		t.Fatal("case-insensitive column lookup", err)
	}
	if _, err := snap.FindColumn("Dup"); err == nil {
		t.Fatal("ambiguous column accepted")
	}
	if _, err := snap.FindColumn("nope"); err == nil {
		t.Fatal("missing column accepted")
	}
	ints, _ := snap.FindColumn("ints")
	if _, err := SchemaContract(ints, IndexIVFPQ); err == nil {
		t.Fatal("int vector accepted for IVF_PQ")
	}
	id, _ := snap.FindColumn("id")
	if _, err := SchemaContract(id, IndexIVFPQ); err == nil {
		t.Fatal("scalar accepted for IVF_PQ")
	}
	if _, err := SchemaContract(f, IndexBTree); err == nil {
		t.Fatal("vector accepted for BTREE")
	}
	if _, err := snap.FindIndex("a_idx"); err == nil || err.(*Error).Code != CodeAmbiguous {
		t.Fatalf("case-only ambiguity not detected: %v", err)
	}
	if ix, err := snap.FindIndex("SOLO"); err != nil || ix == nil || ix.Name != "solo" {
		t.Fatal("FindIndex case-insensitive", err)
	}
	if ix, err := snap.FindIndex("none"); err != nil || ix != nil {
		t.Fatal("FindIndex missing")
	}
}

func TestBounds(t *testing.T) {
	if CheckBytes("x", strings.Repeat("a", 10), 10) != nil || CheckBytes("x", strings.Repeat("a", 11), 10) == nil {
		t.Fatal("CheckBytes")
	}
	long := strings.Repeat("é", MaxMessageBytes)
	tr := TruncateMessage(long)
	if len(tr) > MaxMessageBytes || CheckBytes("m", tr, MaxMessageBytes) != nil {
		t.Fatal("TruncateMessage broke a rune or the bound")
	}
}

func TestRedactLog(t *testing.T) {
	opts := map[string]string{"aws_secret_access_key": "SECRET-abcdef", "region": "us", "token": "SECRET-abc"}
	got := RedactLog("key aws_secret_access_key=SECRET-abcdef token=SECRET-abc region=us\xff", opts, 0)
	if got != "key [redacted]=[redacted] [redacted]=[redacted] [redacted]=us?" { // keys too, as the backend; "us" is too short
		t.Fatalf("%q", got)
	}
	if got := RedactLog("ééé"+"SECRET-abc", opts, 12); got != "é"+Redacted {
		t.Fatalf("bounded: %q", got)
	}
}
