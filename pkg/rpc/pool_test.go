package rpc

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/gen-go/wire"
)

// pooled returns the client's pool.
func pooled(c BackendClient) *connPool { return c.(*thriftBackendClient).pool }

func heartbeat(t *testing.T, c BackendClient, addr string) error {
	t.Helper()
	_, err := c.Heartbeat(testCtx(t), addr, &wire.THeartbeatRequest{MasterID: "m"})
	return err
}

// Inspect, Heartbeat and Query share one connection when they follow each
// other; Submit always dials its own and closes it.
func TestIdempotentCallsReuseAConnection(t *testing.T) {
	s := startBackend(t, &testBackend{}, DefaultConfig())
	addr := s.Addr().String()
	c := NewThriftBackendClient(DefaultConfig())
	ctx := testCtx(t)
	for i := range 30 {
		var err error
		switch i % 3 {
		case 0:
			_, err = c.Inspect(ctx, addr, &wire.TInspectDatasetRequest{DatasetURI: "/d"})
		case 1:
			err = heartbeat(t, c, addr)
		case 2:
			_, err = c.Query(ctx, addr, &wire.TQueryInvocationsRequest{InvocationIds: []string{"a"}})
		}
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if n := s.ln.total.Load(); n != 1 {
		t.Fatalf("%d connections for 30 idempotent calls, want 1", n)
	}
	if n := pooled(c).idleCount(addr); n != 1 {
		t.Fatalf("%d idle connections, want 1", n)
	}
	for i := range 3 {
		if _, err := c.Submit(ctx, addr, testDispatch("inv")); err != nil {
			t.Fatalf("submit %d: %v", i, err)
		}
	}
	if n := s.ln.total.Load(); n != 4 {
		t.Fatalf("%d connections after 3 submits, want 1 + 3 (a submit never reuses)", n)
	}
	if n := pooled(c).idleCount(addr); n != 1 {
		t.Fatalf("%d idle connections after submits, want 1 (a submit's is never kept)", n)
	}
	waitFor(t, "the submits' connections to close", func() bool { return s.ActiveConns() == 1 })
}

// A call that fails closes its connection, whether the peer answered with an
// exception or dropped the stream. An answer is never retried; a stream
// dropped before any reply byte looks like a stale connection and is retried
// once on a fresh one (these calls only read), and no more.
func TestFailedCallsAreNotReused(t *testing.T) {
	var mode atomic.Int32 // 0 OK, 1 an exception, 2 drop the connection
	var calls atomic.Int32
	b := &testBackend{heartbeat: func(context.Context, *wire.THeartbeatRequest) (*wire.THeartbeatResponse, error) {
		calls.Add(1)
		switch mode.Load() {
		case 1:
			return nil, errors.New("handler failed")
		case 2:
			return nil, thrift.ErrAbandonRequest
		}
		return &wire.THeartbeatResponse{Status: okStatus(), BeProcessEpoch: 1}, nil
	}}
	s := startBackend(t, b, DefaultConfig())
	addr := s.Addr().String()
	c := NewThriftBackendClient(DefaultConfig())
	for _, m := range []int32{1, 2} {
		mode.Store(0)
		if err := heartbeat(t, c, addr); err != nil {
			t.Fatal(err)
		}
		before, callsBefore := s.ln.total.Load(), calls.Load()
		mode.Store(m)
		err := heartbeat(t, c, addr)
		if err == nil {
			t.Fatalf("mode %d: no error", m)
		}
		if se := asSendError(t, err); !se.BytesMayHaveLeft {
			t.Fatalf("mode %d: %+v, want may have left", m, se)
		}
		if n := pooled(c).idleCount(addr); n != 0 {
			t.Fatalf("mode %d: a failed call's connection was kept (%d idle)", m, n)
		}
		retries := int64(0)
		if m == 2 {
			retries = 1
		}
		if s.ln.total.Load() != before+retries || int64(calls.Load()-callsBefore) != 1+retries {
			t.Fatalf("mode %d: %d new connections, %d handler calls; want %d retries",
				m, s.ln.total.Load()-before, calls.Load()-callsBefore, retries)
		}
		waitFor(t, "the failed connection to close", func() bool { return s.ActiveConns() == 0 })
	}
}

// Concurrent inspects share at most DefaultMaxConnsPerAddr connections to
// one address: the rest wait for one (within their context) instead of
// dialling, and afterwards those connections stay idle for reuse. A
// heartbeat never waits: with every slot held it still gets through.
func TestConnectionsPerAddressAreBounded(t *testing.T) {
	const limit = DefaultMaxConnsPerAddr
	const n = 3 * limit
	release := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	var entered atomic.Int32
	b := &testBackend{inspect: func(context.Context, *wire.TInspectDatasetRequest) (*wire.TInspectDatasetResponse, error) {
		entered.Add(1)
		<-release
		return &wire.TInspectDatasetResponse{Status: okStatus()}, nil
	}}
	s := startBackend(t, b, DefaultConfig())
	addr := s.Addr().String()
	c := NewThriftBackendClient(DefaultConfig())
	t.Cleanup(open) // registered after the server: runs before its Close
	inspect := func(ctx context.Context) error {
		_, err := c.Inspect(ctx, addr, &wire.TInspectDatasetRequest{DatasetURI: "/d/t.lance"})
		return err
	}
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if err := inspect(testCtx(t)); err != nil {
				t.Error(err)
			}
		})
	}
	waitFor(t, "every slot to be in use", func() bool { return entered.Load() == limit })
	// One more inspect with a short deadline gives up waiting for a
	// connection: nothing was sent, and no connection beyond the limit was
	// dialled.
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		done <- inspect(ctx)
	}()
	var err error
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("an inspect past the limit went out and did not return")
	}
	if se := asSendError(t, err); se.BytesMayHaveLeft || !NotSent(err) {
		t.Fatalf("an inspect past the limit: %+v, want not sent", se)
	}
	if got := entered.Load(); got != limit || s.ln.total.Load() != limit {
		t.Fatalf("%d inspects in the handler over %d connections; want %d over %d", got, s.ln.total.Load(), limit, limit)
	}
	// Liveness does not queue behind admissions.
	if err := heartbeat(t, c, addr); err != nil {
		t.Fatalf("a heartbeat with every inspect slot held: %v", err)
	}
	open()
	wg.Wait()
	if entered.Load() != n || s.ln.total.Load() != limit+1 {
		t.Fatalf("%d inspects over %d connections; want %d over %d and the heartbeat's", entered.Load(), s.ln.total.Load(), n, limit)
	}
	if got := pooled(c).idleCount(addr); got != limit {
		t.Fatalf("%d idle connections, want %d", got, limit)
	}
}

