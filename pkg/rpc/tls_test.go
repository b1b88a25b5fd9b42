package rpc

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/gen-go/wire"
)

// selfSigned returns a certificate for 127.0.0.1 and a pool trusting it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "lancemaster-test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		IsCA:         true, BasicConstraintsValid: true,
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

func TestTLSRoundTripAndUntrustedServerIsNotSent(t *testing.T) {
	cert, pool := selfSigned(t)
	serverCfg := DefaultConfig()
	serverCfg.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13}
	s := startBackend(t, &testBackend{}, serverCfg)
	addr := s.Addr().String()

	clientCfg := DefaultConfig()
	clientCfg.TLS = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13}
	if _, err := NewThriftBackendClient(clientCfg).Heartbeat(testCtx(t), addr, &wire.THeartbeatRequest{MasterID: "m"}); err != nil {
		t.Fatalf("TLS heartbeat: %v", err)
	}

	// A client that does not trust the server fails in the handshake,
	// before any request byte.
	distrust := DefaultConfig()
	distrust.TLS = &tls.Config{RootCAs: x509.NewCertPool(), MinVersion: tls.VersionTLS13}
	_, err := NewThriftBackendClient(distrust).Submit(testCtx(t), addr, testDispatch("i"))
	if se := asSendError(t, err); se.Op != OpDial || se.BytesMayHaveLeft {
		t.Fatalf("untrusted server: %+v", se)
	}

	// Plaintext to the TLS port is closed by the server; the server goes on.
	_, err = NewThriftBackendClient(DefaultConfig()).Heartbeat(testCtx(t), addr, &wire.THeartbeatRequest{MasterID: "m"})
	if err == nil {
		t.Fatal("plaintext call to a TLS server succeeded")
	}
	if _, err := NewThriftBackendClient(clientCfg).Heartbeat(testCtx(t), addr, &wire.THeartbeatRequest{MasterID: "m"}); err != nil {
		t.Fatalf("TLS heartbeat after a plaintext probe: %v", err)
	}
}
