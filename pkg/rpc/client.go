package rpc

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/pkg/certs"
)

// Conn is one client connection: framed transport and binary protocol over
// TCP (TLS when Config.TLS is set), with Config's limits and timeouts.
//
// Build a generated client on it with Client(), for example
// wire.NewLanceBackendServiceClient(conn.Client()). Every call made through
// Client():
//   - is bounded by the context's deadline as well as by SocketTimeout (the
//     earlier wins), and is aborted when the context is cancelled;
//   - fails with a *SendError that says whether bytes of the request may
//     have left (see SendError).
//
// After a call fails on a broken stream (anything but an answer from the
// peer), the connection is closed and later calls fail as not sent.
//
// Concurrency: a Conn is NOT safe for concurrent use; make one call at a time.
// Close may be called from any goroutine, also during a call, to abort it.
type Conn struct {
	addr   string
	raw    *deadlineConn
	trans  *thrift.TFramedTransport
	proto  thrift.TProtocol
	client thrift.TClient
}

// Dial connects to addr within Config.ConnectTimeout and ctx. A failure is a
// *SendError with Op OpDial and BytesMayHaveLeft false. With Config.Certs,
// the server may carry any role; DialRole names the one it must carry.
func Dial(ctx context.Context, addr string, cfg Config) (*Conn, error) {
	return dial(ctx, addr, cfg)
}

// DialRole is Dial, and with Config.Certs the server's certificate must
// carry role (a backend reports to masters only): another role fails the
// handshake, before any request byte, as a dial error. Without Certs it is
// Dial.
func DialRole(ctx context.Context, addr string, cfg Config, role certs.Role) (*Conn, error) {
	return dial(ctx, addr, cfg, role)
}

func dial(ctx context.Context, addr string, cfg Config, serverRoles ...certs.Role) (*Conn, error) {
	cfg = cfg.withDefaults()
	nc, err := dialNet(ctx, addr, cfg, serverRoles...)
	if err != nil {
		return nil, err
	}
	tconf := cfg.TConfiguration()
	dc := &deadlineConn{Conn: nc}
	trans := thrift.NewTFramedTransportConf(&coalescedTransport{TTransport: thrift.NewTSocketFromConnConf(dc, tconf)}, tconf)
	proto := thrift.NewTBinaryProtocolConf(trans, tconf)
	c := &Conn{addr: addr, raw: dc, trans: trans, proto: proto}
	c.client = &classifyingClient{conn: c, next: thrift.NewTStandardClient(proto, proto)}
	return c, nil
}

// dialNet connects to addr within cfg.ConnectTimeout and ctx, TLS handshake
// included (cfg has its defaults). A failure is a *SendError with Op OpDial
// and BytesMayHaveLeft false.
func dialNet(ctx context.Context, addr string, cfg Config, serverRoles ...certs.Role) (net.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, &SendError{Op: OpDial, Addr: addr, Err: err}
	}
	nd := &net.Dialer{Timeout: cfg.ConnectTimeout}
	var (
		nc  net.Conn
		err error
	)
	if tc := cfg.clientTLS(addr, serverRoles...); tc != nil {
		// The handshake is part of the dial: no request byte is written
		// before it completes.
		nc, err = (&tls.Dialer{NetDialer: nd, Config: tc}).DialContext(ctx, "tcp", addr)
	} else {
		nc, err = nd.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return nil, &SendError{Op: OpDial, Addr: addr, Err: err}
	}
	return nc, nil
}

// Addr returns the address dialled.
func (c *Conn) Addr() string { return c.addr }

// Client returns the TClient to build generated clients on.
func (c *Conn) Client() thrift.TClient { return c.client }

// Protocol returns the framed/binary protocol of the connection, used for
// both directions. Calls made on it directly bypass the context handling and
// the error classification of Client().
func (c *Conn) Protocol() thrift.TProtocol { return c.proto }

// Close closes the connection. It is idempotent.
func (c *Conn) Close() error {
	if err := c.raw.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}

// classifyingClient applies the call's context to the connection and turns
// every failure into a *SendError.
type classifyingClient struct {
	conn *Conn
	next thrift.TClient
}

func (c *classifyingClient) Call(ctx context.Context, method string, args, result thrift.TStruct) (thrift.ResponseMeta, error) {
	dc := c.conn.raw
	if err := ctx.Err(); err != nil {
		return thrift.ResponseMeta{}, &SendError{Op: method, Addr: c.conn.addr, Err: err}
	}
	if dc.isClosed() {
		return thrift.ResponseMeta{}, &SendError{Op: method, Addr: c.conn.addr, Err: net.ErrClosed}
	}
	before := dc.written.Load()
	limit, _ := ctx.Deadline()
	dc.setLimit(limit)
	stop := context.AfterFunc(ctx, dc.abort)

	meta, err := c.next.Call(ctx, method, args, result)

	if !stop() {
		// The context ended during the call: the connection's deadline is
		// in the past for good.
		defer dc.Close()
	}
	dc.setLimit(time.Time{})
	if err == nil {
		return meta, nil
	}
	sent := dc.written.Load() > before
	if !isApplicationException(err) {
		// The stream may be out of step (half a frame read or written):
		// never reuse it.
		dc.Close()
	}
	if cerr := ctx.Err(); cerr != nil {
		err = fmt.Errorf("%w: %w", cerr, err)
	}
	return meta, &SendError{Op: method, Addr: c.conn.addr, BytesMayHaveLeft: sent, Err: err}
}

// deadlineConn counts the bytes handed to the network and clamps every
// deadline Thrift sets (now + SocketTimeout before each read and write) to
// the current call's context deadline; abort moves the deadline into the
// past so a blocked read or write returns at once.
type deadlineConn struct {
	net.Conn
	written atomic.Int64

	mu      sync.Mutex
	limit   time.Time // zero: none
	aborted bool
	closed  atomic.Bool
}

var pastDeadline = time.Unix(1, 0)

func (d *deadlineConn) Write(p []byte) (int, error) {
	n, err := d.Conn.Write(p)
	d.written.Add(int64(n))
	return n, err
}

func (d *deadlineConn) clamp(t time.Time) time.Time {
	if d.aborted {
		return pastDeadline
	}
	if !d.limit.IsZero() && (t.IsZero() || d.limit.Before(t)) {
		return d.limit
	}
	return t
}

func (d *deadlineConn) SetDeadline(t time.Time) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.Conn.SetDeadline(d.clamp(t))
}

func (d *deadlineConn) SetReadDeadline(t time.Time) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.Conn.SetReadDeadline(d.clamp(t))
}

func (d *deadlineConn) SetWriteDeadline(t time.Time) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.Conn.SetWriteDeadline(d.clamp(t))
}

func (d *deadlineConn) setLimit(t time.Time) {
	d.mu.Lock()
	d.limit = t
	d.mu.Unlock()
}

// abort fails the current and every later read and write of the connection.
func (d *deadlineConn) abort() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.aborted = true
	d.Conn.SetDeadline(pastDeadline)
}

func (d *deadlineConn) Close() error {
	if !d.closed.CompareAndSwap(false, true) {
		return net.ErrClosed
	}
	return d.Conn.Close()
}

func (d *deadlineConn) isClosed() bool { return d.closed.Load() }
