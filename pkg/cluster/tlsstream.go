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

// streamLayer is the raft.StreamLayer of both transports (raft's
// NetworkTransport speaks its usual protocol over the connections it
// accepts and dials): over mutual TLS when tls is set, else plaintext TCP.
//
// raft reads an accepted connection without a deadline, so a client that
// connects and stays silent would hold a goroutine and a socket for ever.
// Here every accepted connection must complete its first read — the TLS
// handshake, or the first byte of a plaintext request — within
// firstReadTimeout, or it is closed; after that it is a peer's connection
// (raft pools them idle between requests) and no deadline is kept.
type streamLayer struct {
	ln        net.Listener // raw TCP; wrapped per connection in Accept
	advertise net.Addr
	tls       *RaftTLS // nil: plaintext
	// firstReadTimeout bounds an accepted connection's first read.
	firstReadTimeout time.Duration
}

// newTransport binds bind and returns raft's network transport over TLS
// (t set) or plaintext TCP, advertising advertise. Like
// raft.NewTCPTransport it refuses an unspecified advertise address.
func newTransport(bind string, advertise net.Addr, t *RaftTLS, maxPool int, timeout time.Duration, logger hclog.Logger) (*raft.NetworkTransport, error) {
	if t != nil {
		if err := t.validate(); err != nil {
			return nil, err
		}
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
	stream := &streamLayer{ln: ln, advertise: advertise, tls: t, firstReadTimeout: timeout}
	return raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: stream, MaxPool: maxPool, Timeout: timeout, Logger: logger,
	}), nil
}

// Accept returns the next connection. Its first read (the TLS handshake
// included) runs in the goroutine raft serves it from, bounded by
// firstReadTimeout, so a silent or refused peer never stalls the accept
// loop nor stays connected.
func (s *streamLayer) Accept() (net.Conn, error) {
	c, err := s.ln.Accept()
	if err != nil {
		return nil, err
	}
	if s.tls != nil {
		return &serverConn{Conn: tls.Server(c, s.tls.Server), timeout: s.firstReadTimeout}, nil
	}
	if err := c.SetReadDeadline(time.Now().Add(s.firstReadTimeout)); err != nil {
		c.Close()
		return nil, err
	}
	return &firstReadConn{Conn: c}, nil
}

func (s *streamLayer) Close() error { return s.ln.Close() }

func (s *streamLayer) Addr() net.Addr { return s.advertise }

// Dial connects (and completes the TLS handshake) within timeout.
func (s *streamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	if s.tls == nil {
		return net.DialTimeout("tcp", string(address), timeout)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: timeout}, Config: s.tls.ClientFor(string(address))}
	return d.DialContext(ctx, "tcp", string(address))
}

// firstReadConn is an accepted plaintext connection whose read deadline
// (set at accept) is lifted once its first bytes arrived. raft serves a
// connection from one goroutine, so Read is never concurrent.
type firstReadConn struct {
	net.Conn
	heard bool
}

func (c *firstReadConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && !c.heard {
		c.heard = true
		if derr := c.Conn.SetReadDeadline(time.Time{}); derr != nil && err == nil {
			err = derr
		}
	}
	return n, err
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

var _ raft.StreamLayer = (*streamLayer)(nil)
