package raftfsm

import (
	"context"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/raftfsm/jobcodec"
	"github.com/lancemaster/lancemaster/pkg/raftfsm/jobcodec/jobcodectest"
)

// The snapshot item decoder is held to the generated code: same items from
// the same bytes, unknown fields skipped the same way, no panic on garbage.
// (Job records alone: jobcodec's tests.)

// generatedItem decodes a frame with the generated code, as Restore once did.
func generatedItem(b []byte) (snapshotItem, error) {
	t := journal.NewTSnapshotItem()
	if err := decodeCompact(b, t); err != nil {
		return snapshotItem{}, err
	}
	it := snapshotItem{last: t.GetLast()}
	if t.Job != nil {
		it.job = jobcodec.RecordFromThrift(t.Job)
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
		item := &journal.TSnapshotItem{Job: RecordToThrift(jobcodectest.Random(rng))}
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
		got, err := decodeSnapshotItem(data, jobcodec.NewInterner())
		if err != nil {
			t.Fatalf("item %d: %v", n, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("item %d:\n got %+v\nwant %+v", n, got.job, want.job)
		}
	}
}

// TestDecodeSkipsUnknownFields reads an item as a newer master might write
// it: fields this master does not know around a job record with its own
// (jobcodectest.FutureRecord).
func TestDecodeSkipsUnknownFields(t *testing.T) {
	w := jobcodectest.NewWriter(t)
	ctx := context.Background()
	w.Struct(func() {
		w.Field(9, thrift.DOUBLE, func() { w.Must(w.P.WriteDouble(ctx, 1.5)) })
		w.Field(3, thrift.STRUCT, func() { w.Raw(jobcodectest.FutureRecord(t)) })
		w.Field(10, thrift.BOOL, func() { w.Must(w.P.WriteBool(ctx, true)) })
	})
	data := w.Bytes()

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
	rec := jobcodectest.Full()
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
		f.Add(encodeFrame(f, &journal.TSnapshotItem{Job: RecordToThrift(jobcodectest.Random(rng))}))
	}
	f.Add(encodeFrame(f, &journal.TSnapshotItem{Last: thrift.BoolPtr(true)}))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := decodeSnapshotItem(data, jobcodec.NewInterner())
		want, werr := generatedItem(data)
		if err == nil && werr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("decoders disagree:\n got %+v\nwant %+v", got, want)
		}
	})
}
