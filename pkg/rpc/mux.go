package rpc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"runtime"
	"sync"
	"time"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/pkg/certs"
)

// MuxConn is a client connection that carries many calls at once: a call
// writes its request without waiting for the replies of the others, and a
// reader hands each reply to its call by sequence id. Requests queued
// together leave in one write; replies that arrive together are read in one.
// A Server runs the calls of one connection concurrently (pipeline.go); a
// Thrift server that serves one request at a time answers them in order,
// which is as correct, only slower.
//
// Build a generated client on it with Client(), as on a Conn, one per
// goroutine or per call: a generated client keeps its last call's response
// metadata, so it is not safe for concurrent use even where its TClient is.
// Every call:
//   - is bounded by its context and by SocketTimeout (the earlier wins). A
//     context that ends abandons the call, not the connection: its reply,
//     if one comes, is dropped. A call that waits SocketTimeout for its
//     reply closes the connection, since a server ends every handler at
//     its own SocketTimeout: the peer is gone or stuck.
//   - fails with a *SendError whose BytesMayHaveLeft is exact for that call:
//     false while its request waits in the queue (a call abandoned then is
//     never written) and when a failed write stopped before the request's
//     first byte; true once any byte of it was handed to a write.
//
// Once the connection fails (a write or read error, a reply frame out of
// step, Close), every call in flight fails, with BytesMayHaveLeft as above,
// and every later call fails as not sent; Err says why. Dial a new one.
//
// Concurrency: safe for concurrent use by any number of goroutines. Two
// goroutines serve it: a writer and a reader, both ended by the failure.
type MuxConn struct {
	addr     string
	nc       net.Conn
	conf     *thrift.TConfiguration
	timeout  time.Duration
	maxFrame int

	kick chan struct{} // wakes the writer; capacity 1
	done chan struct{} // closed when the connection has failed

	mu     sync.Mutex
	seq    int32
	calls  map[int32]*muxCall // queued or written, awaiting a reply
	queue  []*muxCall         // not yet taken by the writer
	err    error              // why the connection failed; nil while it works
	frames int64              // reply frames read
	last   time.Time          // the last call queued or reply read
}

// The states of a call's request, guarded by MuxConn.mu.
type callState uint8

const (
	callQueued    callState = iota // waiting for the writer: nothing has left
	callWritten                    // handed to a write: bytes may have left
	callWithdrawn                  // abandoned while queued: never written
	callUnsent                     // a failed write stopped before its first byte
)

type muxCall struct {
	seq   int32
	frame []byte
	off   int       // where the frame starts in its write (writer only)
	state callState // guarded by MuxConn.mu
	reply chan muxReply
}

type muxReply struct {
	frame []byte
	err   error
}

// errReplyTimeout fails a connection on which a call waited SocketTimeout.
var errReplyTimeout = errors.New("rpc: no reply within the socket timeout")

// DialMux connects to addr as Dial does (the same Config, TLS and errors)
// and returns a connection for concurrent calls. With Config.Certs the
// server's certificate must carry one of roles, when any are given.
func DialMux(ctx context.Context, addr string, cfg Config, roles ...certs.Role) (*MuxConn, error) {
	cfg = cfg.withDefaults()
	nc, err := dialNet(ctx, addr, cfg, roles...)
	if err != nil {
		return nil, err
	}
	return newMuxConn(nc, addr, cfg), nil
}

// newMuxConn serves calls over nc (cfg has its defaults).
func newMuxConn(nc net.Conn, addr string, cfg Config) *MuxConn {
	m := &MuxConn{
		addr: addr, nc: nc, conf: cfg.TConfiguration(), timeout: cfg.SocketTimeout, maxFrame: int(cfg.MaxFrameSize),
		kick: make(chan struct{}, 1), done: make(chan struct{}),
		calls: map[int32]*muxCall{}, last: time.Now(),
	}
	go m.writeLoop()
	go m.readLoop()
	return m
}

// Addr returns the address dialled.
func (m *MuxConn) Addr() string { return m.addr }

// Client returns the TClient to build generated clients on.
func (m *MuxConn) Client() thrift.TClient { return m }

// Close fails the connection: the calls in flight fail, and so do later
// ones. It is idempotent.
func (m *MuxConn) Close() error {
	m.fail(net.ErrClosed)
	return nil
}

