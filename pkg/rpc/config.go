package rpc

import (
	"crypto/tls"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
)

// Default limits and timeouts. They are the values of DefaultConfig and the
// value any zero field of a Config takes.
const (
	// DefaultMaxFrameSize is the largest frame read: DESIGN.md §10 bounds a
	// frame to 512 KiB. The largest legitimate request, a dispatch with 64
	// storage options of 256 B keys and 4096 B values, is about 280 KB.
	DefaultMaxFrameSize = 512 << 10
	// DefaultMaxMessageSize bounds any single string, binary or container
	// read. Thrift applies the smaller of it and MaxFrameSize to frames.
	DefaultMaxMessageSize = 1 << 20
	// DefaultMaxContainerSize bounds the element count of one list, set or
	// map. Our largest legitimate container is a page of listJobs (at most
	// 10,000 views), and the frame bound is tighter for most containers anyway.
	DefaultMaxContainerSize = 1 << 16
	// DefaultSocketTimeout bounds every read and write: a peer that stalls
	// mid-frame, or a server connection idle between requests, is closed
	// after it.
	DefaultSocketTimeout = 30 * time.Second
	// DefaultConnectTimeout bounds a client's TCP connect (and TLS handshake).
	DefaultConnectTimeout = 3 * time.Second
	// DefaultMaxConns caps the connections a Server serves at once (its
	// served slots, admission.go); a proven connection beyond them waits
	// for one, up to the socket timeout.
	DefaultMaxConns = 256
	// DefaultHandshakeTimeout bounds the time from accept until the first
	// request has arrived whole (the TLS handshake included): a connection
	// that has not sent one by then is closed.
	DefaultHandshakeTimeout = 5 * time.Second
	// DefaultMaxPendingConns caps the accepted connections whose first
	// request has not arrived yet; when they are all taken, the oldest
	// unproven one is closed to make room.
	DefaultMaxPendingConns = 1024
)

// Config is the one Thrift configuration of the process: every listener and
// every client is built from it, so limits and timeouts cannot drift between
// the transport, the protocol and the socket. A zero (or negative) field takes
// its DefaultConfig value; there is no way to switch a limit or a timeout off.
//
// A Config is a value; copy it freely. The TLS config it points to must not
// be modified once the Config is in use.
type Config struct {
	// MaxFrameSize bounds the size of one frame (one request or reply).
	MaxFrameSize int32
	// MaxMessageSize bounds one string, binary or container read.
	MaxMessageSize int32
	// MaxContainerSize bounds the element count of one list, set or map.
	MaxContainerSize int32
	// SocketTimeout bounds every read and write on a connection, on both
	// sides. On a server it also closes connections idle between requests;
	// on a client it bounds the wait for a reply (a shorter context deadline
	// wins).
	SocketTimeout time.Duration
	// ConnectTimeout bounds a client's connect (and TLS handshake).
	ConnectTimeout time.Duration
	// MaxConns caps the connections a Server serves at once (served slots).
	MaxConns int
	// HandshakeTimeout bounds, on a server, the time from accept until the
	// connection's first request has arrived whole, TLS handshake included
	// (the shorter of it and SocketTimeout applies). Until then the
	// connection holds a pending slot, not a served one.
	HandshakeTimeout time.Duration
	// MaxPendingConns caps a Server's connections whose first request has
	// not arrived; when all are taken, the oldest unproven one is closed.
	MaxPendingConns int
	// ReservedConns is, on a server that verifies client certificates, the
	// number of served slots reserved for the master role and, as many
	// again, for the backend role: operators and callers without a valid
	// role share the remaining MaxConns - 2*ReservedConns. The default is
	// MaxConns/4; it is lowered so that at least one slot is shared.
	// Without client certificates nothing is reserved.
	ReservedConns int
	// TLS, when set, is used by servers (certificates, client CAs) and
	// clients (root CAs, client certificate). Nil means plaintext. It is the
	// low-level form (tests): no roles are checked, and servers authorize
	// calls only if it requires and verifies client certificates.
	TLS *tls.Config
	// Certs, when set, is mutual TLS from certificate files (TLSFiles.Load,
	// tls.go): TLS 1.3, client certificates required, files re-read when
	// they change, the server's role checked by clients, and calls
	// authorized per method by servers given a Policy (authz.go). It takes
	// precedence over TLS.
	Certs *Certs
	// TLSServerName, when set, is the name a client checks the server's
	// certificate against instead of the dialled address's host (the CLI's
	// --tls-server-name: masters reached by IP behind a certificate that
	// names them by DNS). Clients only.
	TLSServerName string
}

// DefaultConfig returns the production defaults: frame 512 KiB (DESIGN.md
// §10), message 1 MiB, 65,536 container elements, socket timeout 30 s,
// connect timeout 3 s, 256 served connections (64 reserved for masters and
// 64 for backends under mutual TLS), 1,024 pending connections, handshake
// timeout 5 s, plaintext.
func DefaultConfig() Config {
	return Config{
		MaxFrameSize:     DefaultMaxFrameSize,
		MaxMessageSize:   DefaultMaxMessageSize,
		MaxContainerSize: DefaultMaxContainerSize,
		SocketTimeout:    DefaultSocketTimeout,
		ConnectTimeout:   DefaultConnectTimeout,
		MaxConns:         DefaultMaxConns,
		HandshakeTimeout: DefaultHandshakeTimeout,
		MaxPendingConns:  DefaultMaxPendingConns,
		ReservedConns:    DefaultMaxConns / 4,
	}
}

// withDefaults returns c with every zero or negative field replaced by its
// default.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.MaxFrameSize <= 0 {
		c.MaxFrameSize = d.MaxFrameSize
	}
	if c.MaxMessageSize <= 0 {
		c.MaxMessageSize = d.MaxMessageSize
	}
	if c.MaxContainerSize <= 0 {
		c.MaxContainerSize = d.MaxContainerSize
	}
	if c.SocketTimeout <= 0 {
		c.SocketTimeout = d.SocketTimeout
	}
	if c.ConnectTimeout <= 0 {
		c.ConnectTimeout = d.ConnectTimeout
	}
	if c.MaxConns <= 0 {
		c.MaxConns = d.MaxConns
	}
	if c.HandshakeTimeout <= 0 {
		c.HandshakeTimeout = d.HandshakeTimeout
	}
	if c.MaxPendingConns <= 0 {
		c.MaxPendingConns = d.MaxPendingConns
	}
	if c.ReservedConns <= 0 {
		c.ReservedConns = c.MaxConns / 4
	}
	// At least one served slot stays shared by operators and the rest.
	c.ReservedConns = min(c.ReservedConns, (c.MaxConns-1)/2)
	return c
}

// TConfiguration returns a fresh thrift.TConfiguration carrying every limit
// and timeout of c (defaults filled in). Pass the same value to the socket,
// the transport and the protocol: Thrift propagates a configuration down the
// stack, and a partial one would overwrite the others' settings.
//
// Binary strict read and write are on: we only ever talk to ourselves, and a
// message without a version header is garbage.
func (c Config) TConfiguration() *thrift.TConfiguration {
	c = c.withDefaults()
	return &thrift.TConfiguration{
		MaxFrameSize:       c.MaxFrameSize,
		MaxMessageSize:     c.MaxMessageSize,
		MaxContainerSize:   c.MaxContainerSize,
		SocketTimeout:      c.SocketTimeout,
		ConnectTimeout:     c.ConnectTimeout,
		TLSConfig:          c.TLS,
		TBinaryStrictRead:  thrift.BoolPtr(true),
		TBinaryStrictWrite: thrift.BoolPtr(true),
	}
}
