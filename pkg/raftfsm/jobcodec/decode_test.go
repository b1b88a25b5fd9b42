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
	data := jobcodectest.FutureRecord(t)
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