// A pooled connection the server closed while it sat idle is noticed before
// reuse: the call goes out on a fresh connection and succeeds.
func TestIdleConnectionClosedByTheServerIsNotReused(t *testing.T) {
	srvCfg := DefaultConfig()
	srvCfg.SocketTimeout = 100 * time.Millisecond // closes idle connections quickly
	var calls atomic.Int32
	b := &testBackend{heartbeat: func(context.Context, *wire.THeartbeatRequest) (*wire.THeartbeatResponse, error) {
		calls.Add(1)
		return &wire.THeartbeatResponse{Status: okStatus(), BeProcessEpoch: 1}, nil
	}}
	s := startBackend(t, b, srvCfg)
	addr := s.Addr().String()
	c := NewThriftBackendClient(DefaultConfig())
	if err := heartbeat(t, c, addr); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the server to close the idle connection", func() bool { return s.ActiveConns() == 0 })
	if pooled(c).idleCount(addr) != 1 {
		t.Fatal("the connection should still be pooled on the client side")
	}
	if err := heartbeat(t, c, addr); err != nil {
		t.Fatalf("call after the server closed the idle connection: %v", err)
	}
	if calls.Load() != 2 || s.ln.total.Load() != 2 {
		t.Fatalf("%d calls over %d connections, want 2 over 2", calls.Load(), s.ln.total.Load())
	}
}

// When the liveness check cannot tell (the peer closes just after it), the
// idempotent call fails before any reply byte and is made once more on a
// fresh connection. The stale attempt never reached the handler.
func TestStaleConnectionIsRetriedOnceOnAFreshOne(t *testing.T) {
	srvCfg := DefaultConfig()
	srvCfg.SocketTimeout = 100 * time.Millisecond
	var calls atomic.Int32
	b := &testBackend{heartbeat: func(context.Context, *wire.THeartbeatRequest) (*wire.THeartbeatResponse, error) {
		calls.Add(1)
		return &wire.THeartbeatResponse{Status: okStatus(), BeProcessEpoch: 1}, nil
	}}
	s := startBackend(t, b, srvCfg)
	addr := s.Addr().String()
	c := NewThriftBackendClient(DefaultConfig())
	var probed atomic.Int32
	pooled(c).alive = func(*Conn) bool { probed.Add(1); return true } // cannot tell
	for i := range 3 {
		if err := heartbeat(t, c, addr); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the server to close the idle connection", func() bool { return s.ActiveConns() == 0 })
		if want := int64(i + 1); s.ln.total.Load() != want {
			t.Fatalf("call %d: %d connections, want %d", i, s.ln.total.Load(), want)
		}
	}
	if calls.Load() != 3 || probed.Load() != 2 {
		t.Fatalf("handler ran %d times (want 3), %d reuses tried (want 2)", calls.Load(), probed.Load())
	}
}

