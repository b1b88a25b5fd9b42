package raftfsm

import (
	"context"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
)

// The restore decoder is held to the generated code: same records from the
// same bytes, unknown fields skipped the same way, no panic on garbage.

func TestJobFieldTypesMatchIDL(t *testing.T) {
	typ := reflect.TypeOf(journal.TJobRecord{})
	seen := map[int]bool{}
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		parts := strings.Split(f.Tag.Get("thrift"), ",")
		id, err := strconv.Atoi(parts[1])
		if err != nil {
			t.Fatalf("%s: tag %q", f.Name, f.Tag)
		}
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		var want byte
		switch {
		case ft.Kind() == reflect.String:
			want = ctBinary
		case ft.Kind() == reflect.Bool:
			want = ctBoolType
		case ft.Kind() == reflect.Struct:
			want = ctStruct
		case ft.Kind() == reflect.Int64 && ft.PkgPath() != "":
			want = ctI32 // a generated enum: i32 on the wire
		case ft.Kind() == reflect.Int64:
			want = ctI64
		case ft.Kind() == reflect.Int32:
			want = ctI32
		case ft.Kind() == reflect.Slice:
			want = ctList
		default:
			t.Fatalf("%s: unexpected type %s", f.Name, ft)
		}
		if id >= len(jobFieldTypes) {
			t.Fatalf("field %d (%s): the decoder does not know it", id, f.Name)
		}
		if jobFieldTypes[id] != want {
			t.Fatalf("field %d (%s): decoder expects %d, IDL has %d", id, f.Name, jobFieldTypes[id], want)
		}
		seen[id] = true
	}
	for id, ty := range jobFieldTypes {
		if ty != 0 && !seen[id] {
			t.Fatalf("decoder knows field %d, the IDL does not", id)
		}
	}
}

func randomRecord(rng *rand.Rand) *job.Record {
	s := func() string {
		if rng.IntN(3) == 0 {
			return ""
		}
		return strings.Repeat(string(rune('a'+rng.IntN(26))), rng.IntN(40)) + "é"
	}
	i := func() int64 {
		switch rng.IntN(4) {
		case 0:
			return 0
		case 1:
			return -rng.Int64()
		}
		return rng.Int64N(1 << uint(1+rng.IntN(62)))
	}
	b := func() bool { return rng.IntN(2) == 0 }
	r := &job.Record{
		JobID: i(), Creator: s(), Rev: i(), CreateTimeMs: i(), UpdateTimeMs: i(), CatalogID: i(),
		DB: s(), Table: s(), Provider: s(), Locator: s(), DisplayIndexName: s(), NormalizedIndexName: s(),
		MutationType: job.MutationType(rng.IntN(5)), IfNotExists: b(), IfExists: b(), IndexType: s(), Column: s(),
		PropertiesJSON: s(), AdmittedDatasetVersion: i(), SchemaContract: s(),
		MutationState: job.MutationState(1 + rng.IntN(6)), RefreshState: job.RefreshState(1 + rng.IntN(5)),
		BackendID: i(), ProcessEpoch: i(), DispatchRevision: i(), InvocationID: s(), InvocationSecret: s(),
		DeadlineMs: i(), LeaderTerm: i(), PossibleLiveOwned: b(), TerminationProof: job.TerminationProof(1 + rng.IntN(5)),
		ForceReleased: b(), ForceActor: s(), ForceTimeMs: i(), ForceNote: s(), ForceWarning: s(),
		RefreshFailureTimeMs: i(), CancelActor: s(),
	}
	if b() {
		r.Result = job.Result{Code: job.ResultCode(rng.IntN(13)), Reason: job.CompletionReason(rng.IntN(3)), Message: s(), ExternalMetadataAdvanced: b()}
	}
	if rng.IntN(4) == 0 {
		r.ResultDatasetVersion = i()
		var ixs []job.OptimizedIndex
		for range rng.IntN(4) {
			ix := job.OptimizedIndex{Name: "ix" + s()}
			if b() {
				ix.Before = &job.IndexCounts{IndexUUID: s(), IndexedRows: rng.Int64N(1 << 40), UnindexedRows: rng.Int64N(100), Segments: rng.Int32N(9)}
			}
			if b() {
				ix.After = &job.IndexCounts{IndexedRows: rng.Int64N(1 << 40)}
			}
			ixs = append(ixs, ix)
		}
		r.OptimizedIndexes, _ = job.EncodeOptimized(ixs)
	}
	if b() {
		r.AdmitIndex = rng.Uint64N(1 << 40)
		var tl []job.Transition
		for range rng.IntN(6) {
			tl = append(tl, job.Transition{Kind: job.TransitionKind(rng.IntN(19)), TimeMs: i(), Index: rng.Uint64N(1 << 40),
				Actor: s(), Detail: s()})
		}
		r.Timeline = job.EncodeTimeline(tl)
	}
	return r
}

// generatedItem decodes a frame with the generated code, as Restore once did.
func generatedItem(b []byte) (snapshotItem, error) {
	t := journal.NewTSnapshotItem()
	if err := decodeCompact(b, t); err != nil {
		return snapshotItem{}, err
	}
	it := snapshotItem{last: t.GetLast()}
	if t.Job != nil {
		it.job = RecordFromThrift(t.Job)
	}
	if t.Catalog != nil {
		it.catalog = CatalogFromThrift(t.Catalog)
	}
	if t.Backend != nil {
		it.backend = BackendFromThrift(t.Backend)
	}
	return it, nil
}

