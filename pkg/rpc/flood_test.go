package rpc

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/certs"
)

// Raw-TCP floods (issue 10, hardening): silent connections hold pending
// slots only, for the handshake deadline at most, and Accept makes room by
// closing the oldest of them; masters' and backends' calls are served
// meanwhile, under mutual TLS from slots no operator or unauthenticated
// caller can take.

// floodHold is a handshake deadline longer than any flood test, so that the
// flood is still held (not expired) while the real clients call.
const floodHold = time.Minute

// clockSlack: the server may arm its deadline a moment before the test's
// clock starts (rpctest.ProbeClockSlack).
const clockSlack = 50 * time.Millisecond

// flood opens n silent TCP connections to addr, held until the test ends,
// and waits until the server has accepted every one of them (after the
// accepted connections it had before).
func flood(t *testing.T, s *Server, n int) []net.Conn {
	t.Helper()
	before := s.ln.total.Load()
	conns := make([]net.Conn, 0, n)
	for range n {
		c, err := net.Dial("tcp", s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		conns = append(conns, c)
	}
	waitFor(t, "the flood to be accepted", func() bool { return s.ln.total.Load() == before+int64(n) })
	return conns
}

var floodReport = &wire.TLanceIndexJobReport{JobID: 1, DispatchRevision: 1, InvocationID: "i", BeProcessEpoch: 1, InvocationSecret: new("s")}

// report makes one report call on a new connection, as a backend's
// deliverer does, within 5 s.
func report(t *testing.T, cfg Config, addr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := DialRole(ctx, addr, cfg, certs.RoleMaster)
	if err != nil {
		t.Fatalf("report: %v", err)
	}
	defer conn.Close()
	st, err := adminapi.NewLanceMasterServiceClient(conn.Client()).ReportLanceIndexJobResult_(ctx, floodReport)
	if err != nil || st.GetStatusCode() != wire.TStatusCode_OK {
		t.Fatalf("report: %v, %v", st, err)
	}
}

func TestSilentFloodDoesNotStarveBackendsOrMastersUnderMutualTLS(t *testing.T) {
	pki := newTestPKI(t)
	cfg := pki.roleConfig(certs.RoleMaster)
	// 4 served slots: 1 reserved for masters, 1 for backends, 2 shared.
	cfg.MaxConns, cfg.MaxPendingConns, cfg.HandshakeTimeout = 4, 4, floodHold
	s := startServerOpts(t, adminapi.NewLanceMasterServiceProcessor(policyMaster{}), cfg, WithPolicy(MasterPolicy()))
	addr := s.Addr().String()
	operator, backend, master := pki.roleConfig(certs.RoleOperator), pki.roleConfig(certs.RoleBackend), pki.roleConfig(certs.RoleMaster)

	// Operators' idle connections take every shared slot.
	ctx := testCtx(t)
	for range 2 {
		c, err := DialRole(ctx, addr, operator, certs.RoleMaster)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if _, err := adminapi.NewLanceMasterServiceClient(c.Client()).ListOptions(ctx); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the operators to hold the shared slots", func() bool { return s.ConnStats().ServedBy["other"] == 2 })

	// Six times more silent connections than slots, held.
	n := 6 * (cfg.MaxConns + cfg.MaxPendingConns)
	flood(t, s, n)
	if st := s.ConnStats(); st.Pending != cfg.MaxPendingConns || st.Served != 2 {
		t.Fatalf("under the flood: %+v", st)
	}

	// Reports keep flowing, and forwarded writes too.
	for range 5 {
		report(t, backend, addr)
	}
	func() {
		conn, err := DialRole(ctx, addr, master, certs.RoleMaster)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if out, err := adminapi.NewLanceMasterServiceClient(conn.Client()).ForwardApply(ctx, []byte("cmd")); err != nil || string(out) != "cmd" {
			t.Fatalf("forwardApply under the flood: %q, %v", out, err)
		}
	}()

	// Another operator's call waits for a shared slot: the reserved ones
	// are not its to take.
	done := make(chan error, 1)
	go func() {
		conn, err := DialRole(ctx, addr, operator, certs.RoleMaster)
		if err != nil {
			done <- err
			return
		}
		defer conn.Close()
		_, err = adminapi.NewLanceMasterServiceClient(conn.Client()).ListOptions(ctx)
		done <- err
	}()
	waitFor(t, "the third operator to wait", func() bool { return s.ConnStats().Waiting == 1 })
	report(t, backend, addr) // still served beside the waiting operator
	select {
	case err := <-done:
		t.Fatalf("an operator took a reserved slot: %v", err)
	default:
	}

	st := s.ConnStats()
	t.Logf("after the flood: %+v", st)
	checkFloodHeld(t, st, n, cfg.MaxPendingConns)
}

// checkFloodHeld: each of the n flood connections is still pending, or was
// evicted to make room; none took a served slot or expired.
func checkFloodHeld(t *testing.T, st ConnStats, n, maxPending int) {
	t.Helper()
	if st.Pending+int(st.Evicted) != n || st.Pending > maxPending || st.Expired != 0 {
		t.Fatalf("%d flood connections: %+v", n, st)
	}
}

func TestSilentFloodDoesNotStarvePlaintextCalls(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxConns, cfg.MaxPendingConns, cfg.HandshakeTimeout = 2, 4, floodHold
	s := startServerOpts(t, adminapi.NewLanceMasterServiceProcessor(policyMaster{}), cfg)
	n := 6 * (cfg.MaxConns + cfg.MaxPendingConns)
	flood(t, s, n)
	for range 5 {
		report(t, cfg, s.Addr().String())
	}
	checkFloodHeld(t, s.ConnStats(), n, cfg.MaxPendingConns)
}

// awaitClosedBy reads conn until the server closes it and returns when that
// was, from start; it fails when the server has not closed it within 10 s.
func awaitClosedBy(t *testing.T, conn net.Conn, start time.Time) time.Duration {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := io.Copy(io.Discard, conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("the server did not close the connection")
	}
	return time.Since(start)
}

func TestUnprovenConnectionsAreClosedAtTheHandshakeDeadline(t *testing.T) {
	const deadline = 300 * time.Millisecond
	pki := newTestPKI(t)
	plainCfg := DefaultConfig()
	plainCfg.HandshakeTimeout = deadline // the socket timeout stays 30 s
	tlsCfg := pki.roleConfig(certs.RoleBackend)
	tlsCfg.HandshakeTimeout = deadline
	plain := startBackend(t, &testBackend{}, plainCfg)
	secure := startTLSBackend(t, &testBackend{}, tlsCfg)
	master := pki.roleConfig(certs.RoleMaster)

	cases := []struct {
		name string
		s    *Server
		open func(t *testing.T, addr string) net.Conn
	}{
		{"silent TCP", plain, rawDial},
		{"silent TCP on the TLS port", secure, rawDial},
		{"TLS handshake done, no request", secure, func(t *testing.T, addr string) net.Conn {
			c, err := tls.Dial("tcp", addr, master.Certs.ClientConfig(addr))
			if err != nil {
				t.Fatal(err)
			}
			return c
		}},
		{"a request trickled a byte at a time", plain, func(t *testing.T, addr string) net.Conn {
			c := rawDial(t, addr)
			go trickle(c, binary.BigEndian.AppendUint32(nil, 1000))
			return c
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := c.s.ConnStats().Expired
			start := time.Now()
			conn := c.open(t, c.s.Addr().String())
			defer conn.Close()
			el := awaitClosedBy(t, conn, start)
			if el < deadline-clockSlack || el > 5*time.Second {
				t.Fatalf("closed after %v; the handshake deadline is %v, the socket timeout 30 s", el, deadline)
			}
			waitFor(t, "the slot to be freed", func() bool { return c.s.ActiveConns() == 0 })
			if n := c.s.ConnStats().Expired - before; n != 1 {
				t.Fatalf("%d connections counted as expired, want 1", n)
			}
		})
	}
	// Both still serve.
	if _, err := NewThriftBackendClient(plainCfg).Heartbeat(testCtx(t), plain.Addr().String(), &wire.THeartbeatRequest{MasterID: "m"}); err != nil {
		t.Fatal(err)
	}
	mustHeartbeat(t, master, secure.Addr().String())
}

func rawDial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// trickle writes b, then a byte every 20 ms, until a write fails (the
// server closed the connection) or 10 s have passed.
func trickle(c net.Conn, b []byte) {
	if _, err := c.Write(b); err != nil {
		return
	}
	for range 500 {
		time.Sleep(20 * time.Millisecond)
		if _, err := c.Write([]byte{0}); err != nil {
			return
		}
	}
}

// heartbeatFrame is a framed heartbeat call with seq id seq.
func heartbeatFrame(t *testing.T, seq int32) []byte {
	t.Helper()
	buf := thrift.NewTMemoryBuffer()
	p := thrift.NewTBinaryProtocolConf(buf, DefaultConfig().TConfiguration())
	ctx := context.Background()
	args := &wire.LanceBackendServiceHeartbeatArgs{Request: &wire.THeartbeatRequest{MasterID: "m"}}
	for _, step := range []func() error{
		func() error { return p.WriteMessageBegin(ctx, methodHeartbeat, thrift.CALL, seq) },
		func() error { return args.Write(ctx, p) },
		func() error { return p.WriteMessageEnd(ctx) },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	return append(binary.BigEndian.AppendUint32(nil, uint32(buf.Len())), buf.Bytes()...)
}

func TestSlowClientProvenWithinTheDeadlineIsNotCut(t *testing.T) {
	const deadline = time.Second
	cfg := DefaultConfig()
	cfg.HandshakeTimeout = deadline
	s := startBackend(t, &testBackend{}, cfg)

	t.Run("plaintext, first request in three slow pieces", func(t *testing.T) {
		start := time.Now()
		conn := rawDial(t, s.Addr().String())
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		tconf := cfg.TConfiguration()
		proto := thrift.NewTBinaryProtocolConf(thrift.NewTFramedTransportConf(thrift.NewTSocketFromConnConf(conn, tconf), tconf), tconf)
		replyTo := func(seq int32) {
			t.Helper()
			ctx := testCtx(t)
			_, typ, got, err := proto.ReadMessageBegin(ctx)
			if err != nil || typ != thrift.REPLY || got != seq {
				t.Fatalf("reply: %v %v seq %d, want REPLY seq %d", typ, err, got, seq)
			}
			if err := proto.Skip(ctx, thrift.STRUCT); err != nil {
				t.Fatal(err)
			}
			if err := proto.ReadMessageEnd(ctx); err != nil {
				t.Fatal(err)
			}
		}
		frame := heartbeatFrame(t, 1)
		third := len(frame) / 3
		for i, piece := range [][]byte{frame[:third], frame[third : 2*third], frame[2*third:]} {
			if i > 0 {
				time.Sleep(deadline / 8) // slow, within the deadline
			}
			if _, err := conn.Write(piece); err != nil {
				t.Fatal(err)
			}
		}
		replyTo(1)
		// Past the handshake deadline, the proven connection still serves.
		time.Sleep(time.Until(start.Add(deadline + deadline/4)))
		if _, err := conn.Write(heartbeatFrame(t, 2)); err != nil {
			t.Fatal(err)
		}
		replyTo(2)
	})

	t.Run("mutual TLS, first request after a pause", func(t *testing.T) {
		pki := newTestPKI(t)
		srvCfg := pki.roleConfig(certs.RoleMaster)
		srvCfg.HandshakeTimeout = deadline
		addr := startServerOpts(t, adminapi.NewLanceMasterServiceProcessor(policyMaster{}), srvCfg, WithPolicy(MasterPolicy())).Addr().String()
		start := time.Now()
		conn, err := DialRole(testCtx(t), addr, pki.roleConfig(certs.RoleBackend), certs.RoleMaster)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		c := adminapi.NewLanceMasterServiceClient(conn.Client())
		time.Sleep(deadline / 4)
		for i, at := range []time.Time{time.Now(), start.Add(deadline + deadline/4)} {
			time.Sleep(time.Until(at))
			if st, err := c.ReportLanceIndexJobResult_(testCtx(t), floodReport); err != nil || st.GetStatusCode() != wire.TStatusCode_OK {
				t.Fatalf("report %d: %v, %v", i+1, st, err)
			}
		}
	})
}
