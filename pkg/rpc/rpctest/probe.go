package rpctest

// Raw-TCP probes of a Thrift port (framed transport, binary protocol): the
// bad inputs every lancemaster server must reject or close without a large
// allocation, a crash or a leak, each followed by a check that the server
// still serves. pkg/backend and pkg/master run them against a real agent and
// a real master.

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"errors"
	"io"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/pkg/rpc"
)

const (
	// ProbeSocketTimeout is the SocketTimeout a server under probe must be
	// configured with: short, so that the partial-frame probe is quick; an
	// immediate close is far below it.
	ProbeSocketTimeout = 500 * time.Millisecond
	// ProbeAllocLimit bounds what one probe may make the process allocate
	// (the server under probe runs in the test's process).
	ProbeAllocLimit = 16 << 20
	// ProbeClockSlack is how much earlier than the probe's clock the
	// server may start its socket timeout: the server can accept the
	// connection and arm its deadline before the probe's dial has returned
	// and its clock started (seen: a close 0.7 ms "early" on a loaded host).
	// A close by the socket timeout is one at ProbeSocketTimeout minus at
	// most this; an immediate close is far below either.
	ProbeClockSlack = 50 * time.Millisecond
	// ProbeGuard bounds every wait of a probe.
	ProbeGuard = 10 * time.Second
	// ProbePanicMarker must begin the value of the panic that a
	// ProbeServer's PanicCall injects: the probes fail when it reaches the
	// client.
	ProbePanicMarker = "probe:"
)

// ProbeServer is one server under probe: a plaintext port and a TLS port of
// the same service, both configured with SocketTimeout ProbeSocketTimeout.
type ProbeServer struct {
	Addr, TLSAddr string
	// Config and TLSConfig are the client configurations for Addr and
	// TLSAddr.
	Config, TLSConfig rpc.Config
	// Valid makes one valid call on a new connection to addr; it returns an
	// error when the call fails or its answer is not a success.
	Valid func(ctx context.Context, cfg rpc.Config, addr string) error
	// ValidCall is a message body (CallMessage) the server answers REPLY.
	ValidCall []byte
	// ListBomb and MapBomb are message bodies whose container header claims
	// 10^8 entries (ListBombCall, MapBombCall).
	ListBomb, MapBomb []byte
	// PanicCall is a message body whose handler panics with a value
	// beginning with ProbePanicMarker.
	PanicCall []byte
}

// probeCase is one probe: the bytes sent, then how the server must end it.
type probeCase struct {
	name   string
	tls    bool   // sent to the TLS port
	send   []byte // written at once
	closes closeWhen
	// reply checks what the server wrote before closing (nil: nothing may
	// be written).
	reply func(tb testing.TB, data []byte)
}

type closeWhen int

const (
	closesAtOnce    closeWhen = iota // well before the socket timeout
	closesOnTimeout                  // after the socket timeout, not before
)

// Run runs every probe as a subtest of t: huge length prefixes, list and map
// bombs, a garbage frame, a method name of 2 GiB, an HTTP request, a partial
// frame, a plaintext call and a silent client on the TLS port, and a handler
// panic. Each must be closed (at once, or by the socket timeout where the
// server cannot tell), answered with at most what the probe allows, cost
// less than ProbeAllocLimit, and leave both ports serving.
func (s ProbeServer) Run(t *testing.T) {
	garbage := make([]byte, 256)
	rng := mrand.New(mrand.NewPCG(1, 2))
	for i := range garbage {
		garbage[i] = byte(rng.Uint32())
	}
	// A strict header naming a method of 0x7ffffff0 bytes, in a small frame.
	hugeName := binary.BigEndian.AppendUint32(nil, 0x80010001)
	hugeName = binary.BigEndian.AppendUint32(hugeName, 0x7ffffff0)
	hugeName = append(hugeName, "abc"...)

	cases := []probeCase{
		{name: "length prefix 0xFFFFFFFF", send: []byte{0xff, 0xff, 0xff, 0xff, 1, 2, 3}},
		{name: "length prefix 0x7FFFFFFF", send: []byte{0x7f, 0xff, 0xff, 0xff, 1, 2, 3}},
		{name: "list header of 10^8 entries", send: Frame(s.ListBomb), reply: wantException(thrift.PROTOCOL_ERROR)},
		{name: "map header of 10^8 entries", send: Frame(s.MapBomb), reply: wantException(thrift.PROTOCOL_ERROR)},
		{name: "garbage frame", send: Frame(garbage), reply: wantNoReplyMessage},
		{name: "method name of 2 GiB", send: Frame(hugeName), reply: wantNoReplyMessage},
		{name: "HTTP request", send: []byte("GET / HTTP/1.1\r\nHost: lancemaster\r\n\r\n")},
		{name: "partial frame", send: append(binary.BigEndian.AppendUint32(nil, 100), make([]byte, 10)...), closes: closesOnTimeout},
		{name: "plaintext call to the TLS port", tls: true, send: Frame(s.ValidCall), reply: wantTLSAlertOrNothing},
		{name: "silent client on the TLS port", tls: true, closes: closesOnTimeout},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			addr := s.Addr
			if c.tls {
				addr = s.TLSAddr
			}
			measure(t, func() {
				data, elapsed := sendAndAwaitClose(t, addr, c.send)
				t.Logf("closed after %v, having answered %d bytes", elapsed.Round(time.Millisecond), len(data))
				switch c.closes {
				case closesAtOnce:
					if elapsed >= ProbeSocketTimeout {
						t.Errorf("closed after %v: by the socket timeout, not at once", elapsed)
					}
				case closesOnTimeout:
					if elapsed < ProbeSocketTimeout-ProbeClockSlack {
						t.Errorf("closed after %v, before the socket timeout %v", elapsed, ProbeSocketTimeout)
					}
				}
				if c.reply != nil {
					c.reply(t, data)
				} else if len(data) > 0 {
					t.Errorf("the server answered %d bytes (%q)", len(data), clip(data))
				}
			})
			s.stillServes(t)
		})
	}

	t.Run("handler panic", func(t *testing.T) {
		measure(t, func() {
			conn := dial(t, s.Addr)
			defer conn.Close()
			write(t, conn, Frame(s.PanicCall))
			wantException(thrift.INTERNAL_ERROR)(t, readFrame(t, conn))
			// The same connection goes on serving.
			write(t, conn, Frame(s.ValidCall))
			if typ := messageType(t, readFrame(t, conn)); typ != thrift.REPLY {
				t.Fatalf("a valid call after the panic, same connection: message type %v", typ)
			}
		})
		s.stillServes(t)
	})
}