func TestDecodeSnapshotItemMatchesGenerated(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for n := 0; n < 2000; n++ {
		item := &journal.TSnapshotItem{Job: RecordToThrift(randomRecord(rng))}
		switch n % 7 {
		case 1:
			item.Catalog = CatalogToThrift(&Catalog{ID: rng.Int64(), Name: "c", RootURI: "/r", RefreshKind: "none"})
		case 2:
			item = &journal.TSnapshotItem{Backend: BackendToThrift(&Backend{ID: 3, Address: "h:1", AddTimeMs: 9})}
		case 3:
			item.Last = thrift.BoolPtr(rng.IntN(2) == 0)
		}
		data := encodeFrame(t, item)
		want, err := generatedItem(data)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeSnapshotItem(data, newInterner())
		if err != nil {
			t.Fatalf("item %d: %v", n, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("item %d:\n got %+v\nwant %+v", n, got.job, want.job)
		}
	}
}

// TestDecodeSkipsUnknownFields writes a job record as a newer master might:
// extra fields of every type, and a known id with an unexpected type.
func TestDecodeSkipsUnknownFields(t *testing.T) {
	ctx := context.Background()
	buf := thrift.NewTMemoryBuffer()
	p := thrift.NewTCompactProtocolConf(buf, thriftConf)
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	field := func(id int16, typ thrift.TType, write func()) {
		must(p.WriteFieldBegin(ctx, "", typ, id))
		write()
		must(p.WriteFieldEnd(ctx))
	}
	must(p.WriteStructBegin(ctx, "TSnapshotItem"))
	field(9, thrift.DOUBLE, func() { must(p.WriteDouble(ctx, 1.5)) })
	field(3, thrift.STRUCT, func() {
		must(p.WriteStructBegin(ctx, "TJobRecord"))
		field(1, thrift.I64, func() { must(p.WriteI64(ctx, 42)) })
		field(2, thrift.STRING, func() { must(p.WriteString(ctx, "alice")) })
		field(3, thrift.STRING, func() { must(p.WriteString(ctx, "not a rev")) }) // wrong type: skipped
		field(14, thrift.BOOL, func() { must(p.WriteBool(ctx, true)) })
		field(21, thrift.I32, func() { must(p.WriteI32(ctx, int32(job.Running))) })
		field(40, thrift.LIST, func() {
			must(p.WriteListBegin(ctx, thrift.STRING, 20))
			for i := 0; i < 20; i++ {
				must(p.WriteString(ctx, "x"))
			}
			must(p.WriteListEnd(ctx))
		})
		field(41, thrift.MAP, func() {
			must(p.WriteMapBegin(ctx, thrift.STRING, thrift.BOOL, 2))
			must(p.WriteString(ctx, "k"))
			must(p.WriteBool(ctx, true))
			must(p.WriteString(ctx, "l"))
			must(p.WriteBool(ctx, false))
			must(p.WriteMapEnd(ctx))
		})
		field(300, thrift.STRUCT, func() {
			must(p.WriteStructBegin(ctx, "Future"))
			field(1, thrift.BOOL, func() { must(p.WriteBool(ctx, false)) })
			field(2, thrift.SET, func() {
				must(p.WriteSetBegin(ctx, thrift.BOOL, 3))
				for i := 0; i < 3; i++ {
					must(p.WriteBool(ctx, true))
				}
				must(p.WriteSetEnd(ctx))
			})
			field(3, thrift.BYTE, func() { must(p.WriteByte(ctx, 7)) })
			field(4, thrift.I16, func() { must(p.WriteI16(ctx, -3)) })
			must(p.WriteFieldStop(ctx))
			must(p.WriteStructEnd(ctx))
		})
		field(22, thrift.I32, func() { must(p.WriteI32(ctx, int32(job.RefreshDone))) })
		must(p.WriteFieldStop(ctx))
		must(p.WriteStructEnd(ctx))
	})
	field(10, thrift.BOOL, func() { must(p.WriteBool(ctx, true)) })
	must(p.WriteFieldStop(ctx))
	must(p.WriteStructEnd(ctx))
	must(p.Flush(ctx))
	data := buf.Bytes()

	want, err := generatedItem(data)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeSnapshotItem(data, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("\n got %+v\nwant %+v", got.job, want.job)
	}
	if got.job.JobID != 42 || got.job.Rev != 0 || !got.job.IfNotExists || got.job.RefreshState != job.RefreshDone {
		t.Fatalf("decoded %+v", got.job)
	}
}

func TestDecodeRejectsTruncationsWithoutPanic(t *testing.T) {
	rec := fullRecord()
	data := encodeFrame(t, &journal.TSnapshotItem{Job: RecordToThrift(rec)})
	for n := 0; n < len(data); n++ {
		if _, err := decodeSnapshotItem(data[:n], nil); err == nil && n > 0 {
			// A cut at a field boundary of the outer struct still lacks its stop byte.
			t.Fatalf("prefix of %d/%d bytes decoded", n, len(data))
		}
	}
	if _, err := decodeSnapshotItem(encodeFrame(t, &journal.TSnapshotItem{Job: &journal.TJobRecord{}}), nil); err != nil {
		t.Fatalf("job id 0 is a valid id: %v", err)
	}
	noID := []byte{0x3c, 0x00, 0x00} // field 3 struct, empty, stop
	if _, err := decodeSnapshotItem(noID, nil); err == nil {
		t.Fatalf("a job without job_id decoded")
	}
}

func FuzzDecodeSnapshotItem(f *testing.F) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 8; i++ {
		f.Add(encodeFrame(f, &journal.TSnapshotItem{Job: RecordToThrift(randomRecord(rng))}))
	}
	f.Add(encodeFrame(f, &journal.TSnapshotItem{Last: thrift.BoolPtr(true)}))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := decodeSnapshotItem(data, newInterner())
		want, werr := generatedItem(data)
		if err == nil && werr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("decoders disagree:\n got %+v\nwant %+v", got, want)
		}
	})
}
