package rpctest

import (
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/lancemaster/lancemaster/pkg/certs"
	"github.com/lancemaster/lancemaster/pkg/rpc"
)

// DevTLSConfig is rpc.DefaultConfig with role's certificate from a
// development PKI in dir (certs.WriteDevCerts): mutual TLS for loopback
// tests.
func DevTLSConfig(t testing.TB, dir string, role certs.Role) rpc.Config {
	t.Helper()
	ca, cert, key := certs.DevFiles(dir, role)
	c, err := rpc.TLSFiles{CA: ca, Cert: cert, Key: key}.Load(role, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)))
	if err != nil {
		t.Fatal(err)
	}
	cfg := rpc.DefaultConfig()
	cfg.Certs = c
	return cfg
}
