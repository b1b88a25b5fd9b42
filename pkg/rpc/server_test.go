package rpc

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/lancemaster/lancemaster/gen-go/wire"
)

func TestRoundTrip(t *testing.T) {
	var gotTerm int64
	b := &testBackend{heartbeat: func(_ context.Context, r *wire.THeartbeatRequest) (*wire.THeartbeatResponse, error) {
		gotTerm = r.GetLeaderTerm()
		return &wire.THeartbeatResponse{Status: okStatus(), BeProcessEpoch: 7}, nil
	}}
	s := startBackend(t, b, DefaultConfig())
	if s.Addr().(*net.TCPAddr).Port == 0 {
		t.Fatal("Addr has port 0")
	}
	addr := s.Addr().String()
	c := NewThriftBackendClient(DefaultConfig())
	ctx := testCtx(t)

	term := int64(3)
	hb, err := c.Heartbeat(ctx, addr, &wire.THeartbeatRequest{MasterID: "m1", LeaderTerm: &term})
	if err != nil || hb.BeProcessEpoch != 7 || gotTerm != 3 {
		t.Fatalf("heartbeat = %v, %v (term seen %d)", hb, err, gotTerm)
	}
	st, err := c.Submit(ctx, addr, testDispatch("inv-1"))
	if err != nil || st.StatusCode != wire.TStatusCode_OK {
		t.Fatalf("submit = %v, %v", st, err)
	}
	in, err := c.Inspect(ctx, addr, &wire.TInspectDatasetRequest{DatasetURI: "abcd"})
	if err != nil || in.GetDatasetVersion() != 4 {
		t.Fatalf("inspect = %v, %v", in, err)
	}
	q, err := c.Query(ctx, addr, &wire.TQueryInvocationsRequest{InvocationIds: []string{"a", "b"}})
	if err != nil || len(q.Invocations) != 2 {
		t.Fatalf("query = %v, %v", q, err)
	}
	waitFor(t, "connections to close", func() bool { return s.ActiveConns() == 0 })
}

