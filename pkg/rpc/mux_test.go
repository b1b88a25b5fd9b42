package rpc

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/gen-go/wire"
)

func dialMux(t *testing.T, addr string, cfg Config) *MuxConn {
	t.Helper()
	m, err := DialMux(testCtx(t), addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// uriOf is a dataset URI whose length is n: testBackend's inspect answers
// the length as the version, so each call can tell its own answer.
func uriOf(n int) string { return "/" + strings.Repeat("x", n-1) }

func inspectVersion(ctx context.Context, m *MuxConn, n int) (int64, error) {
	r, err := wire.NewLanceBackendServiceClient(m).InspectLanceDataset(ctx, &wire.TInspectDatasetRequest{DatasetURI: uriOf(n)})
	if err != nil {
		return 0, err
	}
	return r.GetDatasetVersion(), nil
}

// heldInspects is a backend whose inspect answers the dataset URI's length
// as the version (uriOf), holding the calls hold picks (every one when nil)
// until release is closed.
type heldInspects struct {
	release chan struct{}
	entered atomic.Int32 // inspects that reached the handler
	hold    func(call int32, uriLen int) bool
}

func holdInspects(hold func(call int32, uriLen int) bool) *heldInspects {
	return &heldInspects{release: make(chan struct{}), hold: hold}
}

func (h *heldInspects) backend() *testBackend {
	return &testBackend{inspect: func(_ context.Context, r *wire.TInspectDatasetRequest) (*wire.TInspectDatasetResponse, error) {
		call, n := h.entered.Add(1), len(r.GetDatasetURI())
		if h.hold == nil || h.hold(call, n) {
			<-h.release
		}
		v := int64(n)
		return &wire.TInspectDatasetResponse{Status: okStatus(), DatasetVersion: &v}, nil
	}}
}

// Calls on one MuxConn are in flight together, and each gets its own reply.
func TestMuxCallsShareOneConnectionAndGetTheirOwnReplies(t *testing.T) {
	const n = 16
	h := holdInspects(nil)
	s := startBackend(t, h.backend(), DefaultConfig())
	m := dialMux(t, s.Addr().String(), DefaultConfig())
	var wg sync.WaitGroup
	for i := 1; i <= n; i++ {
		wg.Go(func() {
			if v, err := inspectVersion(testCtx(t), m, i); err != nil || v != int64(i) {
				t.Errorf("call %d: version %d, %v", i, v, err)
			}
		})
	}
	waitFor(t, "every call to be in the handler at once", func() bool { return h.entered.Load() == n })
	close(h.release)
	wg.Wait()
	if s.ln.total.Load() != 1 {
		t.Fatalf("%d connections, want 1", s.ln.total.Load())
	}
}

// A Thrift server that serves one request at a time answers in order; the
// calls are as correct, only served one after the other.
func TestMuxAgainstAOneAtATimeServer(t *testing.T) {
	tconf := DefaultConfig().TConfiguration()
	ss, err := thrift.NewTServerSocket("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := ss.Listen(); err != nil {
		t.Fatal(err)
	}
	srv := thrift.NewTSimpleServer4(wire.NewLanceBackendServiceProcessor(&testBackend{}), ss,
		thrift.NewTFramedTransportFactoryConf(thrift.NewTTransportFactory(), tconf), thrift.NewTBinaryProtocolFactoryConf(tconf))
	srv.SetLogContext(context.Background())
	go srv.Serve()
	t.Cleanup(func() { srv.Stop() })
	m := dialMux(t, ss.Addr().String(), DefaultConfig())
	var wg sync.WaitGroup
	for i := 1; i <= 8; i++ {
		wg.Go(func() {
			if v, err := inspectVersion(testCtx(t), m, i); err != nil || v != int64(i) {
				t.Errorf("call %d: version %d, %v", i, v, err)
			}
		})
	}
	wg.Wait()
}

// scriptConn is a net.Conn whose writes the test answers one by one, and
// whose reads return what the test feeds.
type scriptConn struct {
	writes  chan []byte
	results chan writeResult
	in      *io.PipeReader
	feed    *io.PipeWriter
	closed  chan struct{}
	once    sync.Once
}

type writeResult struct {
	n   int
	err error
}

func newScriptConn() *scriptConn {
	r, w := io.Pipe()
	return &scriptConn{writes: make(chan []byte), results: make(chan writeResult), in: r, feed: w, closed: make(chan struct{})}
}

func (c *scriptConn) Write(p []byte) (int, error) {
	select {
	case c.writes <- bytes.Clone(p):
	case <-c.closed:
		return 0, net.ErrClosed
	}
	select {
	case r := <-c.results:
		return r.n, r.err
	case <-c.closed:
		return 0, net.ErrClosed
	}
}

func (c *scriptConn) Read(p []byte) (int, error) { return c.in.Read(p) }
func (c *scriptConn) Close() error {
	c.once.Do(func() { close(c.closed); c.in.Close() })
	return nil
}
func (c *scriptConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *scriptConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *scriptConn) SetDeadline(time.Time) error      { return nil }
func (c *scriptConn) SetReadDeadline(time.Time) error  { return nil }
func (c *scriptConn) SetWriteDeadline(time.Time) error { return nil }

// scripted is a MuxConn over a scriptConn.
func scripted(t *testing.T, cfg Config) (*MuxConn, *scriptConn) {
	t.Helper()
	sc := newScriptConn()
	m := newMuxConn(sc, "script", cfg.withDefaults())
	t.Cleanup(func() { m.Close() })
	return m, sc
}

// queued is how many calls wait for the writer.
func (m *MuxConn) queued() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.queue)
}

