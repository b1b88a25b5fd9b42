package rpc

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/certs"
)

func heartbeat(t *testing.T, c BackendClient, addr string) error {
	t.Helper()
	_, err := c.Heartbeat(testCtx(t), addr, &wire.THeartbeatRequest{MasterID: "m"})
	return err
}

// Inspect, Heartbeat and Query share one connection; Submit always dials
// its own and closes it.
func TestReadsShareOneConnection(t *testing.T) {
	s := startBackend(t, &testBackend{}, DefaultConfig())
	addr := s.Addr().String()
	c := NewThriftBackendClient(DefaultConfig())
	ctx := testCtx(t)
	var wg sync.WaitGroup
	for i := range 30 {
		wg.Go(func() {
			var err error
			switch i % 3 {
			case 0:
				_, err = c.Inspect(ctx, addr, &wire.TInspectDatasetRequest{DatasetURI: "/d"})
			case 1:
				_, err = c.Heartbeat(ctx, addr, &wire.THeartbeatRequest{MasterID: "m"})
			case 2:
				_, err = c.Query(ctx, addr, &wire.TQueryInvocationsRequest{InvocationIds: []string{"a"}})
			}
			if err != nil {
				t.Errorf("call %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if n := s.ln.total.Load(); n != 1 {
		t.Fatalf("%d connections for 30 concurrent reads, want 1", n)
	}
	for i := range 3 {
		if _, err := c.Submit(ctx, addr, testDispatch("inv")); err != nil {
			t.Fatalf("submit %d: %v", i, err)
		}
	}
	if n := s.ln.total.Load(); n != 4 {
		t.Fatalf("%d connections after 3 submits, want 1 + 3 (a submit never shares)", n)
	}
	waitFor(t, "the submits' connections to close", func() bool { return s.ActiveConns() == 1 })
}

// Concurrent inspects to one address are bounded by DefaultMaxCallsPerAddr:
// the rest wait for a slot (within their context), all on the one
// connection. A heartbeat never waits: with every slot held it still gets
// through.
func TestReadsInFlightPerAddressAreBounded(t *testing.T) {
	const limit = DefaultMaxCallsPerAddr
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
	// One more inspect with a short deadline gives up waiting for a slot:
	// nothing was sent.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := inspect(ctx)
	if se := asSendError(t, err); se.BytesMayHaveLeft || !NotSent(err) {
		t.Fatalf("an inspect past the limit: %+v, want not sent", se)
	}
	if got := entered.Load(); got != limit {
		t.Fatalf("%d inspects in the handler, want %d", got, limit)
	}
	// Liveness does not queue behind admissions.
	if err := heartbeat(t, c, addr); err != nil {
		t.Fatalf("a heartbeat with every inspect slot held: %v", err)
	}
	open()
	wg.Wait()
	tc := c.(*thriftBackendClient)
	if entered.Load() != n || s.ln.total.Load() != 1 || tc.slots.inUse(addr) != 0 {
		t.Fatalf("%d inspects over %d connections, %d slots still taken; want %d over 1, none taken",
			entered.Load(), s.ln.total.Load(), tc.slots.inUse(addr), n)
	}
}

// An answer (an exception here) or a call's own deadline fails that call
// alone: it is not retried, and the connection keeps serving.
func TestAnswersAndDeadlinesKeepTheConnection(t *testing.T) {
	var calls atomic.Int32
	slow := make(chan struct{})
	defer close(slow)
	b := &testBackend{heartbeat: func(context.Context, *wire.THeartbeatRequest) (*wire.THeartbeatResponse, error) {
		switch calls.Add(1) {
		case 2:
			return nil, errors.New("handler failed")
		case 3:
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
	err := heartbeat(t, c, addr)
	if se := asSendError(t, err); !se.BytesMayHaveLeft || !isApplicationException(err) {
		t.Fatalf("exception answer: %+v, want an answer after the send", se)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = c.Heartbeat(ctx, addr, &wire.THeartbeatRequest{MasterID: "m"})
	if !errors.Is(err, context.DeadlineExceeded) || NotSent(err) {
		t.Fatalf("err = %v, want a deadline after the send", err)
	}
	if err := heartbeat(t, c, addr); err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 4 || s.ln.total.Load() != 1 {
		t.Fatalf("%d handler calls over %d connections, want 4 over 1 (no retry, no new connection)", calls.Load(), s.ln.total.Load())
	}
	// A done context sends nothing.
	done, cancelDone := context.WithCancel(context.Background())
	cancelDone()
	if _, err := c.Inspect(done, addr, &wire.TInspectDatasetRequest{DatasetURI: "/d"}); !NotSent(err) || !errors.Is(err, context.Canceled) {
		t.Fatalf("done context: %v", err)
	}
}

// A connection that was open before the call and breaks under it before
// any reply arrived (the server closed it: here by abandoning the request)
// is replaced, and the read made once more on the fresh connection, and no
// more. The next call dials again.
func TestBrokenConnectionIsRetriedOnceOnAFreshOne(t *testing.T) {
	var abandon atomic.Bool
	var calls atomic.Int32
	b := &testBackend{heartbeat: func(context.Context, *wire.THeartbeatRequest) (*wire.THeartbeatResponse, error) {
		calls.Add(1)
		if abandon.Load() {
			return nil, thrift.ErrAbandonRequest
		}
		return &wire.THeartbeatResponse{Status: okStatus(), BeProcessEpoch: 1}, nil
	}}
	s := startBackend(t, b, DefaultConfig())
	addr := s.Addr().String()
	c := NewThriftBackendClient(DefaultConfig())
	if err := heartbeat(t, c, addr); err != nil {
		t.Fatal(err)
	}
	abandon.Store(true)
	err := heartbeat(t, c, addr)
	if se := asSendError(t, err); !se.BytesMayHaveLeft {
		t.Fatalf("abandoned: %+v, want may have left", se)
	}
	if calls.Load() != 3 || s.ln.total.Load() != 2 {
		t.Fatalf("%d handler calls over %d connections; want 3 over 2 (one retry, on a fresh connection)", calls.Load(), s.ln.total.Load())
	}
	abandon.Store(false)
	if err := heartbeat(t, c, addr); err != nil {
		t.Fatal(err)
	}
	if s.ln.total.Load() != 3 {
		t.Fatalf("%d connections, want 3: a broken connection is not reused", s.ln.total.Load())
	}
}

// A connection the server closed while it sat idle is noticed by the
// client's reader: the next call goes out on a fresh one, at once.
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
	c := NewThriftBackendClient(DefaultConfig()).(*thriftBackendClient)
	if err := heartbeat(t, c, addr); err != nil {
		t.Fatal(err)
	}
	conn, fresh, err := c.mux.Get(testCtx(t), addr)
	if err != nil || fresh {
		t.Fatalf("get: fresh %v, %v; want the open connection", fresh, err)
	}
	waitFor(t, "the client to see the server close the idle connection", func() bool { return conn.Err() != nil })
	if err := heartbeat(t, c, addr); err != nil {
		t.Fatalf("call after the server closed the idle connection: %v", err)
	}
	if calls.Load() != 2 || s.ln.total.Load() != 2 {
		t.Fatalf("%d calls over %d connections, want 2 over 2", calls.Load(), s.ln.total.Load())
	}
}

func TestJanitorClosesIdleConnections(t *testing.T) {
	s := startBackend(t, &testBackend{}, DefaultConfig())
	addr := s.Addr().String()
	c := NewThriftBackendClient(DefaultConfig()).(*thriftBackendClient)
	c.mux = newMuxPool(c.cfg, 50*time.Millisecond, certs.RoleBackend)
	armed := func() bool {
		c.mux.mu.Lock()
		defer c.mux.mu.Unlock()
		return c.mux.armed
	}
	if err := heartbeat(t, c, addr); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the janitor to close the idle connection and stop", func() bool { return s.ActiveConns() == 0 && !armed() })
	// And it restarts with the next connection.
	if err := heartbeat(t, c, addr); err != nil {
		t.Fatal(err)
	}
	if s.ln.total.Load() != 2 {
		t.Fatalf("%d connections, want 2", s.ln.total.Load())
	}
	waitFor(t, "the janitor to run again", func() bool { return s.ActiveConns() == 0 && !armed() })
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

// When the broken attempt may have sent its request and the retry cannot
// even connect, the error still says the request may have left.
func TestBrokenAttemptKeepsMayHaveLeft(t *testing.T) {
	var s *Server
	var abandon atomic.Bool
	b := &testBackend{heartbeat: func(context.Context, *wire.THeartbeatRequest) (*wire.THeartbeatResponse, error) {
		if abandon.Load() {
			s.ln.ln.Close() // nobody listens any more: the retry's dial is refused
			return nil, thrift.ErrAbandonRequest
		}
		return &wire.THeartbeatResponse{Status: okStatus(), BeProcessEpoch: 1}, nil
	}}
	s = startBackend(t, b, DefaultConfig())
	addr := s.Addr().String()
	c := NewThriftBackendClient(DefaultConfig())
	if err := heartbeat(t, c, addr); err != nil {
		t.Fatal(err)
	}
	abandon.Store(true)
	err := heartbeat(t, c, addr)
	se := asSendError(t, err)
	if !se.BytesMayHaveLeft || NotSent(err) {
		t.Fatalf("broken attempt then refused dial: %+v, want may have left", se)
	}
	// With no connection open, a refused dial is plainly not sent.
	if err := heartbeat(t, c, addr); !NotSent(err) {
		t.Fatalf("refused dial: %v, want not sent", err)
	}
}
