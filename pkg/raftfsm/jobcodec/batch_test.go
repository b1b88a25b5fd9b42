package jobcodec

import (
	"bytes"
	"context"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/raftfsm/jobcodec/jobcodectest"
)

// The FSM reads admission batches with DecodeAdmitBatch. It is held to the
// generated reader, which older masters read them with: the same batch from
// the same bytes, and the same bytes refused.

// generatedAdmitBatch reads body as masters did before DecodeAdmitBatch:
// the generated struct, then each job through RecordFromThrift.
func generatedAdmitBatch(body []byte) (*AdmitBatch, error) {
	c := journal.NewTAdmitBatch()
	p := thrift.NewTCompactProtocolConf(&thrift.TMemoryBuffer{Buffer: bytes.NewBuffer(body)}, &thrift.TConfiguration{})
	if err := c.Read(context.Background(), p); err != nil {
		return nil, err
	}
	b := &AdmitBatch{NowMs: c.NowMs, AdmitRules: c.GetAdmitRules(), Jobs: make([]*job.Record, 0, len(c.Jobs))}
	for _, tj := range c.Jobs {
		b.Jobs = append(b.Jobs, RecordFromThrift(tj))
	}
	return b, nil
}

// agreeOnAdmitBatch fails unless both readers refuse body, or both read
// the same batch from it.
func agreeOnAdmitBatch(t testing.TB, body []byte) {
	t.Helper()
	want, werr := generatedAdmitBatch(body)
	got, err := DecodeAdmitBatch(body)
	switch {
	case (err == nil) != (werr == nil):
		t.Fatalf("direct: %v; generated: %v", err, werr)
	case err == nil && !reflect.DeepEqual(got, want):
		t.Fatalf("readers disagree:\n got %+v\nwant %+v", got, want)
	}
}

func randomAdmitBatch(rng *rand.Rand, maxJobs int) *journal.TAdmitBatch {
	c := &journal.TAdmitBatch{NowMs: rng.Int64N(1 << 45), Jobs: []*journal.TJobRecord{}}
	if rng.IntN(2) == 0 {
		c.AdmitRules = thrift.Int32Ptr(rng.Int32N(4))
	}
	for n := rng.IntN(maxJobs + 1); n > 0; n-- {
		c.Jobs = append(c.Jobs, RecordToThrift(jobcodectest.Random(rng)))
	}
	return c
}

func TestAdmitBatchReadsAsGenerated(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for n := 0; n < 300; n++ {
		agreeOnAdmitBatch(t, compact(t, randomAdmitBatch(rng, 40)))
	}
}

func TestAdmitBatchFieldsAsGenerated(t *testing.T) {
	rec := compact(t, RecordToThrift(jobcodectest.Full()))
	i64 := func(w *jobcodectest.Writer, v int64) func() {
		return func() { w.Must(w.P.WriteI64(context.Background(), v)) }
	}
	list := func(w *jobcodectest.Writer, elem byte, n int) func() {
		return func() {
			w.Raw([]byte{byte(n)<<4 | elem})
			for i := 0; i < n; i++ {
				w.Raw(rec)
			}
		}
	}
	cases := map[string]func(w *jobcodectest.Writer){
		"whole": func(w *jobcodectest.Writer) {
			w.Field(1, thrift.I64, i64(w, 7))
			w.Field(2, thrift.LIST, list(w, ctStruct, 2))
			w.Field(3, thrift.I32, func() { w.Must(w.P.WriteI32(context.Background(), 2)) })
		},
		"unknown fields of a newer master": func(w *jobcodectest.Writer) {
			w.Field(1, thrift.I64, i64(w, 7))
			w.Field(2, thrift.LIST, list(w, ctStruct, 1))
			w.Field(9, thrift.STRING, func() { w.Must(w.P.WriteString(context.Background(), "later")) })
		},
		"rules of another type": func(w *jobcodectest.Writer) {
			w.Field(1, thrift.I64, i64(w, 7))
			w.Field(2, thrift.LIST, list(w, ctStruct, 1))
			w.Field(3, thrift.I64, i64(w, 2))
		},
		"jobs in a list that names another element type": func(w *jobcodectest.Writer) {
			w.Field(1, thrift.I64, i64(w, 7))
			w.Field(2, thrift.LIST, list(w, ctTrue, 2))
		},
		"no jobs at all": func(w *jobcodectest.Writer) {
			w.Field(1, thrift.I64, i64(w, 7))
			w.Field(2, thrift.LIST, list(w, ctStruct, 0))
		},
		"no now_ms": func(w *jobcodectest.Writer) {
			w.Field(2, thrift.LIST, list(w, ctStruct, 1))
		},
		"no jobs field": func(w *jobcodectest.Writer) {
			w.Field(1, thrift.I64, i64(w, 7))
		},
		"jobs as a set": func(w *jobcodectest.Writer) {
			w.Field(1, thrift.I64, i64(w, 7))
			w.Field(2, thrift.SET, list(w, ctStruct, 1))
		},
		"jobs twice": func(w *jobcodectest.Writer) {
			w.Field(1, thrift.I64, i64(w, 7))
			w.Field(2, thrift.LIST, list(w, ctStruct, 2))
			w.Field(2, thrift.LIST, list(w, ctStruct, 1))
		},
	}
	for name, fields := range cases {
		t.Run(name, func(t *testing.T) {
			w := jobcodectest.NewWriter(t)
			w.Struct(func() { fields(w) })
			agreeOnAdmitBatch(t, w.Bytes())
		})
	}
	w := jobcodectest.NewWriter(t)
	w.Struct(func() { cases["whole"](w) })
	data := w.Bytes()
	if b, err := DecodeAdmitBatch(data); err != nil || b.NowMs != 7 || b.AdmitRules != 2 || len(b.Jobs) != 2 ||
		!reflect.DeepEqual(b.Jobs[0], jobcodectest.Full()) {
		t.Fatalf("the whole batch read as %+v: %v", b, err)
	}
	for n := 0; n < len(data); n++ {
		agreeOnAdmitBatch(t, data[:n])
		if _, err := DecodeAdmitBatch(data[:n]); err == nil {
			t.Fatalf("a prefix of %d/%d bytes decoded", n, len(data))
		}
	}
}

func FuzzAdmitBatch(f *testing.F) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 6; i++ {
		f.Add(compact(f, randomAdmitBatch(rng, 2))) // small inputs: the mutator's work grows with their size
	}
	f.Fuzz(func(t *testing.T, body []byte) { agreeOnAdmitBatch(t, body) })
}