// stillServes makes a valid call on a new connection to each port.
func (s ProbeServer) stillServes(tb testing.TB) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), ProbeGuard)
	defer cancel()
	if err := s.Valid(ctx, s.Config, s.Addr); err != nil {
		tb.Fatalf("the server no longer serves: %v", err)
	}
	if err := s.Valid(ctx, s.TLSConfig, s.TLSAddr); err != nil {
		tb.Fatalf("the TLS server no longer serves: %v", err)
	}
}

// measure runs fn and fails when the process allocated ProbeAllocLimit or
// more meanwhile.
func measure(tb testing.TB, fn func()) {
	tb.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	d := after.TotalAlloc - before.TotalAlloc
	tb.Logf("allocated %d KiB", d>>10)
	if d >= ProbeAllocLimit {
		tb.Errorf("allocated %d MiB (limit %d MiB)", d>>20, ProbeAllocLimit>>20)
	}
}

func dial(tb testing.TB, addr string) net.Conn {
	tb.Helper()
	conn, err := net.DialTimeout("tcp", addr, ProbeGuard)
	if err != nil {
		tb.Fatal(err)
	}
	if err := conn.SetDeadline(time.Now().Add(ProbeGuard)); err != nil {
		tb.Fatal(err)
	}
	return conn
}

func write(tb testing.TB, conn net.Conn, b []byte) {
	tb.Helper()
	if _, err := conn.Write(b); err != nil {
		tb.Fatalf("write: %v", err)
	}
}

// sendAndAwaitClose sends b on a new connection and reads until the server
// closes it; it returns what the server wrote and when it closed.
func sendAndAwaitClose(tb testing.TB, addr string, b []byte) ([]byte, time.Duration) {
	tb.Helper()
	conn := dial(tb, addr)
	defer conn.Close()
	start := time.Now()
	if len(b) > 0 {
		write(tb, conn, b)
	}
	var got bytes.Buffer
	_, err := io.Copy(&got, conn) // returns nil at EOF
	elapsed := time.Since(start)
	var ne net.Error
	switch {
	case err == nil, errors.Is(err, syscall.ECONNRESET):
	case errors.As(err, &ne) && ne.Timeout():
		tb.Fatalf("the server did not close the connection within %v", ProbeGuard)
	default:
		tb.Fatalf("read: %v", err)
	}
	return got.Bytes(), elapsed
}

