package backend

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
	"fmt"
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

	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/backend/frame"
	"github.com/lancemaster/lancemaster/pkg/rpc"
)

// Raw TCP probes against a real agent's Thrift port (issue 5, item 6): each
// bad input is rejected or closed, costs the server less than
// probeAllocLimit, and the agent keeps serving. pkg/master/probe_test.go
// runs the same probes against a master.

const (
	// probeSocketTimeout is the servers' SocketTimeout here: short, so the
	// partial-frame probe is quick; an immediate close is far below it.
	probeSocketTimeout = 500 * time.Millisecond
	// probeAllocLimit bounds what one probe may make the process allocate.
	probeAllocLimit = 16 << 20
	// probeGuard bounds every wait of a probe.
	probeGuard = 10 * time.Second
	// probePanicURI makes the fake runner panic inside inspect_lance_dataset.
	probePanicURI = "/probe/panic.lance"
)

func TestProbesAgainstTheBackendPort(t *testing.T) {
	cert, pool := probeCert(t)
	cfg := rpc.DefaultConfig()
	cfg.SocketTimeout = probeSocketTimeout
	tlsCfg := cfg
	tlsCfg.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13}
	// The test's clients keep the default timeouts.
	client := rpc.DefaultConfig()
	clientTLS := client
	clientTLS.TLS = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13}

	runner := newFakeRunner()
	runner.setScript(func(_ context.Context, req *frame.Request) Outcome {
		if req.Mode == frame.ModeInspect && req.DatasetURI == probePanicURI {
			panic("probe: injected runner fault")
		}
		return Outcome{Result: &frame.Result{Protocol: 1, Mode: frame.ModeInspect, OK: true, DatasetVersion: 3}, Proof: ProofChildReaped}
	})
	plain := startHarness(t, testConfig(t), runner, func(c *Config) { c.RPC = cfg })
	secure := startHarness(t, testConfig(t), newFakeRunner(), func(c *Config) { c.RPC = tlsCfg })

	heartbeat := &wire.LanceBackendServiceHeartbeatArgs{Request: &wire.THeartbeatRequest{MasterID: "probe"}}
	valid := func(ctx context.Context, c rpc.Config, addr string) error {
		cl := rpc.NewThriftBackendClient(c)
		hb, err := cl.Heartbeat(ctx, addr, heartbeat.Request)
		if err == nil && hb.GetStatus().GetStatusCode() != wire.TStatusCode_OK {
			err = errors.New("heartbeat answered " + hb.GetStatus().GetStatusCode().String())
		}
		if err != nil {
			return err
		}
		// An inspect too: the panic probe must not have leaked the inspect
		// slot (Concurrency 1: one slot) or the agent's inspect count.
		in, err := cl.Inspect(ctx, addr, &wire.TInspectDatasetRequest{DatasetURI: "/data/db/t.lance"})
		if err == nil && in.GetStatus().GetStatusCode() != wire.TStatusCode_OK {
			err = errors.New("inspect answered " + in.GetStatus().GetStatusCode().String())
		}
		return err
	}

	// ~30-byte frames whose container headers claim 10^8 entries: the
	// heartbeat's master_addresses list<string> (field 3), and a dispatch's
	// storage_options map<string,string> (field 16).
	listBomb := probeCallHeader("heartbeat")
	listBomb = append(listBomb, byte(thrift.STRUCT), 0, 1, byte(thrift.LIST), 0, 3, byte(thrift.STRING))
	listBomb = binary.BigEndian.AppendUint32(listBomb, 100_000_000)
	mapBomb := probeCallHeader("submit_lance_index_job")
	mapBomb = append(mapBomb, byte(thrift.STRUCT), 0, 1, byte(thrift.MAP), 0, 16, byte(thrift.STRING), byte(thrift.STRING))
	mapBomb = binary.BigEndian.AppendUint32(mapBomb, 100_000_000)

	probeServer{
		addr: plain.a.Addr(), tlsAddr: secure.a.Addr(), cfg: client, tlsCfg: clientTLS, valid: valid,
		validCall: probeCall(t, "heartbeat", heartbeat),
		listBomb:  listBomb, mapBomb: mapBomb,
		panicCall: probeCall(t, "inspect_lance_dataset", &wire.LanceBackendServiceInspectLanceDatasetArgs{
			Request: &wire.TInspectDatasetRequest{DatasetURI: probePanicURI}}),
	}.run(t)

	// The recover middleware logged the panic once, with the method and
	// never the panic value.
	panics := plain.logs.FilterMessageSnippet("panicked").All()
	if len(panics) != 1 || panics[0].ContextMap()["method"] != "inspect_lance_dataset" {
		t.Fatalf("the handler panic was logged %d times (%v), want once with its method", len(panics), panics)
	}
	for _, e := range plain.logs.All() {
		if strings.Contains(e.Message+fmt.Sprint(e.ContextMap()), "probe:") {
			t.Errorf("the panic value was logged: %q %v", e.Message, e.ContextMap())
		}
	}
}