// Err returns why the connection failed, or nil while it works.
func (m *MuxConn) Err() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err
}

// FramesRead counts the reply frames read so far: a call that failed while
// it did not move got no byte of any reply in the meantime.
func (m *MuxConn) FramesRead() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.frames
}

// expired reports whether the connection failed, or has carried no call
// for maxAge.
func (m *MuxConn) expired(now time.Time, maxAge time.Duration) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.expiredLocked(now, maxAge)
}

func (m *MuxConn) expiredLocked(now time.Time, maxAge time.Duration) bool {
	return m.err != nil || (len(m.calls) == 0 && now.Sub(m.last) >= maxAge)
}

// claim takes the connection for a call about to be made, unless it has
// expired: it counts as used now, so that it does not expire under the
// caller before the call is queued.
func (m *MuxConn) claim(now time.Time, maxAge time.Duration) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.expiredLocked(now, maxAge) {
		return false
	}
	m.last = now
	return true
}

// Call implements thrift.TClient.
func (m *MuxConn) Call(ctx context.Context, method string, args, result thrift.TStruct) (thrift.ResponseMeta, error) {
	fail := func(mayHaveLeft bool, err error) (thrift.ResponseMeta, error) {
		return thrift.ResponseMeta{}, &SendError{Op: method, Addr: m.addr, BytesMayHaveLeft: mayHaveLeft, Err: err}
	}
	if err := ctx.Err(); err != nil {
		return fail(false, err)
	}
	frame, seqAt, err := m.encode(ctx, method, args)
	if err != nil {
		return fail(false, err)
	}
	c := &muxCall{frame: frame, reply: make(chan muxReply, 1)}
	m.mu.Lock()
	if m.err != nil {
		err := m.err
		m.mu.Unlock()
		return fail(false, err)
	}
	if m.seq == math.MaxInt32 {
		m.seq = 0
	}
	m.seq++
	c.seq = m.seq
	binary.BigEndian.PutUint32(frame[seqAt:], uint32(c.seq))
	m.calls[c.seq] = c
	m.queue = append(m.queue, c)
	m.last = time.Now()
	m.mu.Unlock()
	select {
	case m.kick <- struct{}{}:
	default: // the writer is already woken
	}

	// The socket timeout bounds the wait; a context deadline that comes
	// first makes the timer needless.
	var timeout <-chan time.Time
	if d, ok := ctx.Deadline(); !ok || time.Until(d) >= m.timeout {
		timer := time.NewTimer(m.timeout)
		defer timer.Stop()
		timeout = timer.C
	}
	select {
	case r := <-c.reply:
		if r.err != nil {
			return fail(m.written(c), r.err)
		}
		if err := m.decode(ctx, method, c.seq, r.frame, result); err != nil {
			return fail(true, err)
		}
		return thrift.ResponseMeta{}, nil
	case <-ctx.Done():
		return fail(m.abandon(c), ctx.Err())
	case <-timeout:
		mayHaveLeft := m.abandon(c)
		m.fail(errReplyTimeout)
		return fail(mayHaveLeft, errReplyTimeout)
	}
}

// encode frames one request with sequence id 0 (TStandardClient.Send's
// message), and says where the id is.
func (m *MuxConn) encode(ctx context.Context, method string, args thrift.TStruct) ([]byte, int, error) {
	buf := &thrift.TMemoryBuffer{Buffer: bytes.NewBuffer(make([]byte, 4, 256))}
	if err := stdClient.Send(ctx, thrift.NewTBinaryProtocolConf(buf, m.conf), 0, method, args); err != nil {
		return nil, 0, err
	}
	b := buf.Bytes()
	size := len(b) - 4
	if size > m.maxFrame {
		return nil, 0, fmt.Errorf("rpc: request of %d bytes is over the %d-byte frame limit", size, m.maxFrame)
	}
	binary.BigEndian.PutUint32(b, uint32(size))
	// Strict binary: version and type (4 bytes), the name's length (4),
	// the name, then the sequence id.
	return b, 4 + 8 + len(method), nil
}

