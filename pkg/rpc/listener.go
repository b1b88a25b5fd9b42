package rpc

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"go.uber.org/zap"
)

// errListenerClosed is what Accept returns once the server is closing.
var errListenerClosed = thrift.NewTTransportException(thrift.NOT_OPEN, "rpc: listener closed")

// cappedListener is the Server's thrift.TServerTransport. It caps the
// connections served at once: Accept takes a slot of a semaphore before it
// accepts, and a connection gives its slot back when it is closed. While
// every slot is taken, new connections wait in the kernel's listen backlog
// (their client sees a slow reply, bounded by its own timeouts) instead of
// costing a goroutine, a buffer and a file descriptor each.
//
// It also tracks live connections so that Close can end them: the stock
// server would otherwise wait for each one to time out.
//
// Concurrency: Accept is called by the server's single accept goroutine;
// shutdown, Interrupt, Close and the stats may be called from any goroutine;
// a connection's Close may be called from its serving goroutine and from
// shutdown at once.
type cappedListener struct {
	ln    net.Listener
	tconf *thrift.TConfiguration
	log   *zap.Logger

	slots   chan struct{} // one token per served connection
	closing chan struct{} // closed by shutdown
	once    sync.Once

	mu     sync.Mutex
	closed bool
	conns  map[*servedConn]struct{}

	waiting atomic.Int32 // 1 while Accept waits for a free slot (tests await it)
	peak    atomic.Int32 // most connections ever served at once
	total   atomic.Int64 // connections ever accepted (tests count dials)
}

func newCappedListener(ln net.Listener, tconf *thrift.TConfiguration, maxConns int, log *zap.Logger) *cappedListener {
	return &cappedListener{
		ln:      ln,
		tconf:   tconf,
		log:     log,
		slots:   make(chan struct{}, maxConns),
		closing: make(chan struct{}),
		conns:   make(map[*servedConn]struct{}),
	}
}

// Listen is a no-op: the socket was bound by NewServer so that Addr works
// before Serve.
func (l *cappedListener) Listen() error { return nil }

// Accept waits for a free slot, then for a connection. Transient accept
// errors (EMFILE, ECONNABORTED...) are retried with a backoff: returning
// them would end the stock server's accept loop for good.
func (l *cappedListener) Accept() (thrift.TTransport, error) {
	select {
	case l.slots <- struct{}{}:
	default:
		l.waiting.Store(1)
		select {
		case l.slots <- struct{}{}:
			l.waiting.Store(0)
		case <-l.closing:
			l.waiting.Store(0)
			return nil, errListenerClosed
		}
	}
	backoff := 5 * time.Millisecond
	for {
		conn, err := l.ln.Accept()
		if err == nil {
			return l.track(conn)
		}
		select {
		case <-l.closing:
			<-l.slots
			return nil, errListenerClosed
		default:
		}
		if errors.Is(err, net.ErrClosed) {
			<-l.slots
			return nil, errListenerClosed
		}
		l.log.Warn("rpc: accept failed; retrying", zap.Error(err), zap.Duration("backoff", backoff))
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-l.closing:
			t.Stop()
			<-l.slots
			return nil, errListenerClosed
		}
		backoff = min(backoff*2, time.Second)
	}
}

// track registers conn, or closes it when shutdown already ran.
func (l *cappedListener) track(conn net.Conn) (thrift.TTransport, error) {
	sc := &servedConn{TSocket: thrift.NewTSocketFromConnConf(conn, l.tconf), l: l, peer: newPeer(conn)}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		conn.Close()
		<-l.slots
		return nil, errListenerClosed
	}
	l.conns[sc] = struct{}{}
	l.total.Add(1)
	if n := int32(len(l.conns)); n > l.peak.Load() {
		l.peak.Store(n)
	}
	l.mu.Unlock()
	return sc, nil
}

func (l *cappedListener) release(sc *servedConn) {
	l.mu.Lock()
	delete(l.conns, sc)
	l.mu.Unlock()
	<-l.slots
}

// active returns the number of connections being served.
func (l *cappedListener) active() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

// shutdown stops accepting and closes every live connection, so that the
// goroutines serving them return. It is idempotent.
func (l *cappedListener) shutdown() {
	l.once.Do(func() {
		close(l.closing)
		l.ln.Close()
		l.mu.Lock()
		l.closed = true
		live := make([]*servedConn, 0, len(l.conns))
		for sc := range l.conns {
			live = append(live, sc)
		}
		l.mu.Unlock()
		for _, sc := range live {
			sc.Close()
		}
	})
}

func (l *cappedListener) shuttingDown() bool {
	select {
	case <-l.closing:
		return true
	default:
		return false
	}
}

// Interrupt and Close are called by the Thrift server on Stop.
func (l *cappedListener) Interrupt() error { l.shutdown(); return nil }
func (l *cappedListener) Close() error     { l.shutdown(); return nil }

// servedConn is one accepted connection. Closing it (the server does so
// several times, through each transport layer) gives its slot back once.
type servedConn struct {
	*thrift.TSocket
	l    *cappedListener
	once sync.Once
	w    writeCoalescer // a reply leaves in one write
	peer *Peer          // who is calling (authz.go)
}

func (c *servedConn) Write(p []byte) (int, error) { return c.w.write(p) }

func (c *servedConn) Flush(ctx context.Context) error { return c.w.flush(ctx, c.TSocket) }

// Read reports a read cut by the server's own shutdown as the end of the
// stream: the Thrift server logs any other read error at ERROR level, and
// closing an idle keep-alive connection on shutdown is no error.
func (c *servedConn) Read(p []byte) (int, error) {
	n, err := c.TSocket.Read(p)
	if err != nil && errors.Is(err, net.ErrClosed) && c.l.shuttingDown() {
		return n, io.EOF
	}
	return n, err
}

func (c *servedConn) Close() error {
	var err error
	c.once.Do(func() {
		err = c.TSocket.Close()
		c.l.release(c)
	})
	return err
}

var _ thrift.TServerTransport = (*cappedListener)(nil)
