package rpc

import (
	"bytes"
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/gen-go/wire"
)

// A server runs at most MaxRequestsPerConn requests of one connection at
// once; the rest wait, unread, and are served as slots free up.
func TestRequestsPerConnectionAreBounded(t *testing.T) {
	const n = MaxRequestsPerConn + 8
	release := make(chan struct{}, n)
	var inside, most atomic.Int32
	b := &testBackend{inspect: func(context.Context, *wire.TInspectDatasetRequest) (*wire.TInspectDatasetResponse, error) {
		now := inside.Add(1)
		for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
		}
		<-release
		inside.Add(-1)
		return &wire.TInspectDatasetResponse{Status: okStatus()}, nil
	}}
	s := startBackend(t, b, DefaultConfig())
	m := dialMux(t, s.Addr().String(), DefaultConfig())
	var wg sync.WaitGroup
	for i := 1; i <= n; i++ {
		wg.Go(func() {
			if _, err := inspectVersion(testCtx(t), m, i); err != nil {
				t.Error(err)
			}
		})
	}
	waitFor(t, "the connection's slots to fill", func() bool { return inside.Load() == MaxRequestsPerConn })
	for range n {
		release <- struct{}{}
	}
	wg.Wait()
	if most.Load() != MaxRequestsPerConn {
		t.Fatalf("at most %d requests ran at once, want %d", most.Load(), MaxRequestsPerConn)
	}
}

// gatedConn holds its first write until the gate opens, and counts writes.
type gatedConn struct {
	net.Conn
	gate    chan struct{}
	entered chan struct{}
	writes  atomic.Int32
	mu      sync.Mutex
	got     bytes.Buffer
}

func (g *gatedConn) Write(p []byte) (int, error) {
	if g.writes.Add(1) == 1 {
		close(g.entered)
		<-g.gate
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.got.Write(p)
}

// Replies queued while a write runs leave together in the next one, in the
// order they were queued.
func TestRepliesLeaveInOneWrite(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	gc := &gatedConn{Conn: a, gate: make(chan struct{}), entered: make(chan struct{})}
	sc := &servedConn{TSocket: thrift.NewTSocketFromConnConf(gc, DefaultConfig().TConfiguration())}
	var w replyWriter
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.send(sc, []byte("first."), false)
	}()
	<-gc.entered
	var want bytes.Buffer
	want.WriteString("first.")
	for _, r := range []string{"two.", "three.", "four."} {
		w.send(sc, []byte(r), false) // queued: returns at once
		want.WriteString(r)
	}
	close(gc.gate)
	<-done
	if n := gc.writes.Load(); n != 2 {
		t.Fatalf("%d writes for four replies, want 2 (the first, then the three queued meanwhile)", n)
	}
	gc.mu.Lock()
	defer gc.mu.Unlock()
	if gc.got.String() != want.String() {
		t.Fatalf("wrote %q, want %q", gc.got.String(), want.String())
	}
}

// Close closes the connections first, then ends the handlers' contexts,
// and returns once every handler has returned: the request in flight gets
// no reply.
func TestCloseEndsHandlersAndWaitsForThem(t *testing.T) {
	entered := make(chan struct{})
	var returned atomic.Bool
	b := &testBackend{inspect: func(ctx context.Context, _ *wire.TInspectDatasetRequest) (*wire.TInspectDatasetResponse, error) {
		close(entered)
		<-ctx.Done()
		returned.Store(true)
		return &wire.TInspectDatasetResponse{Status: okStatus()}, nil
	}}
	s, err := NewServer("127.0.0.1:0", wire.NewLanceBackendServiceProcessor(b), DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Serve(); err != nil {
		t.Fatal(err)
	}
	m := dialMux(t, s.Addr().String(), DefaultConfig())
	call := goInspect(testCtx(t), m, 1)
	<-entered
	s.Close()
	if !returned.Load() {
		t.Fatal("Close returned before the handler did")
	}
	r := <-call
	if NotSent(r.err) || r.err == nil || errors.Is(r.err, context.DeadlineExceeded) {
		t.Fatalf("the call in flight at Close: %v, want a broken connection after the send", r.err)
	}
}

// A client that closes its side of the connection after its last requests
// still gets their replies: the server answers what it has read before it
// closes the connection.
func TestRequestsReadBeforeTheClientsEndAreAnswered(t *testing.T) {
	h := holdInspects(nil)
	s := startBackend(t, h.backend(), DefaultConfig())
	nc, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	m := newMuxConn(nc, s.Addr().String(), DefaultConfig().withDefaults())
	defer m.Close()
	calls := []chan callResult{goInspect(testCtx(t), m, 1), goInspect(testCtx(t), m, 2)}
	waitFor(t, "both requests to be in the handler", func() bool { return h.entered.Load() == 2 })
	ended := make(chan struct{})
	var once sync.Once
	hook := func() { once.Do(func() { close(ended) }) }
	testHookStreamEnded.Store(&hook)
	defer testHookStreamEnded.Store(nil)
	if err := nc.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	<-ended // the server has read the client's end before the handlers answer
	close(h.release)
	for i, ch := range calls {
		if r := <-ch; r.err != nil || r.v != int64(i+1) {
			t.Fatalf("call %d after the client's end: %+v", i+1, r)
		}
	}
	waitFor(t, "the server to close the connection", func() bool { return s.ActiveConns() == 0 })
}