type callResult struct {
	v   int64
	err error
}

// goInspect starts an inspect on m; its result arrives on the channel.
func goInspect(ctx context.Context, m *MuxConn, n int) chan callResult {
	out := make(chan callResult, 1)
	go func() {
		v, err := inspectVersion(ctx, m, n)
		out <- callResult{v, err}
	}()
	return out
}

// frameSeq reads the sequence id and method of a request frame (length
// first).
func frameSeq(t *testing.T, frame []byte) (string, int32) {
	t.Helper()
	in := thrift.NewTBinaryProtocolConf(&thrift.TMemoryBuffer{Buffer: bytes.NewBuffer(frame[4:])}, DefaultConfig().TConfiguration())
	name, _, seq, err := in.ReadMessageBegin(context.Background())
	if err != nil {
		t.Fatalf("request frame: %v", err)
	}
	return name, seq
}

// inspectReply frames an inspect reply with version v for seq.
func inspectReply(t *testing.T, seq int32, v int64) []byte {
	t.Helper()
	buf := &thrift.TMemoryBuffer{Buffer: bytes.NewBuffer(make([]byte, 4))}
	p := thrift.NewTBinaryProtocolConf(buf, DefaultConfig().TConfiguration())
	ctx := context.Background()
	res := wire.LanceBackendServiceInspectLanceDatasetResult{Success: &wire.TInspectDatasetResponse{Status: okStatus(), DatasetVersion: &v}}
	if err := p.WriteMessageBegin(ctx, methodInspect, thrift.REPLY, seq); err != nil {
		t.Fatal(err)
	}
	if err := res.Write(ctx, p); err != nil {
		t.Fatal(err)
	}
	p.WriteMessageEnd(ctx)
	b := buf.Bytes()
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

func (c *scriptConn) reply(t *testing.T, frame []byte) {
	t.Helper()
	if _, err := c.feed.Write(frame); err != nil {
		t.Fatal(err)
	}
}

// A call abandoned while it waits for the writer is never written, and
// says so; the calls around it go out and are answered.
func TestMuxCallAbandonedInTheQueueIsNeverWritten(t *testing.T) {
	m, sc := scripted(t, DefaultConfig())
	a := goInspect(testCtx(t), m, 1)
	first := <-sc.writes // the writer is now inside the write of A
	ctx, cancel := context.WithCancel(context.Background())
	b := goInspect(ctx, m, 2)
	waitFor(t, "B to wait for the writer", func() bool { return m.queued() == 1 })
	cancel()
	r := <-b
	if se := asSendError(t, r.err); se.BytesMayHaveLeft || !errors.Is(r.err, context.Canceled) {
		t.Fatalf("B abandoned in the queue: %+v, want not sent", se)
	}
	sc.results <- writeResult{n: len(first)}
	c := goInspect(testCtx(t), m, 3)
	next := <-sc.writes
	sc.results <- writeResult{n: len(next)}
	if _, seq := frameSeq(t, next); seq != 3 || len(next) != len(first)+2 {
		t.Fatalf("the write after A carried seq %d (%d bytes), want C alone (seq 3)", seq, len(next))
	}
	_, seqA := frameSeq(t, first)
	sc.reply(t, inspectReply(t, 3, 30))
	sc.reply(t, inspectReply(t, seqA, 10))
	if r := <-a; r.err != nil || r.v != 10 {
		t.Fatalf("A: %+v", r)
	}
	if r := <-c; r.err != nil || r.v != 30 {
		t.Fatalf("C: %+v", r)
	}
}

// A write that fails part way says, per call, whether its bytes may have
// left: those that started before the failure may have, those after never
// did. The connection fails: later calls are not sent.
func TestMuxFailedWriteSaysWhichCallsLeft(t *testing.T) {
	m, sc := scripted(t, DefaultConfig())
	a := goInspect(testCtx(t), m, 1)
	first := <-sc.writes
	b := goInspect(testCtx(t), m, 2)
	waitFor(t, "B to queue", func() bool { return m.queued() == 1 })
	c := goInspect(testCtx(t), m, 3)
	waitFor(t, "C to queue", func() bool { return m.queued() == 2 })
	sc.results <- writeResult{n: len(first)} // A leaves whole
	batch := <-sc.writes                     // B and C in one write
	if len(batch) != 2*len(first)+3 {
		t.Fatalf("second write has %d bytes, want B and C (%d)", len(batch), 2*len(first)+3)
	}
	sc.results <- writeResult{n: len(first) - 4, err: errors.New("connection reset")} // B part way, C not at all
	for name, want := range map[string]struct {
		ch  chan callResult
		may bool
	}{"A": {a, true}, "B": {b, true}, "C": {c, false}} {
		r := <-want.ch
		if se := asSendError(t, r.err); se.BytesMayHaveLeft != want.may {
			t.Errorf("%s: %+v, want BytesMayHaveLeft %v", name, se, want.may)
		}
	}
	if _, err := inspectVersion(testCtx(t), m, 4); !NotSent(err) || m.Err() == nil {
		t.Fatalf("a call after the failure: %v (connection error %v), want not sent", err, m.Err())
	}
}

// Replies that do not belong to a call in flight are dropped; a frame out
// of step (over the limit, or not a message) fails the connection and the
// calls on it, which may have been sent.
func TestMuxStrayAndBrokenReplies(t *testing.T) {
	m, sc := scripted(t, DefaultConfig())
	go func() {
		for range sc.writes {
			sc.results <- writeResult{n: 1 << 20}
		}
	}()
	a := goInspect(testCtx(t), m, 1)
	waitFor(t, "A to be written", func() bool { return m.queued() == 0 && m.FramesRead() == 0 && m.inFlight() == 1 })
	sc.reply(t, inspectReply(t, 99, 99)) // no such call
	sc.reply(t, inspectReply(t, 1, 10))
	if r := <-a; r.err != nil || r.v != 10 {
		t.Fatalf("A after a stray reply: %+v", r)
	}
	for name, frame := range map[string][]byte{
		"over the limit":  binary.BigEndian.AppendUint32(nil, uint32(DefaultMaxFrameSize+1)),
		"not a message":   append(binary.BigEndian.AppendUint32(nil, 12), make([]byte, 12)...),
		"name past frame": append(binary.BigEndian.AppendUint32(nil, 12), 0x80, 1, 0, 2, 0, 0, 0, 9, 0, 0, 0, 0),
	} {
		t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) {
			m, sc := scripted(t, DefaultConfig())
			go func() {
				for range sc.writes {
					sc.results <- writeResult{n: 1 << 20}
				}
			}()
			a := goInspect(testCtx(t), m, 1)
			waitFor(t, "A to be written", func() bool { return m.queued() == 0 && m.inFlight() == 1 })
			sc.reply(t, frame)
			r := <-a
			if se := asSendError(t, r.err); !se.BytesMayHaveLeft || m.Err() == nil {
				t.Fatalf("%+v (connection error %v), want may have left and a failed connection", se, m.Err())
			}
		})
	}
}

