package rpc

import (
	"context"

	"github.com/apache/thrift/lib/go/thrift"
)

// maxKeptWriteBuf bounds the write buffer a connection keeps between
// messages; a larger frame's buffer is dropped after it is sent.
const maxKeptWriteBuf = 64 << 10

// writeCoalescer holds what a TFramedTransport writes for one message (its
// 4-byte length, then the frame) until Flush, and hands it to the socket in
// one write. Without it every message costs two write syscalls and, with
// TCP_NODELAY, two segments that often wake the reader twice.
//
// Nothing reaches the network before Flush, so the client's count of bytes
// handed to the network (SendError.BytesMayHaveLeft) stays exact: a message
// leaves whole at Flush or, on a failed write, as far as that write got.
//
// Not safe for concurrent use; a connection has one writer at a time.
type writeCoalescer struct {
	buf []byte
}

func (w *writeCoalescer) write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	return len(p), nil
}

// flush writes the held bytes to t in one Write and flushes t.
func (w *writeCoalescer) flush(ctx context.Context, t thrift.TTransport) error {
	if len(w.buf) > 0 {
		_, err := t.Write(w.buf)
		if cap(w.buf) > maxKeptWriteBuf {
			w.buf = nil
		} else {
			w.buf = w.buf[:0]
		}
		if err != nil {
			return err
		}
	}
	return t.Flush(ctx)
}

// coalescedTransport is a client connection's socket transport with its
// writes coalesced per message.
type coalescedTransport struct {
	thrift.TTransport
	w writeCoalescer
}

func (c *coalescedTransport) Write(p []byte) (int, error) { return c.w.write(p) }

func (c *coalescedTransport) Flush(ctx context.Context) error { return c.w.flush(ctx, c.TTransport) }

// SetTConfiguration passes the configuration down to the socket.
func (c *coalescedTransport) SetTConfiguration(conf *thrift.TConfiguration) {
	thrift.PropagateTConfiguration(c.TTransport, conf)
}

var _ thrift.TConfigurationSetter = (*coalescedTransport)(nil)