// ---- the probe suite (kept in step with pkg/master/probe_test.go) ----------

// probeServer is one server under probe: a plaintext port and a TLS port of
// the same service.
type probeServer struct {
	addr, tlsAddr string
	cfg, tlsCfg   rpc.Config // client configurations for addr and tlsAddr
	// valid makes one valid call on a new connection.
	valid func(ctx context.Context, cfg rpc.Config, addr string) error
	// validCall is a message body answered REPLY; listBomb and mapBomb are
	// bodies with a container header claiming 10^8 entries; panicCall is a
	// body whose handler panics.
	validCall, listBomb, mapBomb, panicCall []byte
}

// probeCase is one probe: the bytes sent, then how the server must end it.
type probeCase struct {
	name   string
	tls    bool   // sent to the TLS port
	send   []byte // written at once
	closes closeWhen
	// reply checks what the server wrote before closing (nil: nothing may
	// be written).
	reply func(t *testing.T, data []byte)
}

type closeWhen int

const (
	closesAtOnce    closeWhen = iota // well before the socket timeout
	closesOnTimeout                  // after the socket timeout, not before
)

func (s probeServer) run(t *testing.T) {
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
		{name: "list header of 10^8 entries", send: probeFrame(s.listBomb), reply: wantException(thrift.PROTOCOL_ERROR)},
		{name: "map header of 10^8 entries", send: probeFrame(s.mapBomb), reply: wantException(thrift.PROTOCOL_ERROR)},
		{name: "garbage frame", send: probeFrame(garbage), reply: wantNoReplyMessage},
		{name: "method name of 2 GiB", send: probeFrame(hugeName), reply: wantNoReplyMessage},
		{name: "HTTP request", send: []byte("GET / HTTP/1.1\r\nHost: lancemaster\r\n\r\n")},
		{name: "partial frame", send: append(binary.BigEndian.AppendUint32(nil, 100), make([]byte, 10)...), closes: closesOnTimeout},
		{name: "plaintext call to the TLS port", tls: true, send: probeFrame(s.validCall), reply: wantTLSAlertOrNothing},
		{name: "silent client on the TLS port", tls: true, closes: closesOnTimeout},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			addr := s.addr
			if c.tls {
				addr = s.tlsAddr
			}
			probeMeasure(t, func() {
				data, elapsed := probeSendAndAwaitClose(t, addr, c.send)
				t.Logf("closed after %v, having answered %d bytes", elapsed.Round(time.Millisecond), len(data))
				switch c.closes {
				case closesAtOnce:
					if elapsed >= probeSocketTimeout {
						t.Errorf("closed after %v: by the socket timeout, not at once", elapsed)
					}
				case closesOnTimeout:
					if elapsed < probeSocketTimeout {
						t.Errorf("closed after %v, before the socket timeout %v", elapsed, probeSocketTimeout)
					}
				}
				if c.reply != nil {
					c.reply(t, data)
				} else if len(data) > 0 {
					t.Errorf("the server answered %d bytes (%q)", len(data), probeClip(data))
				}
			})
			s.stillServes(t)
		})
	}

	t.Run("handler panic", func(t *testing.T) {
		probeMeasure(t, func() {
			conn := probeDial(t, s.addr)
			defer conn.Close()
			probeWrite(t, conn, probeFrame(s.panicCall))
			wantException(thrift.INTERNAL_ERROR)(t, probeReadFrame(t, conn))
			// The same connection goes on serving.
			probeWrite(t, conn, probeFrame(s.validCall))
			if typ := probeMessageType(t, probeReadFrame(t, conn)); typ != thrift.REPLY {
				t.Fatalf("a valid call after the panic, same connection: message type %v", typ)
			}
		})
		s.stillServes(t)
	})
}

// stillServes makes a valid call on a new connection to each port.
func (s probeServer) stillServes(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), probeGuard)
	defer cancel()
	if err := s.valid(ctx, s.cfg, s.addr); err != nil {
		t.Fatalf("the server no longer serves: %v", err)
	}
	if err := s.valid(ctx, s.tlsCfg, s.tlsAddr); err != nil {
		t.Fatalf("the TLS server no longer serves: %v", err)
	}
}

// probeMeasure runs fn and fails when the process allocated probeAllocLimit
// or more meanwhile (the server runs in this process).
func probeMeasure(t *testing.T, fn func()) {
	t.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	d := after.TotalAlloc - before.TotalAlloc
	t.Logf("allocated %d KiB", d>>10)
	if d >= probeAllocLimit {
		t.Errorf("allocated %d MiB (limit %d MiB)", d>>20, probeAllocLimit>>20)
	}
}

func probeDial(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, probeGuard)
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.SetDeadline(time.Now().Add(probeGuard)); err != nil {
		t.Fatal(err)
	}
	return conn
}

func probeWrite(t *testing.T, conn net.Conn, b []byte) {
	t.Helper()
	if _, err := conn.Write(b); err != nil {
		t.Fatalf("write: %v", err)
	}
}