// A call whose reply does not come within SocketTimeout fails, and so does
// the connection: a server ends every handler by then.
func TestMuxReplyTimeoutFailsTheConnection(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	s := startBackend(t, &testBackend{inspect: func(context.Context, *wire.TInspectDatasetRequest) (*wire.TInspectDatasetResponse, error) {
		<-block
		return &wire.TInspectDatasetResponse{Status: okStatus()}, nil
	}}, DefaultConfig())
	cfg := DefaultConfig()
	cfg.SocketTimeout = 100 * time.Millisecond
	m := dialMux(t, s.Addr().String(), cfg)
	_, err := inspectVersion(testCtx(t), m, 1)
	if se := asSendError(t, err); !se.BytesMayHaveLeft || !errors.Is(err, errReplyTimeout) || !errors.Is(m.Err(), errReplyTimeout) {
		t.Fatalf("%+v (connection error %v), want the reply timeout after the send", se, m.Err())
	}
	if _, err := inspectVersion(testCtx(t), m, 2); !NotSent(err) {
		t.Fatalf("after the timeout: %v, want not sent", err)
	}
}

// A call's context ending abandons that call only: its late reply is
// dropped, and the next call gets its own.
func TestMuxLateReplyIsDroppedAndTheConnectionServes(t *testing.T) {
	h := holdInspects(func(call int32, _ int) bool { return call == 1 })
	s := startBackend(t, h.backend(), DefaultConfig())
	m := dialMux(t, s.Addr().String(), DefaultConfig())
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := inspectVersion(ctx, m, 1); !errors.Is(err, context.DeadlineExceeded) || NotSent(err) {
		t.Fatalf("first call: %v, want its deadline after the send", err)
	}
	close(h.release)
	waitFor(t, "the late reply to arrive", func() bool { return m.FramesRead() == 1 })
	if v, err := inspectVersion(testCtx(t), m, 2); err != nil || v != 2 {
		t.Fatalf("second call: version %d, %v", v, err)
	}
	if m.Err() != nil || s.ln.total.Load() != 1 {
		t.Fatalf("connection error %v, %d connections; want the one, working", m.Err(), s.ln.total.Load())
	}
}

