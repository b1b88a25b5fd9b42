package jobcodectest

import (
	"context"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/pkg/job"
)

// Writer writes the compact encoding field by field, for bytes no master
// writes (fields it does not know, a known id with another type). A failed
// write fails the test.
type Writer struct {
	t   testing.TB
	ctx context.Context
	buf *thrift.TMemoryBuffer
	P   *thrift.TCompactProtocol // for the values
}

// NewWriter starts an empty encoding.
func NewWriter(t testing.TB) *Writer {
	buf := thrift.NewTMemoryBuffer()
	return &Writer{t: t, ctx: context.Background(), buf: buf, P: thrift.NewTCompactProtocolConf(buf, &thrift.TConfiguration{})}
}

// Must fails the test on err.
func (w *Writer) Must(err error) {
	w.t.Helper()
	if err != nil {
		w.t.Fatal(err)
	}
}

// Field writes one field: its header, then what write writes.
func (w *Writer) Field(id int16, typ thrift.TType, write func()) {
	w.Must(w.P.WriteFieldBegin(w.ctx, "", typ, id))
	write()
	w.Must(w.P.WriteFieldEnd(w.ctx))
}

// Struct writes a struct whose fields fields writes, and its stop.
func (w *Writer) Struct(fields func()) {
	w.Must(w.P.WriteStructBegin(w.ctx, ""))
	fields()
	w.Must(w.P.WriteFieldStop(w.ctx))
	w.Must(w.P.WriteStructEnd(w.ctx))
}

// Raw appends bytes as they are (a struct value is self-delimiting).
func (w *Writer) Raw(b []byte) {
	w.Must(w.P.Flush(w.ctx))
	_, err := w.buf.Write(b)
	w.Must(err)
}

// Bytes is the encoding written so far.
func (w *Writer) Bytes() []byte {
	w.Must(w.P.Flush(w.ctx))
	return w.buf.Bytes()
}

// FutureRecord is the compact encoding of a TJobRecord as a newer master
// might write it: job 42 by alice, RUNNING, refresh DONE, if_not_exists, and
// beside them fields of every type under ids this master does not know, and
// a known id (rev) with an unexpected type. A reader must skip what it does
// not know and keep the rest.
func FutureRecord(t testing.TB) []byte {
	t.Helper()
	w := NewWriter(t)
	ctx, p, must, field := w.ctx, w.P, w.Must, w.Field
	w.Struct(func() {
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
			w.Struct(func() {
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
			})
		})
		field(22, thrift.I32, func() { must(p.WriteI32(ctx, int32(job.RefreshDone))) })
	})
	return w.Bytes()
}