// decode reads a reply frame into result (TStandardClient.Recv: the method,
// the sequence id, an exception answer).
func (m *MuxConn) decode(ctx context.Context, method string, seq int32, frame []byte, result thrift.TStruct) error {
	in := thrift.NewTBinaryProtocolConf(&thrift.TMemoryBuffer{Buffer: bytes.NewBuffer(frame)}, m.conf)
	return stdClient.Recv(ctx, in, seq, method, result)
}

// stdClient is used for its Send and Recv only, which keep no state.
var stdClient = thrift.NewTStandardClient(nil, nil)

// abandon takes c off the connection; it returns whether its bytes may have
// left. A call still queued is withdrawn: the writer skips it.
func (m *MuxConn) abandon(c *muxCall) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.calls, c.seq)
	if c.state == callQueued {
		c.state = callWithdrawn
	}
	return c.state == callWritten
}

// written reports whether bytes of c's request were handed to a write.
func (m *MuxConn) written(c *muxCall) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return c.state == callWritten
}

// fail ends the connection for the reason err (the first reason stays):
// every call in flight gets err, and later calls are refused.
func (m *MuxConn) fail(err error) {
	m.mu.Lock()
	if m.err != nil {
		m.mu.Unlock()
		return
	}
	m.err = err
	calls := m.calls
	m.calls, m.queue = nil, nil
	m.mu.Unlock()
	close(m.done)
	m.nc.Close()
	for _, c := range calls {
		c.reply <- muxReply{err: err}
	}
}

// writeLoop writes whatever is queued each time it is woken: one write for
// every request queued since the last.
func (m *MuxConn) writeLoop() {
	var buf []byte
	for {
		select {
		case <-m.kick:
		case <-m.done:
			return
		}
		// Let the calls that are about to queue do so: they leave in this
		// write rather than in a write each.
		runtime.Gosched()
		m.mu.Lock()
		if m.err != nil {
			m.mu.Unlock()
			return
		}
		batch := m.queue
		m.queue = nil
		buf = buf[:0]
		for _, c := range batch {
			if c.state != callQueued {
				continue // withdrawn
			}
			c.state, c.off = callWritten, len(buf)
			buf = append(buf, c.frame...)
			c.frame = nil
		}
		m.mu.Unlock()
		if len(buf) == 0 {
			continue
		}
		m.nc.SetWriteDeadline(time.Now().Add(m.timeout))
		n, err := m.nc.Write(buf)
		if err != nil {
			m.mu.Lock()
			for _, c := range batch {
				if c.state == callWritten && c.off >= n {
					c.state = callUnsent
				}
			}
			m.mu.Unlock()
			m.fail(err)
			return
		}
		if cap(buf) > maxKeptWriteBuf {
			buf = nil
		}
	}
}

// readLoop reads reply frames and hands each to its call. A frame over the
// limit, or one whose header is not a strict binary message, means the
// stream is out of step: the connection fails.
func (m *MuxConn) readLoop() {
	br := bufio.NewReaderSize(m.nc, 16<<10)
	var hdr [4]byte
	for {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			m.fail(err)
			return
		}
		size := binary.BigEndian.Uint32(hdr[:])
		if size > uint32(m.maxFrame) {
			m.fail(fmt.Errorf("rpc: reply frame of %d bytes is over the %d-byte limit", size, m.maxFrame))
			return
		}
		frame := make([]byte, size)
		if _, err := io.ReadFull(br, frame); err != nil {
			m.fail(err)
			return
		}
		seq, ok := replySeq(frame)
		if !ok {
			m.fail(errors.New("rpc: reply frame is not a binary message"))
			return
		}
		m.mu.Lock()
		m.frames++
		m.last = time.Now()
		c := m.calls[seq]
		if c != nil && c.state == callWritten {
			delete(m.calls, seq)
		} else {
			c = nil // an abandoned call's reply, or one for no request
		}
		m.mu.Unlock()
		if c != nil {
			c.reply <- muxReply{frame: frame}
		}
	}
}

// replySeq reads the sequence id of a strict binary message frame.
func replySeq(frame []byte) (int32, bool) {
	if len(frame) < 12 || binary.BigEndian.Uint32(frame)&thrift.VERSION_MASK != thrift.VERSION_1 {
		return 0, false
	}
	n := binary.BigEndian.Uint32(frame[4:])
	if uint64(n) > uint64(len(frame)-12) {
		return 0, false
	}
	return int32(binary.BigEndian.Uint32(frame[8+n:])), true
}