// A reused connection that times out, or that is answered, is not retried:
// only a stream that failed before any reply byte is.
func TestReusedConnectionTimeoutIsNotRetried(t *testing.T) {
	var calls atomic.Int32
	slow := make(chan struct{})
	defer close(slow)
	b := &testBackend{heartbeat: func(context.Context, *wire.THeartbeatRequest) (*wire.THeartbeatResponse, error) {
		if calls.Add(1) == 2 {
			<-slow
		}
		return &wire.THeartbeatResponse{Status: okStatus(), BeProcessEpoch: 1}, nil
	}}
	s := startBackend(t, b, DefaultConfig())
	addr := s.Addr().String()
	c := NewThriftBackendClient(DefaultConfig())
	if err := heartbeat(t, c, addr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := c.Heartbeat(ctx, addr, &wire.THeartbeatRequest{MasterID: "m"})
	if !errors.Is(err, context.DeadlineExceeded) || NotSent(err) {
		t.Fatalf("err = %v, want a deadline after the send", err)
	}
	if calls.Load() != 2 || s.ln.total.Load() != 1 {
		t.Fatalf("%d handler calls over %d connections, want 2 over 1 (no retry)", calls.Load(), s.ln.total.Load())
	}
	// A done context sends nothing and keeps nothing from being reused.
	done, cancelDone := context.WithCancel(context.Background())
	cancelDone()
	if _, err := c.Inspect(done, addr, &wire.TInspectDatasetRequest{DatasetURI: "/d"}); !NotSent(err) || !errors.Is(err, context.Canceled) {
		t.Fatalf("done context: %v", err)
	}
}

func TestJanitorClosesExpiredIdleConnections(t *testing.T) {
	s := startBackend(t, &testBackend{}, DefaultConfig())
	addr := s.Addr().String()
	c := NewThriftBackendClient(DefaultConfig()).(*thriftBackendClient)
	c.pool = newConnPool(DefaultMaxConnsPerAddr, 50*time.Millisecond)
	if err := heartbeat(t, c, addr); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the janitor to close the idle connection", func() bool {
		return s.ActiveConns() == 0 && c.pool.idleCount(addr) == 0
	})
	c.pool.mu.Lock()
	armed := c.pool.armed
	c.pool.mu.Unlock()
	if armed {
		t.Fatal("the janitor stays armed with nothing idle")
	}
	// And it restarts with the next idle connection.
	if err := heartbeat(t, c, addr); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the janitor to run again", func() bool { return s.ActiveConns() == 0 && c.pool.idleCount(addr) == 0 })
}

func TestAliveSeesPeerCloseAndStrayBytes(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	peers := make(chan net.Conn, 2)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			peers <- c
		}
	}()
	dial := func() (*Conn, net.Conn) {
		c, err := Dial(testCtx(t), ln.Addr().String(), DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		p := <-peers
		t.Cleanup(func() { p.Close() })
		return c, p
	}
	c, peer := dial()
	if !alive(c) {
		t.Fatal("an idle open connection is not alive")
	}
	peer.Close()
	waitFor(t, "the close to arrive", func() bool { return !alive(c) })

	c2, peer2 := dial()
	if _, err := peer2.Write([]byte{1}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the stray byte to arrive", func() bool { return !alive(c2) })
	c2.Close()
	if alive(c2) {
		t.Fatal("a closed connection is alive")
	}
}

// Closing a server with idle keep-alive connections is not an error the
// Thrift library logs.
func TestCloseWithIdleClientsLogsNoError(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&lockedWriter{w: &buf, mu: &mu}, nil)))
	defer slog.SetDefault(prev)
	s, err := NewServer("127.0.0.1:0", wire.NewLanceBackendServiceProcessor(&testBackend{}), DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Serve(); err != nil {
		t.Fatal(err)
	}
	c := NewThriftBackendClient(DefaultConfig())
	if err := heartbeat(t, c, s.Addr().String()); err != nil {
		t.Fatal(err)
	}
	s.Close()
	mu.Lock()
	defer mu.Unlock()
	if buf.Len() > 0 {
		t.Fatalf("closing logged: %s", buf.String())
	}
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// When the stale attempt may have sent its request and the retry cannot
// even connect, the error still says the request may have left.
func TestStaleAttemptKeepsMayHaveLeft(t *testing.T) {
	s, err := NewServer("127.0.0.1:0", wire.NewLanceBackendServiceProcessor(&testBackend{}), DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Serve(); err != nil {
		t.Fatal(err)
	}
	addr := s.Addr().String()
	c := NewThriftBackendClient(DefaultConfig())
	pooled(c).alive = func(*Conn) bool { return true } // cannot tell
	if err := heartbeat(t, c, addr); err != nil {
		t.Fatal(err)
	}
	s.Close() // the pooled connection is now closed by the peer; nobody listens
	err = heartbeat(t, c, addr)
	se := asSendError(t, err)
	if !se.BytesMayHaveLeft || NotSent(err) {
		t.Fatalf("stale attempt then refused dial: %+v, want may have left", se)
	}
	// With nothing pooled, a refused dial is plainly not sent.
	if err := heartbeat(t, c, addr); !NotSent(err) {
		t.Fatalf("refused dial: %v, want not sent", err)
	}
}