// readFrame reads one frame, its size prefix included.
func readFrame(tb testing.TB, conn net.Conn) []byte {
	tb.Helper()
	var n [4]byte
	if _, err := io.ReadFull(conn, n[:]); err != nil {
		tb.Fatalf("read frame size: %v", err)
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > rpc.DefaultMaxFrameSize {
		tb.Fatalf("reply frame of %d bytes", size)
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(conn, b); err != nil {
		tb.Fatalf("read frame: %v", err)
	}
	return append(n[:], b...)
}

// message decodes a framed reply's header, and its exception if any.
func message(tb testing.TB, data []byte) (thrift.TMessageType, thrift.TApplicationException) {
	tb.Helper()
	if len(data) < 4 || int(binary.BigEndian.Uint32(data)) != len(data)-4 {
		tb.Fatalf("the reply is not one frame: %q", clip(data))
	}
	buf := thrift.NewTMemoryBuffer()
	buf.Write(data[4:])
	p := thrift.NewTBinaryProtocolConf(buf, rpc.DefaultConfig().TConfiguration())
	ctx := context.Background()
	_, typ, _, err := p.ReadMessageBegin(ctx)
	if err != nil {
		tb.Fatalf("reply header: %v", err)
	}
	if typ != thrift.EXCEPTION {
		return typ, nil
	}
	x := thrift.NewTApplicationException(0, "")
	if err := x.Read(ctx, p); err != nil {
		tb.Fatalf("exception: %v", err)
	}
	return typ, x
}

func messageType(tb testing.TB, data []byte) thrift.TMessageType {
	tb.Helper()
	typ, _ := message(tb, data)
	return typ
}

// wantException: nothing, or one TApplicationException of type id.
func wantException(id int32) func(tb testing.TB, data []byte) {
	return func(tb testing.TB, data []byte) {
		tb.Helper()
		if len(data) == 0 && id != thrift.INTERNAL_ERROR {
			return
		}
		typ, x := message(tb, data)
		if typ != thrift.EXCEPTION || x.TypeId() != id {
			tb.Fatalf("reply %v %v, want an exception of type %d", typ, x, id)
		}
		if strings.Contains(x.Error(), ProbePanicMarker) {
			tb.Fatalf("the panic value reached the client: %v", x)
		}
	}
}

// wantNoReplyMessage: nothing, or an exception; never a REPLY.
func wantNoReplyMessage(tb testing.TB, data []byte) {
	tb.Helper()
	if len(data) == 0 {
		return
	}
	if typ := messageType(tb, data); typ != thrift.EXCEPTION {
		tb.Fatalf("garbage was answered with message type %v", typ)
	}
}

// wantTLSAlertOrNothing: the TLS server answers plaintext with at most an
// alert record (content type 21).
func wantTLSAlertOrNothing(tb testing.TB, data []byte) {
	tb.Helper()
	if len(data) > 0 && data[0] != 21 {
		tb.Fatalf("the TLS port answered plaintext with %q", clip(data))
	}
}

func clip(b []byte) []byte { return b[:min(len(b), 64)] }

// CallHeader is a strict binary-protocol CALL message header for name, seq
// id 1.
func CallHeader(name string) []byte {
	b := binary.BigEndian.AppendUint32(nil, 0x80010001)
	b = binary.BigEndian.AppendUint32(b, uint32(len(name)))
	b = append(b, name...)
	return binary.BigEndian.AppendUint32(b, 1)
}

// ListBombCall is a ~30-byte message body of a call of method whose
// argument 1, a struct, holds a field of that id of type list<elem> whose
// header claims 10^8 entries, and nothing after it. A reader that trusts
// the header allocates gigabytes.
func ListBombCall(method string, field int16, elem thrift.TType) []byte {
	b := append(CallHeader(method), byte(thrift.STRUCT), 0, 1, byte(thrift.LIST))
	b = binary.BigEndian.AppendUint16(b, uint16(field))
	b = append(b, byte(elem))
	return binary.BigEndian.AppendUint32(b, 100_000_000)
}

// MapBombCall is ListBombCall for a field of type map<key,value>.
func MapBombCall(method string, field int16, key, value thrift.TType) []byte {
	b := append(CallHeader(method), byte(thrift.STRUCT), 0, 1, byte(thrift.MAP))
	b = binary.BigEndian.AppendUint16(b, uint16(field))
	b = append(b, byte(key), byte(value))
	return binary.BigEndian.AppendUint32(b, 100_000_000)
}

// CallMessage is the binary-protocol message body of a call of name with
// args and seq id seqID, encoded with rpc.DefaultConfig's limits.
func CallMessage(tb testing.TB, name string, seqID int32, args thrift.TStruct) []byte {
	tb.Helper()
	return Message(tb, name, thrift.CALL, seqID, args)
}

// Message is the binary-protocol message body of any message type (a
// call, or a server's REPLY with its result struct), encoded as
// CallMessage encodes a call.
func Message(tb testing.TB, name string, typ thrift.TMessageType, seqID int32, body thrift.TStruct) []byte {
	tb.Helper()
	buf := thrift.NewTMemoryBuffer()
	p := thrift.NewTBinaryProtocolConf(buf, rpc.DefaultConfig().TConfiguration())
	ctx := context.Background()
	if err := p.WriteMessageBegin(ctx, name, typ, seqID); err != nil {
		tb.Fatal(err)
	}
	if err := body.Write(ctx, p); err != nil {
		tb.Fatal(err)
	}
	if err := p.WriteMessageEnd(ctx); err != nil {
		tb.Fatal(err)
	}
	if err := p.Flush(ctx); err != nil {
		tb.Fatal(err)
	}
	return bytes.Clone(buf.Bytes())
}

// Frame prefixes body with its length, as the framed transport sends it.
func Frame(body []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

// SelfSignedCert is a self-signed ECDSA certificate for 127.0.0.1, valid
// for an hour around now for server and client authentication, and a pool
// trusting it.
func SelfSignedCert(tb testing.TB) (tls.Certificate, *x509.CertPool) {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "lancemaster-rpctest"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pool
}
