package rpc

import (
	"container/list"
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

// cappedListener is the Server's thrift.TServerTransport. It bounds the
// connections it holds with two pools (admission.go): an accepted connection
// takes a pending slot until its first request has arrived whole, within the
// handshake deadline, then a served slot of its caller's class. Accept never
// waits behind unproven connections: when the pending pool is full it closes
// the oldest unproven one. It waits (new connections then stay in the
// kernel's listen backlog) only while every pending slot is held by a proven
// connection waiting for a served slot.
//
// It also tracks live connections so that Close can end them: the stock
// server would otherwise wait for each one to time out.
//
// Concurrency: Accept is called by the server's single accept goroutine;
// shutdown, Interrupt, Close and the stats may be called from any goroutine;
// a connection's Close may be called from its serving goroutine, from
// Accept (eviction) and from shutdown at once.
type cappedListener struct {
	ln        net.Listener
	tconf     *thrift.TConfiguration
	log       *zap.Logger
	adm       *admission
	handshake time.Duration // Config.HandshakeTimeout

	closing chan struct{} // closed by shutdown
	once    sync.Once

	mu     sync.Mutex
	closed bool
	conns  map[*servedConn]struct{}

	total atomic.Int64 // connections ever accepted (tests count dials)
}

// newCappedListener serves ln with cfg's pools and deadlines; classify says
// whether the server verifies client certificates (served slots are then
// reserved by role).
func newCappedListener(ln net.Listener, cfg Config, classify bool, log *zap.Logger) *cappedListener {
	cfg = cfg.withDefaults()
	return &cappedListener{
		ln:        ln,
		tconf:     cfg.TConfiguration(),
		log:       log,
		adm:       newAdmission(cfg, classify),
		handshake: cfg.HandshakeTimeout,
		closing:   make(chan struct{}),
		conns:     make(map[*servedConn]struct{}),
	}
}

// Listen is a no-op: the socket was bound by NewServer so that Addr works
// before Serve.
func (l *cappedListener) Listen() error { return nil }

// Accept waits for a connection and gives it a pending slot (see
// cappedListener). Transient accept errors (EMFILE, ECONNABORTED...) are
// retried with a backoff: returning them would end the stock server's accept
// loop for good.
func (l *cappedListener) Accept() (thrift.TTransport, error) {
	backoff := 5 * time.Millisecond
	for {
		conn, err := l.ln.Accept()
		if err == nil {
			return l.track(conn)
		}
		select {
		case <-l.closing:
			return nil, errListenerClosed
		default:
		}
		if errors.Is(err, net.ErrClosed) {
			return nil, errListenerClosed
		}
		l.log.Warn("rpc: accept failed; retrying", zap.Error(err), zap.Duration("backoff", backoff))
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-l.closing:
			t.Stop()
			return nil, errListenerClosed
		}
		backoff = min(backoff*2, time.Second)
	}
}

// track gives conn a pending slot and registers it, or closes it when
// shutdown already ran. The handshake deadline starts once it has its slot.
func (l *cappedListener) track(conn net.Conn) (thrift.TTransport, error) {
	sc := &servedConn{l: l, peer: newCaller(conn)}
	if !l.adm.enter(sc, l.closing) {
		conn.Close()
		return nil, errListenerClosed
	}
	sc.clamp = newClampConn(conn, time.Now().Add(l.handshake))
	sc.TSocket = thrift.NewTSocketFromConnConf(sc.clamp, l.tconf)
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		l.adm.release(sc)
		conn.Close()
		return nil, errListenerClosed
	}
	l.conns[sc] = struct{}{}
	l.total.Add(1)
	l.mu.Unlock()
	return sc, nil
}

func (l *cappedListener) release(sc *servedConn) {
	l.mu.Lock()
	delete(l.conns, sc)
	l.mu.Unlock()
	l.adm.release(sc)
}

// active returns the number of connections held: pending and served.
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
	l     *cappedListener
	once  sync.Once
	peer  *Caller // who is calling (authz.go)
	clamp *clampConn

	// Read by the serving goroutine only.
	first  firstFrame
	proven bool

	evicted atomic.Bool // closed by Accept to make room (admission.enter)

	// Guarded by l.adm.mu.
	state   connState
	class   connClass
	elem    *list.Element // in adm.unproven or adm.waiters
	granted chan struct{} // closed when a waited-for served slot is given, or on release
}

// Read watches for the first request, and reports the ends the server
// itself causes as the end of the stream: the Thrift server logs any other
// read error at ERROR level, and a flood of silent connections must not
// flood the log. Those ends are a read cut by the server's shutdown (an idle
// keep-alive connection), an unproven connection evicted or timed out at
// the handshake deadline, and a proven one that found no served slot.
func (c *servedConn) Read(p []byte) (int, error) {
	n, err := c.TSocket.Read(p)
	if !c.proven {
		if err != nil {
			if c.evicted.Load() {
				return n, io.EOF
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				c.l.adm.expired.Add(1)
				c.l.log.Debug("rpc: closing a connection that sent no request within the handshake deadline",
					zap.String("peer", c.peer.addr()))
				return n, io.EOF
			}
		} else if c.first.feed(p[:n]) {
			c.proven = true
			c.clamp.lift()
			if ok, timedOut := c.l.adm.prove(c); !ok {
				if timedOut {
					c.l.log.Warn("rpc: no connection slot freed within the socket timeout; closing the connection",
						zap.String("peer", c.peer.addr()), zap.Stringer("class", c.class))
				}
				c.Close()
				return 0, io.EOF
			}
		}
	}
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
