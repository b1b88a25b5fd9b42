package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// RaftTLS runs the Raft transport over mutual TLS (docs/rpc.md). pkg/master
// builds it from the node's certificates (rpc.Certs): both sides present a
// certificate from the cluster's CA, and each refuses a peer whose
// certificate does not carry the master role, so a backend's or an
// operator's certificate cannot join the Raft traffic.
type RaftTLS struct {
	// Server configures the listener. It must require and verify client
	// certificates.
	Server *tls.Config
	// ClientFor returns the config to dial a peer's raft address with (it
	// verifies the peer's certificate against the address).
	ClientFor func(addr string) *tls.Config
}

func (t *RaftTLS) validate() error {
	if t.Server == nil || t.ClientFor == nil {
		return errors.New("raft TLS needs a server config and a client config")
	}
	if t.Server.ClientAuth != tls.RequireAndVerifyClientCert {
		return errors.New("raft TLS must require and verify client certificates")
	}
	return nil
}

// tlsStreamLayer is a raft.StreamLayer over TLS: raft.NewNetworkTransport
// speaks its usual protocol over the connections it accepts and dials.
type tlsStreamLayer struct {
	ln        net.Listener // raw TCP; wrapped per connection in Accept
	advertise net.Addr
	cfg       *RaftTLS
	// handshakeTimeout bounds a server-side handshake (raft reads an
	// accepted connection without a deadline).
	handshakeTimeout time.Duration
}

// newTLSTransport binds bind and returns raft's network transport over TLS,
// advertising advertise. Like raft.NewTCPTransport it refuses an
// unspecified advertise address.
func newTLSTransport(bind string, advertise net.Addr, t *RaftTLS, maxPool int, timeout time.Duration, logger hclog.Logger) (*raft.NetworkTransport, error) {
	if err := t.validate(); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, err
	}
	if advertise == nil {
		advertise = ln.Addr()
	}
	if a, ok := advertise.(*net.TCPAddr); !ok || a.IP == nil || a.IP.IsUnspecified() {
		ln.Close()
		return nil, fmt.Errorf("local bind address is not advertisable: %v", advertise)
	}
	stream := &tlsStreamLayer{ln: ln, advertise: advertise, cfg: t, handshakeTimeout: timeout}
	return raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: stream, MaxPool: maxPool, Timeout: timeout, Logger: logger,
	}), nil
}

// Accept returns the next connection; its TLS handshake runs on its first
// read or write, in the goroutine raft serves it from, bounded by
// handshakeTimeout, so a silent or refused peer never stalls the accept
// loop.
func (s *tlsStreamLayer) Accept() (net.Conn, error) {
	c, err := s.ln.Accept()
	if err != nil {
		return nil, err
	}
	return &serverConn{Conn: tls.Server(c, s.cfg.Server), timeout: s.handshakeTimeout}, nil
}

func (s *tlsStreamLayer) Close() error { return s.ln.Close() }

func (s *tlsStreamLayer) Addr() net.Addr { return s.advertise }

// Dial connects and completes the handshake within timeout.
func (s *tlsStreamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: timeout}, Config: s.cfg.ClientFor(string(address))}
	return d.DialContext(ctx, "tcp", string(address))
}

// serverConn handshakes once, on first use, within timeout.
type serverConn struct {
	*tls.Conn
	timeout time.Duration
	once    sync.Once
	err     error
}

func (c *serverConn) handshake() error {
	c.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
		defer cancel()
		c.err = c.Conn.HandshakeContext(ctx)
	})
	return c.err
}

func (c *serverConn) Read(p []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Read(p)
}

func (c *serverConn) Write(p []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}

var _ raft.StreamLayer = (*tlsStreamLayer)(nil)
