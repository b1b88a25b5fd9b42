package rpc

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"go.uber.org/zap/zaptest"

	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/certs"
)

// recordingBackend is a testBackend whose heartbeat records the caller's
// certificate subject.
type recordingBackend struct {
	testBackend
	mu       sync.Mutex
	subjects []string
}

func newRecordingBackend() *recordingBackend {
	b := &recordingBackend{}
	b.heartbeat = func(ctx context.Context, _ *wire.THeartbeatRequest) (*wire.THeartbeatResponse, error) {
		id := CallerFromContext(ctx).Identity()
		b.mu.Lock()
		b.subjects = append(b.subjects, id.Subject)
		b.mu.Unlock()
		return &wire.THeartbeatResponse{Status: okStatus(), BeProcessEpoch: 42}, nil
	}
	return b
}

func (b *recordingBackend) lastSubject() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.subjects) == 0 {
		return ""
	}
	return b.subjects[len(b.subjects)-1]
}

func startTLSBackend(t *testing.T, b wire.LanceBackendService, cfg Config) *Server {
	t.Helper()
	return startServerOpts(t, wire.NewLanceBackendServiceProcessor(b), cfg, WithPolicy(BackendPolicy()))
}

// startServerOpts serves processor on 127.0.0.1:0 with opts until the test
// ends.
func startServerOpts(t *testing.T, processor thrift.TProcessor, cfg Config, opts ...ServerOption) *Server {
	t.Helper()
	s, err := NewServer("127.0.0.1:0", processor, cfg, zaptest.NewLogger(t), opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Serve(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func tlsHeartbeat(t *testing.T, cfg Config, addr string) (*wire.THeartbeatResponse, error) {
	t.Helper()
	return NewThriftBackendClient(cfg).Heartbeat(testCtx(t), addr, &wire.THeartbeatRequest{MasterID: "m"})
}

func mustHeartbeat(t *testing.T, cfg Config, addr string) {
	t.Helper()
	hb, err := tlsHeartbeat(t, cfg, addr)
	if err != nil {
		t.Fatalf("heartbeat: %v", err)
	}
	if hb.GetStatus().GetStatusCode() != wire.TStatusCode_OK {
		t.Fatalf("heartbeat answered %v", hb.GetStatus())
	}
}

// serverSerial dials addr with cfg's certificates and returns the serial of
// the certificate the server presented.
func serverSerial(t *testing.T, cfg Config, addr string) *big.Int {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, cfg.Certs.ClientConfig(addr))
	if err != nil {
		t.Fatalf("tls dial: %v", err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber
}

func caPool(ca *certs.CA) *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

func TestMutualTLSRoundTripAndRefusals(t *testing.T) {
	pki := newTestPKI(t)
	srv := startTLSBackend(t, newRecordingBackend(), pki.roleConfig(certs.RoleBackend))
	addr := srv.Addr().String()
	master := pki.roleConfig(certs.RoleMaster)
	mustHeartbeat(t, master, addr)

	t.Run("no client certificate: refused at the first RPC", func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.TLS = &tls.Config{RootCAs: caPool(pki.ca), MinVersion: tls.VersionTLS13}
		conn, err := Dial(testCtx(t), addr, cfg)
		if err != nil {
			t.Fatalf("TLS 1.3: the dial succeeds before the server checks the client: %v", err)
		}
		conn.Close()
		_, err = tlsHeartbeat(t, cfg, addr)
		if err == nil {
			t.Fatal("a client without a certificate was served")
		}
		if se := asSendError(t, err); se.Op == OpDial {
			t.Fatalf("refused at the dial, not at the first RPC: %v", err)
		}
	})

	t.Run("certificate from another CA: refused", func(t *testing.T) {
		other, err := certs.NewCA("other CA", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		certPEM, keyPEM, err := other.Issue(certs.ForRole(certs.RoleMaster, []string{"127.0.0.1"}, time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		foreign, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		cfg := DefaultConfig()
		// GetClientCertificate sends it even though the server's CA list
		// does not match (crypto/tls would otherwise send none).
		cfg.TLS = &tls.Config{RootCAs: caPool(pki.ca), MinVersion: tls.VersionTLS13,
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &foreign, nil }}
		if _, err := tlsHeartbeat(t, cfg, addr); err == nil {
			t.Fatal("a certificate from another CA was served")
		}

		// Files naming it with our CA do not even load.
		f := TLSFiles{CA: filepath.Join(pki.dir, "ca.pem"), Cert: pki.write("foreign.pem", certPEM), Key: pki.write("foreign-key.pem", keyPEM)}
		if _, err := f.Load("", nil); err == nil || !strings.Contains(err.Error(), "does not chain") {
			t.Fatalf("foreign certificate loaded: %v", err)
		}
	})

	t.Run("server from another CA: refused at the dial", func(t *testing.T) {
		other := newTestPKI(t)
		_, err := tlsHeartbeat(t, other.roleConfig(certs.RoleMaster), addr)
		if se := asSendError(t, err); se.Op != OpDial || se.BytesMayHaveLeft {
			t.Fatalf("distrusted server: %+v", se)
		}
	})

	t.Run("plaintext to the TLS port: refused", func(t *testing.T) {
		if _, err := tlsHeartbeat(t, DefaultConfig(), addr); err == nil {
			t.Fatal("a plaintext call to a TLS server succeeded")
		}
	})

	t.Run("a server of the wrong role: refused at the dial", func(t *testing.T) {
		// A master client reaching a master where it expected a backend
		// fails before sending: the backend client wants role backend.
		masterSrv := startTLSBackend(t, &testBackend{}, pki.roleConfig(certs.RoleMaster))
		_, err := tlsHeartbeat(t, master, masterSrv.Addr().String())
		if se := asSendError(t, err); se.Op != OpDial || se.BytesMayHaveLeft || !strings.Contains(err.Error(), "role master") {
			t.Fatalf("wrong server role: %v", err)
		}
	})

	// The server keeps serving after every refusal.
	mustHeartbeat(t, master, addr)
}

func TestLoadChecksFilesAndRole(t *testing.T) {
	pki := newTestPKI(t)
	f := pki.role(certs.RoleBackend)
	if _, err := f.Load(certs.RoleMaster, nil); err == nil || !strings.Contains(err.Error(), "needs role master") {
		t.Fatalf("a backend certificate loaded as a master's: %v", err)
	}
	c, err := f.Load(certs.RoleBackend, nil)
	if err != nil || c.Role() != certs.RoleBackend {
		t.Fatalf("Load: %v", err)
	}
	if err := (TLSFiles{CA: "x"}).Validate(); err == nil || !strings.Contains(err.Error(), "cert, key") {
		t.Fatalf("partial files: %v", err)
	}
	if err := (TLSFiles{}).Validate(); err != nil {
		t.Fatal(err)
	}
	if _, err := (TLSFiles{CA: f.CA, Cert: f.Cert, Key: filepath.Join(pki.dir, "missing")}).Load("", nil); err == nil {
		t.Fatal("a missing key loaded")
	}
	// A key that does not match the certificate.
	_, otherKey, err := pki.ca.Issue(certs.ForRole(certs.RoleBackend, []string{"127.0.0.1"}, time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	_, err = (TLSFiles{CA: f.CA, Cert: f.Cert, Key: pki.write("mismatch-key.pem", otherKey)}).Load("", nil)
	if err == nil || strings.Contains(err.Error(), "PRIVATE KEY") {
		t.Fatalf("mismatched key: %v", err)
	}
}

// Certificates are re-read when their files change: new connections use the
// new ones, on the server side and on the client side, with no restart. A
// set that does not load is ignored until it does.
func TestCertificateRotation(t *testing.T) {
	pki := newTestPKI(t)
	backendFiles := pki.role(certs.RoleBackend)
	server := pki.config(backendFiles)
	rec := newRecordingBackend()
	addr := startTLSBackend(t, rec, server).Addr().String()
	master := pki.roleConfig(certs.RoleMaster)

	mustHeartbeat(t, master, addr)
	if got := rec.lastSubject(); got != "lancemaster master" {
		t.Fatalf("client subject %q", got)
	}
	first := serverSerial(t, master, addr)

	// The server's certificate is replaced.
	pki.role(certs.RoleBackend)
	second := serverSerial(t, master, addr)
	if second.Cmp(first) == 0 {
		t.Fatal("the server still presents its old certificate after rotation")
	}
	mustHeartbeat(t, master, addr)

	// A half-done rotation (a new key, the old certificate) is refused and
	// the last good pair kept; completing it takes effect.
	leaf := certs.ForRole(certs.RoleBackend, []string{"127.0.0.1"}, time.Hour)
	certPEM, keyPEM, err := pki.ca.Issue(leaf)
	if err != nil {
		t.Fatal(err)
	}
	pki.write("backend-key.pem", keyPEM)
	if got := serverSerial(t, master, addr); got.Cmp(second) != 0 {
		t.Fatal("a mismatched key replaced the certificate in use")
	}
	mustHeartbeat(t, master, addr)
	pki.write("backend.pem", certPEM)
	if got := serverSerial(t, master, addr); got.Cmp(second) == 0 {
		t.Fatal("the completed rotation was not picked up")
	}

	// The client's certificate is replaced: a new connection presents it.
	leaf = certs.ForRole(certs.RoleMaster, []string{"127.0.0.1"}, time.Hour)
	leaf.CommonName = "rotated master"
	pki.issue("master", leaf)
	mustHeartbeat(t, master, addr)
	if got := rec.lastSubject(); got != "rotated master" {
		t.Fatalf("after the client's rotation the server saw %q", got)
	}

	// The CA is rotated: the CA file holds the old and the new CA while the
	// leaves move to the new one; both sides trust either.
	ca2, err := certs.NewCA("test CA 2", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pki.write("ca.pem", append(append([]byte{}, pki.ca.CertPEM...), ca2.CertPEM...))
	certPEM, keyPEM, err = ca2.Issue(certs.ForRole(certs.RoleBackend, []string{"127.0.0.1"}, time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	pki.write("backend-key.pem", keyPEM)
	pki.write("backend.pem", certPEM)
	mustHeartbeat(t, master, addr) // client: old CA; server: new CA
	conn, err := tls.Dial("tcp", addr, master.Certs.ClientConfig(addr))
	if err != nil {
		t.Fatal(err)
	}
	if issuer := conn.ConnectionState().PeerCertificates[0].Issuer.CommonName; issuer != "test CA 2" {
		t.Fatalf("server certificate issued by %q", issuer)
	}
	conn.Close()
	if err := os.Remove(backendFiles.Key); err != nil {
		t.Fatal(err)
	}
	mustHeartbeat(t, master, addr) // a vanished file keeps the set in use
}

func TestTLSWithoutClientVerificationAuthorizesNothing(t *testing.T) {
	// Server-only TLS (no client certificates) and plaintext know no caller:
	// a policy cannot be enforced, and is not.
	pki := newTestPKI(t)
	srvCerts := pki.roleConfig(certs.RoleBackend).Certs
	cfg := DefaultConfig()
	cfg.TLS = &tls.Config{MinVersion: tls.VersionTLS13, GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		st := srvCerts.current()
		return &st.cert, nil
	}}
	addr := startTLSBackend(t, &testBackend{}, cfg).Addr().String()
	client := DefaultConfig()
	client.TLS = &tls.Config{RootCAs: caPool(pki.ca), MinVersion: tls.VersionTLS13}
	mustHeartbeat(t, client, addr)
	plain := startTLSBackend(t, &testBackend{}, DefaultConfig()).Addr().String()
	mustHeartbeat(t, DefaultConfig(), plain)
}
