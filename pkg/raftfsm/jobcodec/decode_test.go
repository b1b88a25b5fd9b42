package jobcodec

import (
	"bytes"
	"context"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/raftfsm/jobcodec/jobcodectest"
)

// The direct decoder is held to the generated code: same records from the
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

// compact is the compact encoding of s by the generated code.
func compact(t testing.TB, s thrift.TStruct) []byte {
	t.Helper()
	buf := thrift.NewTMemoryBuffer()
	p := thrift.NewTCompactProtocolConf(buf, &thrift.TConfiguration{})
	if err := s.Write(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	if err := p.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// generated decodes a TJobRecord with the generated code, as restores once did.
func generated(b []byte) (*job.Record, error) {
	tj := journal.NewTJobRecord()
	p := thrift.NewTCompactProtocolConf(&thrift.TMemoryBuffer{Buffer: bytes.NewBuffer(b)}, &thrift.TConfiguration{})
	if err := tj.Read(context.Background(), p); err != nil {
		return nil, err
	}
	return RecordFromThrift(tj), nil
}

// direct decodes with the direct decoder.
func direct(b []byte, in *Interner) (*job.Record, error) {
	r := NewReader(b)
	rec := r.JobRecord(in)
	return rec, r.Err()
}

// agree decodes data with both decoders, fails unless both accept it and
// read the same record, and returns the record.
func agree(t *testing.T, data []byte) *job.Record {
	t.Helper()
	want, err := generated(data)
	if err != nil {
		t.Fatal(err)
	}
	got, err := direct(data, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("\n got %+v\nwant %+v", got, want)
	}
	return got
}

func TestJobRecordMatchesGenerated(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	in := NewInterner()
	for n := 0; n < 2000; n++ {
		data := compact(t, RecordToThrift(jobcodectest.Random(rng)))
		want, err := generated(data)
		if err != nil {
			t.Fatal(err)
		}
		got, err := direct(data, in)
		if err != nil {
			t.Fatalf("record %d: %v", n, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("record %d:\n got %+v\nwant %+v", n, got, want)
		}
	}
}

// TestJobRecordSkipsUnknownFields reads a job record as a newer master
// might write it (jobcodectest.FutureRecord).
func TestJobRecordSkipsUnknownFields(t *testing.T) {
	got := agree(t, jobcodectest.FutureRecord(t))
	if got.JobID != 42 || got.Rev != 0 || !got.IfNotExists || got.RefreshState != job.RefreshDone {
		t.Fatalf("decoded %+v", got)
	}
}

func TestJobRecordRejectsTruncationsWithoutPanic(t *testing.T) {
	data := compact(t, RecordToThrift(jobcodectest.Full()))
	for n := 0; n < len(data); n++ {
		if _, err := direct(data[:n], nil); err == nil {
			t.Fatalf("prefix of %d/%d bytes decoded", n, len(data))
		}
	}
	if _, err := direct(compact(t, &journal.TJobRecord{}), nil); err != nil {
		t.Fatalf("job id 0 is a valid id: %v", err)
	}
	if _, err := direct([]byte{0x00}, nil); err == nil { // an empty struct: stop
		t.Fatalf("a job without job_id decoded")
	}
}

func FuzzJobRecord(f *testing.F) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 8; i++ {
		f.Add(compact(f, RecordToThrift(jobcodectest.Random(rng))))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := direct(data, NewInterner())
		want, werr := generated(data)
		if err == nil && werr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("decoders disagree:\n got %+v\nwant %+v", got, want)
		}
	})
}

// TestListsReadAsGenerated: a list of structs (the timeline, the optimized
// indexes) whose header names another element type is read as structs, as
// the generated code reads it; a size varint longer than 32 bits is cut to
// 32 bits. (No master writes either; a corrupt or hostile snapshot may.)
func TestListsReadAsGenerated(t *testing.T) {
	elem := []byte{0x15, 0x06, 0x00} // a struct: field 1 (kind) i32 3, stop
	lists := map[string][]byte{
		"bools":     append([]byte{0x21}, append(elem, elem...)...), // 2 elements "of bool"
		"long size": append([]byte{0xfc, 0x82, 0x80, 0x80, 0x80, 0x10}, append(elem, elem...)...),
	}
	for name, list := range lists {
		for _, id := range []int16{52, 55} {
			w := jobcodectest.NewWriter(t)
			w.Struct(func() {
				w.Field(1, thrift.I64, func() { w.Must(w.P.WriteI64(context.Background(), 24)) })
				w.Field(id, thrift.LIST, func() { w.Raw(list) })
			})
			data := w.Bytes()
			want, werr := generated(data)
			got, err := direct(data, nil)
			if (err == nil) != (werr == nil) || (err == nil && !reflect.DeepEqual(got, want)) {
				t.Errorf("%s in field %d: direct %+v (%v), generated %+v (%v)", name, id, got, err, want, werr)
			}
		}
	}
}

// TestI32ReadsAsGenerated: an i32 whose varint is longer than 32 bits (no
// master writes one; a corrupt or hostile snapshot may) reads as the
// generated code reads it, in the record and in its nested structs.
func TestI32ReadsAsGenerated(t *testing.T) {
	long := []byte{0x82, 0x8b, 0xc3, 0xa9, 0x30} // 35 bits
	w := jobcodectest.NewWriter(t)
	w.Struct(func() {
		w.Field(1, thrift.I64, func() { w.Must(w.P.WriteI64(context.Background(), 24)) })
		w.Field(13, thrift.I32, func() { w.Raw(long) })                                                            // mutation_type
		w.Field(40, thrift.I32, func() { w.Raw(long) })                                                            // dispatch_attempts
		w.Field(23, thrift.STRUCT, func() { w.Struct(func() { w.Field(1, thrift.I32, func() { w.Raw(long) }) }) }) // result code
	})
	agree(t, w.Bytes())
}
