package rpc

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"

	"github.com/apache/thrift/lib/go/thrift"
	"go.uber.org/zap"
)

// The generated processors start, for every request, a goroutine with a
// 5 ms ticker that peeks at the connection (a syscall per tick) so that the
// handler's context ends when the client hangs up. At a few hundred
// requests in flight that cost a noticeable share of a master's CPU in the
// admission benchmark (docs/benchmarks.md), so it is off; instead every
// handler's context ends at the server's SocketTimeout (deadlineMiddleware),
// after which no client is still reading the reply. It is a library global:
// the process serves only through this package.
func init() { thrift.ServerConnectivityCheckInterval = 0 }

// ErrServerClosed is returned by Serve after Close.
var ErrServerClosed = errors.New("rpc: server closed")

// Server serves one Thrift processor over framed transport and binary
// protocol, hardened as docs/rpc.md describes: limits and timeouts from one
// Config (SocketTimeout set in the server's own TConfiguration, so a stalled
// peer is closed), a recover middleware, and two pools of connection slots
// (admission.go): a connection is held as pending, under a short handshake
// deadline, until its first request has arrived, then served in one of
// Config.MaxConns slots, some reserved for masters and backends under
// mutual TLS. Each connection is read by its own goroutine; its requests
// are served concurrently, up to MaxRequestsPerConn at once, and each reply
// carries its request's sequence id (pipeline.go).
//
// Concurrency: all methods are safe to call from any goroutine. The
// processor's handler is called concurrently, also for one connection.
type Server struct {
	log *zap.Logger
	ln  *cappedListener
	srv *thrift.TSimpleServer
	pl  *pipeline // the requests in flight (pipeline.go)

	mu      sync.Mutex
	started bool
	closed  bool
	done    chan struct{} // closed when the accept loop has returned
}

// NewServer binds addr (use "127.0.0.1:0" for an ephemeral port; Addr tells
// which) and prepares to serve processor. It does not accept connections
// until Serve. The processor is wrapped in place with the recover middleware
// and, given WithPolicy and a TLS config that verifies client certificates,
// the authorization middleware (authz.go). A nil log discards logs.
func NewServer(addr string, processor thrift.TProcessor, cfg Config, log *zap.Logger, opts ...ServerOption) (*Server, error) {
	if processor == nil {
		return nil, errors.New("rpc: NewServer: nil processor")
	}
	if log == nil {
		log = zap.NewNop()
	}
	var o serverOptions
	for _, opt := range opts {
		opt(&o)
	}
	cfg = cfg.withDefaults()
	tconf := cfg.TConfiguration()
	serverTLS := cfg.serverTLS()
	if o.policy != nil {
		if err := o.policy.check(processor); err != nil {
			return nil, err
		}
		if verifiesClientCerts(serverTLS) {
			processor = thrift.WrapProcessor(processor, authzMiddleware(o.policy, log))
		} else {
			log.Warn("rpc: no mutual TLS: every caller may call every method (plaintext is for loopback demos only)",
				zap.String("addr", addr), zap.String("service", o.policy.service))
		}
	}

	raw, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("rpc: listen on %s: %w", addr, err)
	}
	var ln net.Listener = raw
	if serverTLS != nil {
		// The handshake runs on the connection's first read, in its own
		// goroutine, bounded by the handshake deadline (admission.go): a
		// silent client cannot stall the accept loop, nor hold a slot
		// past that deadline.
		ln = tls.NewListener(raw, serverTLS)
	}
	cl := newCappedListener(ln, cfg, verifiesClientCerts(serverTLS), log)
	// Each connection's processor carries its Caller into the requests'
	// contexts (authz.go).
	pl := newPipeline(tconf, log)
	srv := thrift.NewTSimpleServerFactory4(
		connProcessorFactory{p: thrift.WrapProcessor(processor, recoverMiddleware(log), deadlineMiddleware(cfg.SocketTimeout)), pl: pl},
		cl,
		thrift.NewTFramedTransportFactoryConf(thrift.NewTTransportFactory(), tconf),
		thrift.NewTBinaryProtocolFactoryConf(tconf),
	)
	// Without a log context, the first connection error in the accept loop
	// dereferences nil (toolchain notes, pitfall 2).
	srv.SetLogContext(context.Background())
	return &Server{log: log, ln: cl, srv: srv, pl: pl, done: make(chan struct{})}, nil
}

// Addr returns the bound address, with the real port when addr had port 0.
func (s *Server) Addr() net.Addr { return s.ln.ln.Addr() }

// ActiveConns returns the number of connections held now, pending and
// served.
func (s *Server) ActiveConns() int { return s.ln.active() }

// ConnStats describes the connections by pool, and counts the ones closed
// before their first request or for want of a slot.
func (s *Server) ConnStats() ConnStats { return s.ln.adm.stats() }

// Serve starts accepting connections in the background and returns at once.
// It fails when called twice or after Close.
func (s *Server) Serve() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrServerClosed
	}
	if s.started {
		return errors.New("rpc: Serve called twice")
	}
	s.started = true
	go func() {
		defer close(s.done)
		if err := s.srv.AcceptLoop(); err != nil && !s.isClosed() {
			s.log.Error("rpc: accept loop ended", zap.String("addr", s.Addr().String()), zap.Error(err))
		}
	}()
	s.log.Info("rpc: serving", zap.String("addr", s.Addr().String()))
	return nil
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Close stops accepting, closes every connection (a request in flight gets
// no reply; its handler's context is cancelled) and waits until every
// connection goroutine and every goroutine that ran requests has returned.
// It is idempotent.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	started := s.started
	s.mu.Unlock()

	if !started {
		s.ln.shutdown()
		s.pl.cancel()
		return nil
	}
	// The connections close first, so that no handler cut short by its
	// context can still answer; then the handlers' contexts end. Stop marks
	// the server closed, interrupts the listener (already shut) and waits
	// for the connections' goroutines; the handlers still running are
	// waited for next, and the goroutines that ran them last.
	s.ln.shutdown()
	s.pl.cancel()
	s.srv.Stop()
	<-s.done
	s.pl.wg.Wait()
	s.pl.workers.close()
	return nil
}