func TestHandlerPanicAnswersInternalErrorAndServerKeepsServing(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	secret := "canary-secret-in-panic"
	b := &testBackend{submit: func(context.Context, *wire.TLanceIndexJobDispatch) (*wire.TStatus, error) {
		panic(secret)
	}}
	s, err := NewServer("127.0.0.1:0", wire.NewLanceBackendServiceProcessor(b), DefaultConfig(), zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Serve(); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := testCtx(t)

	conn, err := Dial(ctx, s.Addr().String(), DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	wc := wire.NewLanceBackendServiceClient(conn.Client())
	_, err = wc.SubmitLanceIndexJob(ctx, testDispatch("inv-1"))
	var ae thrift.TApplicationException
	if !errors.As(err, &ae) || ae.TypeId() != thrift.INTERNAL_ERROR {
		t.Fatalf("err = %v, want TApplicationException INTERNAL_ERROR", err)
	}
	if se := asSendError(t, err); !se.BytesMayHaveLeft || se.Op != methodSubmit {
		t.Fatalf("send error = %+v", se)
	}
	if strings.Contains(err.Error(), secret) {
		t.Fatal("the panic value reached the client")
	}
	// The same connection keeps working, and so does the server.
	if hb, err := wc.Heartbeat(ctx, &wire.THeartbeatRequest{MasterID: "m"}); err != nil || hb.BeProcessEpoch != 42 {
		t.Fatalf("heartbeat after panic on the same connection = %v, %v", hb, err)
	}
	if _, err := NewThriftBackendClient(DefaultConfig()).Heartbeat(ctx, s.Addr().String(), &wire.THeartbeatRequest{MasterID: "m"}); err != nil {
		t.Fatalf("heartbeat on a new connection after panic: %v", err)
	}

	entries := logs.FilterMessageSnippet("panicked").All()
	if len(entries) != 1 {
		t.Fatalf("panic logged %d times, want once", len(entries))
	}
	fields := entries[0].ContextMap()
	if len(fields) != 1 || fields["method"] != methodSubmit {
		t.Fatalf("panic log fields = %v, want only the method", fields)
	}
	for _, e := range logs.All() {
		if strings.Contains(e.Message, secret) || strings.Contains(fmt3(e.ContextMap()), secret) {
			t.Fatal("the panic value was logged")
		}
	}
}

func fmt3(m map[string]any) string {
	var sb strings.Builder
	for k, v := range m {
		sb.WriteString(k)
		if s, ok := v.(string); ok {
			sb.WriteString(s)
		}
	}
	return sb.String()
}

func TestPartialFrameIsClosedAfterSocketTimeout(t *testing.T) {
	cfg := DefaultConfig()
	cfg.SocketTimeout = 150 * time.Millisecond
	s := startBackend(t, &testBackend{}, cfg)

	conn, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// A frame header announcing 100 bytes, followed by only 10 of them.
	frame := binary.BigEndian.AppendUint32(nil, 100)
	frame = append(frame, make([]byte, 10)...)
	start := time.Now()
	if _, err := conn.Write(frame); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the connection to be served", func() bool { return s.ActiveConns() == 1 })

	// Await the server's close: the read ends with EOF (or a reset), not
	// with our own guard deadline.
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = conn.Read(make([]byte, 1))
	var ne net.Error
	if err == nil || (errors.As(err, &ne) && ne.Timeout()) {
		t.Fatalf("read = %v, want the server to close the connection", err)
	}
	// The server may arm its deadline a moment before this test's clock
	// started (as rpctest.ProbeClockSlack says).
	if el := time.Since(start); el < cfg.SocketTimeout-50*time.Millisecond {
		t.Fatalf("closed after %v, before the socket timeout %v", el, cfg.SocketTimeout)
	}
	waitFor(t, "the slot to be released", func() bool { return s.ActiveConns() == 0 })
}

func TestConnectionCapMakesExtraConnectionsWait(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxConns = 2
	s := startBackend(t, &testBackend{}, cfg)
	addr := s.Addr().String()

	// Two connections that made a call and stay open take both served
	// slots (a silent one would only hold a pending slot: flood_test.go).
	held := []*Conn{heldConn(t, addr, cfg), heldConn(t, addr, cfg)}
	waitFor(t, "two served connections", func() bool { return s.ConnStats().Served == 2 })

	// A third client's request arrives but is not served while both
	// slots are taken.
	done := make(chan error, 1)
	go func() {
		_, err := NewThriftBackendClient(cfg).Heartbeat(context.Background(), addr, &wire.THeartbeatRequest{MasterID: "m"})
		done <- err
	}()
	waitFor(t, "the third connection to wait for a slot", func() bool { return s.ConnStats().Waiting == 1 })
	select {
	case err := <-done:
		t.Fatalf("third call finished while the cap was full: %v", err)
	default:
	}
	if st := s.ConnStats(); st.Served != 2 {
		t.Fatalf("served = %d with MaxConns 2", st.Served)
	}

	// Freeing one slot lets it through.
	held[0].Close()
	if err := <-done; err != nil {
		t.Fatalf("third call after a slot freed: %v", err)
	}
	if p := s.ln.adm.peak.Load(); p > 2 {
		t.Fatalf("peak connections = %d, cap is 2", p)
	}
}

// TestHugeContainerHeaderIsRejected sends a 32-byte frame whose list header
// claims 10^8 entries; the server must answer PROTOCOL_ERROR without
// allocating for them, and keep serving.
func TestHugeContainerHeaderIsRejected(t *testing.T) {
	s := startBackend(t, &testBackend{}, DefaultConfig())
	addr := s.Addr().String()

	var msg []byte
	msg = binary.BigEndian.AppendUint32(msg, 0x80010001) // strict binary, CALL
	msg = binary.BigEndian.AppendUint32(msg, uint32(len(methodHeartbeat)))
	msg = append(msg, methodHeartbeat...)
	msg = binary.BigEndian.AppendUint32(msg, 1)           // seqid
	msg = append(msg, byte(thrift.STRUCT), 0, 1)          // args.request
	msg = append(msg, byte(thrift.LIST), 0, 3)            // master_addresses
	msg = append(msg, byte(thrift.STRING))                // element type
	msg = binary.BigEndian.AppendUint32(msg, 100_000_000) // element count
	frame := append(binary.BigEndian.AppendUint32(nil, uint32(len(msg))), msg...)
	if len(msg) != 32 {
		t.Fatalf("frame body is %d bytes", len(msg))
	}

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)

	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write(frame); err != nil {
		t.Fatal(err)
	}
	tconf := DefaultConfig().TConfiguration()
	proto := thrift.NewTBinaryProtocolConf(thrift.NewTFramedTransportConf(thrift.NewTSocketFromConnConf(conn, tconf), tconf), tconf)
	ctx := testCtx(t)
	name, typ, _, err := proto.ReadMessageBegin(ctx)
	if err != nil || name != methodHeartbeat || typ != thrift.EXCEPTION {
		t.Fatalf("reply = %q %v %v, want an exception", name, typ, err)
	}
	x := thrift.NewTApplicationException(0, "")
	if err := x.Read(ctx, proto); err != nil {
		t.Fatal(err)
	}
	if x.TypeId() != thrift.PROTOCOL_ERROR {
		t.Fatalf("exception type %d (%v), want PROTOCOL_ERROR", x.TypeId(), x)
	}
	// The server closes the connection after a protocol error.
	if _, err := conn.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !isReset(err) {
		t.Fatalf("after the error: read = %v, want EOF", err)
	}

	runtime.ReadMemStats(&after)
	if d := after.TotalAlloc - before.TotalAlloc; d > 64<<20 {
		t.Fatalf("server allocated %d MiB for a 32-byte frame", d>>20)
	}
	if _, err := NewThriftBackendClient(DefaultConfig()).Heartbeat(ctx, addr, &wire.THeartbeatRequest{MasterID: "m"}); err != nil {
		t.Fatalf("server stopped serving: %v", err)
	}
}

func isReset(err error) bool {
	return err != nil && strings.Contains(err.Error(), "connection reset")
}

func TestOversizedFrameIsRejected(t *testing.T) {
	s := startBackend(t, &testBackend{}, DefaultConfig())
	conn, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	// An HTTP probe reads as a frame of ~1.2 GB.
	if _, err := conn.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !isReset(err) {
		t.Fatalf("read = %v, want the connection closed", err)
	}
}

func TestCloseEndsIdleConnectionsPromptly(t *testing.T) {
	s, err := NewServer("127.0.0.1:0", wire.NewLanceBackendServiceProcessor(&testBackend{}), DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Serve(); err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	waitFor(t, "the idle connection to be served", func() bool { return s.ActiveConns() == 1 })

	closed := make(chan struct{})
	go func() { s.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second): // the socket timeout is 30 s
		t.Fatal("Close waited for an idle connection")
	}
	if err := s.Serve(); !errors.Is(err, ErrServerClosed) {
		t.Fatalf("Serve after Close = %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	if _, err := net.Dial("tcp", s.Addr().String()); err == nil {
		t.Fatal("listener still accepts after Close")
	}
}

func TestCloseBeforeServe(t *testing.T) {
	s, err := NewServer("127.0.0.1:0", wire.NewLanceBackendServiceProcessor(&testBackend{}), Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// A handler's context ends at the server's SocketTimeout although its client
// is still connected and waiting: with Thrift's per-request hang-up check
// off, a handler that waits on its context (a forwarded write waiting to be
// applied, say) must not wait forever.
func TestHandlerContextEndsAtTheSocketTimeout(t *testing.T) {
	srvCfg := DefaultConfig()
	srvCfg.SocketTimeout = 300 * time.Millisecond
	ended := make(chan error, 1)
	b := &testBackend{heartbeat: func(ctx context.Context, _ *wire.THeartbeatRequest) (*wire.THeartbeatResponse, error) {
		select {
		case <-ctx.Done():
			ended <- ctx.Err()
		case <-time.After(20 * time.Second):
			ended <- errors.New("the handler's context never ended")
		}
		return &wire.THeartbeatResponse{Status: okStatus(), BeProcessEpoch: 1}, nil
	}}
	s := startBackend(t, b, srvCfg)
	cliCfg := DefaultConfig() // the client waits longer than the server's handler may run
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
		defer cancel()
		_, _ = NewThriftBackendClient(cliCfg).Heartbeat(ctx, s.Addr().String(), &wire.THeartbeatRequest{MasterID: "m"})
	}()
	if err := <-ended; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("handler context: %v, want the deadline", err)
	}
}
