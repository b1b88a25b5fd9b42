package rpc

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/gen-go/wire"
)

// refusedAddr returns a loopback address nobody listens on.
func refusedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestDefaultConfig(t *testing.T) {
	tc := Config{}.TConfiguration()
	d := DefaultConfig()
	if tc.MaxFrameSize != d.MaxFrameSize || tc.MaxMessageSize != d.MaxMessageSize ||
		tc.MaxContainerSize != d.MaxContainerSize || tc.SocketTimeout != 30*time.Second ||
		tc.ConnectTimeout != 3*time.Second || tc.TLSConfig != nil || !*tc.TBinaryStrictRead {
		t.Fatalf("zero Config did not take the defaults: %+v", tc)
	}
	if tc.GetMaxFrameSize() != 512<<10 {
		t.Fatalf("effective frame size %d", tc.GetMaxFrameSize())
	}
	c := Config{SocketTimeout: time.Second, MaxConns: 3}.withDefaults()
	if c.SocketTimeout != time.Second || c.MaxConns != 3 || c.ConnectTimeout != DefaultConnectTimeout {
		t.Fatalf("withDefaults overrode set fields: %+v", c)
	}
}

func TestRefusedDialIsNotSent(t *testing.T) {
	addr := refusedAddr(t)
	_, err := NewThriftBackendClient(DefaultConfig()).Submit(testCtx(t), addr, testDispatch("inv-1"))
	se := asSendError(t, err)
	if se.BytesMayHaveLeft || se.Op != OpDial || se.Addr != addr || !NotSent(err) {
		t.Fatalf("refused dial: %+v", se)
	}
	if !strings.Contains(err.Error(), "request not sent") {
		t.Fatalf("message %q", err)
	}
}

func TestServerClosingMidCallMayHaveSent(t *testing.T) {
	received := make(chan string, 1)
	b := &testBackend{submit: func(_ context.Context, d *wire.TLanceIndexJobDispatch) (*wire.TStatus, error) {
		received <- d.InvocationID
		return nil, thrift.ErrAbandonRequest // close the connection without a reply
	}}
	s := startBackend(t, b, DefaultConfig())
	_, err := NewThriftBackendClient(DefaultConfig()).Submit(testCtx(t), s.Addr().String(), testDispatch("inv-7"))
	se := asSendError(t, err)
	if !se.BytesMayHaveLeft || NotSent(err) || se.Op != methodSubmit {
		t.Fatalf("closed mid-call: %+v", se)
	}
	if got := <-received; got != "inv-7" {
		t.Fatalf("backend received %q", got)
	}
	if IsUnknownMethod(err) {
		t.Fatal("a dropped connection is not UNKNOWN_METHOD")
	}
}

func TestUnknownMethodIsDetectable(t *testing.T) {
	// A master's processor does not know the backend's methods.
	s := startServer(t, adminapi.NewLanceMasterServiceProcessor(nil), DefaultConfig())
	_, err := NewThriftBackendClient(DefaultConfig()).Submit(testCtx(t), s.Addr().String(), testDispatch("inv-1"))
	if !IsUnknownMethod(err) {
		t.Fatalf("err = %v, want UNKNOWN_METHOD", err)
	}
	if se := asSendError(t, err); !se.BytesMayHaveLeft {
		t.Fatalf("UNKNOWN_METHOD is an answer: bytes did leave: %+v", se)
	}
	if IsUnknownMethod(errors.New("x")) || IsUnknownMethod(nil) {
		t.Fatal("IsUnknownMethod on a plain error")
	}
}

func TestContextDeadlineBoundsTheCall(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	b := &testBackend{heartbeat: func(ctx context.Context, _ *wire.THeartbeatRequest) (*wire.THeartbeatResponse, error) {
		<-release
		return nil, errors.New("released")
	}}
	s := startBackend(t, b, DefaultConfig()) // socket timeout 30 s
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := NewThriftBackendClient(DefaultConfig()).Heartbeat(ctx, s.Addr().String(), &wire.THeartbeatRequest{MasterID: "m"})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want DeadlineExceeded", err)
	}
	if se := asSendError(t, err); !se.BytesMayHaveLeft {
		t.Fatalf("timed out after the send: %+v", se)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("call took %v with a 100 ms deadline", el)
	}
}

func TestContextCancelAbortsTheCall(t *testing.T) {
	entered := make(chan struct{})
	release := make(chan struct{})
	defer close(release)
	b := &testBackend{heartbeat: func(context.Context, *wire.THeartbeatRequest) (*wire.THeartbeatResponse, error) {
		close(entered)
		<-release
		return nil, errors.New("released")
	}}
	s := startBackend(t, b, DefaultConfig())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := NewThriftBackendClient(DefaultConfig()).Heartbeat(ctx, s.Addr().String(), &wire.THeartbeatRequest{MasterID: "m"})
		done <- err
	}()
	<-entered
	cancel()
	err := <-done
	if !errors.Is(err, context.Canceled) || NotSent(err) {
		t.Fatalf("err = %v, want Canceled after the send", err)
	}
}

func TestDoneContextAndNilRequestAreNotSent(t *testing.T) {
	s := startBackend(t, &testBackend{}, DefaultConfig())
	c := NewThriftBackendClient(DefaultConfig())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Submit(ctx, s.Addr().String(), testDispatch("i")); !NotSent(err) || !errors.Is(err, context.Canceled) {
		t.Fatalf("done context: %v", err)
	}
	if _, err := c.Submit(testCtx(t), s.Addr().String(), nil); !NotSent(err) || !errors.Is(err, ErrNilRequest) {
		t.Fatalf("nil dispatch: %v", err)
	}
	if NotSent(nil) || NotSent(errors.New("x")) {
		t.Fatal("NotSent must be false for errors that are not SendErrors")
	}
}

func TestConnIsClosedAfterABrokenCall(t *testing.T) {
	b := &testBackend{submit: func(context.Context, *wire.TLanceIndexJobDispatch) (*wire.TStatus, error) {
		return nil, thrift.ErrAbandonRequest
	}}
	s := startBackend(t, b, DefaultConfig())
	ctx := testCtx(t)
	conn, err := Dial(ctx, s.Addr().String(), DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	wc := wire.NewLanceBackendServiceClient(conn.Client())
	if _, err := wc.SubmitLanceIndexJob(ctx, testDispatch("i")); NotSent(err) {
		t.Fatalf("first call: %v", err)
	}
	_, err = wc.Heartbeat(ctx, &wire.THeartbeatRequest{MasterID: "m"})
	if !NotSent(err) {
		t.Fatalf("call on a broken connection = %v, want not sent", err)
	}
	if err := conn.Close(); err != nil {
		t.Fatalf("Close after close = %v", err)
	}
}
