package rpc

import (
	"bytes"
	"context"
	"io"
	"net"
	"sync/atomic"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"
)

// writeCounter counts the writes handed to a connection.
type writeCounter struct {
	net.Conn
	writes atomic.Int32
}

func (w *writeCounter) Write(p []byte) (int, error) {
	w.writes.Add(1)
	return w.Conn.Write(p)
}

// A framed message leaves the client's transport in one write and arrives
// intact. (A server's replies: TestRepliesLeaveInOneWrite.)
func TestFrameLeavesInOneWrite(t *testing.T) {
	tconf := DefaultConfig().TConfiguration()
	for name, wrap := range map[string]func(*thrift.TSocket) thrift.TTransport{
		"client": func(s *thrift.TSocket) thrift.TTransport { return &coalescedTransport{TTransport: s} },
	} {
		t.Run(name, func(t *testing.T) {
			a, b := net.Pipe()
			defer a.Close()
			defer b.Close()
			wc := &writeCounter{Conn: a}
			out := thrift.NewTFramedTransportConf(wrap(thrift.NewTSocketFromConnConf(wc, tconf)), tconf)
			in := thrift.NewTFramedTransportConf(thrift.NewTSocketFromConnConf(b, tconf), tconf)
			for _, size := range []int{0, 1, 300, 100 << 10} {
				msg := bytes.Repeat([]byte{byte(size)}, size)
				got := make(chan []byte, 1)
				go func() {
					if size == 0 {
						var hdr [4]byte
						io.ReadFull(b, hdr[:]) // an empty frame is its length only
						got <- nil
						return
					}
					buf := make([]byte, size)
					_, err := io.ReadFull(in, buf)
					if err != nil {
						t.Error(err)
					}
					got <- buf
				}()
				before := wc.writes.Load()
				if _, err := out.Write(msg); err != nil {
					t.Fatal(err)
				}
				if wc.writes.Load() != before {
					t.Fatalf("size %d: bytes left before Flush", size)
				}
				if err := out.Flush(context.Background()); err != nil {
					t.Fatal(err)
				}
				if n := wc.writes.Load() - before; n != 1 {
					t.Fatalf("size %d: %d writes for one frame, want 1", size, n)
				}
				if r := <-got; size > 0 && !bytes.Equal(r, msg) {
					t.Fatalf("size %d: frame arrived changed", size)
				}
			}
		})
	}
}

// A large frame's buffer is not kept for the next message.
func TestLargeWriteBufferIsDropped(t *testing.T) {
	var w writeCoalescer
	sink := thrift.NewTMemoryBuffer()
	w.write(make([]byte, maxKeptWriteBuf+1))
	if err := w.flush(context.Background(), sink); err != nil {
		t.Fatal(err)
	}
	if w.buf != nil {
		t.Fatalf("kept a %d-byte buffer", cap(w.buf))
	}
	w.write([]byte("small"))
	if err := w.flush(context.Background(), sink); err != nil || cap(w.buf) == 0 || len(w.buf) != 0 {
		t.Fatalf("small buffer: len %d cap %d err %v", len(w.buf), cap(w.buf), err)
	}
}