// A request over the frame limit is refused before anything is sent; the
// connection keeps working. Close fails the calls in flight (they may have
// been sent) and refuses later ones.
func TestMuxOversizedRequestAndClose(t *testing.T) {
	h := holdInspects(func(_ int32, uriLen int) bool { return uriLen == 3 })
	defer close(h.release)
	s := startBackend(t, h.backend(), DefaultConfig())
	cfg := DefaultConfig()
	cfg.MaxFrameSize = 256
	m := dialMux(t, s.Addr().String(), cfg)
	if _, err := inspectVersion(testCtx(t), m, 300); !NotSent(err) {
		t.Fatalf("oversized: %v, want not sent", err)
	}
	if v, err := inspectVersion(testCtx(t), m, 2); err != nil || v != 2 {
		t.Fatalf("after the oversized request: %d, %v", v, err)
	}
	held := goInspect(testCtx(t), m, 3)
	waitFor(t, "the held call to be written", func() bool { return m.inFlight() == 1 && m.queued() == 0 && m.written1() })
	m.Close()
	if r := <-held; NotSent(r.err) || !errors.Is(r.err, net.ErrClosed) {
		t.Fatalf("in flight at Close: %v, want may have been sent", r.err)
	}
	if _, err := inspectVersion(testCtx(t), m, 4); !NotSent(err) {
		t.Fatalf("after Close: %v, want not sent", err)
	}
}

// inFlight is how many calls await a reply.
func (m *MuxConn) inFlight() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.calls)
}

// written1 reports whether the one call in flight was handed to a write.
func (m *MuxConn) written1() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range m.calls {
		return c.state == callWritten
	}
	return false
}