// probeSendAndAwaitClose sends b on a new connection and reads until the
// server closes it; it returns what the server wrote and when it closed.
func probeSendAndAwaitClose(t *testing.T, addr string, b []byte) ([]byte, time.Duration) {
	t.Helper()
	conn := probeDial(t, addr)
	defer conn.Close()
	start := time.Now()
	if len(b) > 0 {
		probeWrite(t, conn, b)
	}
	var got bytes.Buffer
	_, err := io.Copy(&got, conn) // returns nil at EOF
	elapsed := time.Since(start)
	var ne net.Error
	switch {
	case err == nil, errors.Is(err, syscall.ECONNRESET):
	case errors.As(err, &ne) && ne.Timeout():
		t.Fatalf("the server did not close the connection within %v", probeGuard)
	default:
		t.Fatalf("read: %v", err)
	}
	return got.Bytes(), elapsed
}

// probeReadFrame reads one frame.
func probeReadFrame(t *testing.T, conn net.Conn) []byte {
	t.Helper()
	var n [4]byte
	if _, err := io.ReadFull(conn, n[:]); err != nil {
		t.Fatalf("read frame size: %v", err)
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > rpc.DefaultMaxFrameSize {
		t.Fatalf("reply frame of %d bytes", size)
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(conn, b); err != nil {
		t.Fatalf("read frame: %v", err)
	}
	return append(n[:], b...)
}

// probeMessage decodes a framed reply's header, and its exception if any.
func probeMessage(t *testing.T, data []byte) (thrift.TMessageType, thrift.TApplicationException) {
	t.Helper()
	if len(data) < 4 || int(binary.BigEndian.Uint32(data)) != len(data)-4 {
		t.Fatalf("the reply is not one frame: %q", probeClip(data))
	}
	buf := thrift.NewTMemoryBuffer()
	buf.Write(data[4:])
	p := thrift.NewTBinaryProtocolConf(buf, rpc.DefaultConfig().TConfiguration())
	ctx := context.Background()
	_, typ, _, err := p.ReadMessageBegin(ctx)
	if err != nil {
		t.Fatalf("reply header: %v", err)
	}
	if typ != thrift.EXCEPTION {
		return typ, nil
	}
	x := thrift.NewTApplicationException(0, "")
	if err := x.Read(ctx, p); err != nil {
		t.Fatalf("exception: %v", err)
	}
	return typ, x
}

func probeMessageType(t *testing.T, data []byte) thrift.TMessageType {
	t.Helper()
	typ, _ := probeMessage(t, data)
	return typ
}

// wantException: nothing, or one TApplicationException of type id.
func wantException(id int32) func(t *testing.T, data []byte) {
	return func(t *testing.T, data []byte) {
		t.Helper()
		if len(data) == 0 && id != thrift.INTERNAL_ERROR {
			return
		}
		typ, x := probeMessage(t, data)
		if typ != thrift.EXCEPTION || x.TypeId() != id {
			t.Fatalf("reply %v %v, want an exception of type %d", typ, x, id)
		}
		if strings.Contains(x.Error(), "probe:") {
			t.Fatalf("the panic value reached the client: %v", x)
		}
	}
}

// wantNoReplyMessage: nothing, or an exception; never a REPLY.
func wantNoReplyMessage(t *testing.T, data []byte) {
	t.Helper()
	if len(data) == 0 {
		return
	}
	if typ := probeMessageType(t, data); typ != thrift.EXCEPTION {
		t.Fatalf("garbage was answered with message type %v", typ)
	}
}

// wantTLSAlertOrNothing: the TLS server answers plaintext with at most an
// alert record (content type 21).
func wantTLSAlertOrNothing(t *testing.T, data []byte) {
	t.Helper()
	if len(data) > 0 && data[0] != 21 {
		t.Fatalf("the TLS port answered plaintext with %q", probeClip(data))
	}
}

// probeCallHeader is a strict binary CALL header for name, seq id 1.
func probeCallHeader(name string) []byte {
	b := binary.BigEndian.AppendUint32(nil, 0x80010001)
	b = binary.BigEndian.AppendUint32(b, uint32(len(name)))
	b = append(b, name...)
	return binary.BigEndian.AppendUint32(b, 1)
}

// probeCall is the message body of a call of name with args.
func probeCall(t *testing.T, name string, args thrift.TStruct) []byte {
	t.Helper()
	buf := thrift.NewTMemoryBuffer()
	p := thrift.NewTBinaryProtocolConf(buf, rpc.DefaultConfig().TConfiguration())
	ctx := context.Background()
	if err := p.WriteMessageBegin(ctx, name, thrift.CALL, 1); err != nil {
		t.Fatal(err)
	}
	if err := args.Write(ctx, p); err != nil {
		t.Fatal(err)
	}
	if err := p.WriteMessageEnd(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	return bytes.Clone(buf.Bytes())
}

func probeFrame(body []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

func probeClip(b []byte) []byte { return b[:min(len(b), 64)] }

// probeCert is a self-signed certificate for 127.0.0.1 and a pool trusting it.
func probeCert(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "lancemaster-probe"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pool
}
