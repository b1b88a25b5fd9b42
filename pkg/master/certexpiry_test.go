package master

import (
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/lancemaster/lancemaster/pkg/backend"
	"github.com/lancemaster/lancemaster/pkg/certs"
	"github.com/lancemaster/lancemaster/pkg/rpc/rpctest"
)

// Masters and backends under mutual TLS export their own certificate's
// NotAfter as lancemaster_tls_certificate_expiry_timestamp_seconds{role};
// without TLS there is no such series (deploy/monitoring/alerts.yml alerts
// on it 14 days ahead).
func TestCertExpiryGaugeOnMastersAndBackends(t *testing.T) {
	pki := t.TempDir()
	if _, err := certs.WriteDevCerts(pki, certs.DevOptions{Hosts: []string{"127.0.0.1"}, Validity: 10 * 24 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	mcfg := rpctest.DevTLSConfig(t, pki, certs.RoleMaster)
	want := float64(mcfg.Certs.Leaf().NotAfter.Unix())
	if got, ok := expiryGauge(t, newMasterMetrics(mcfg.Certs).reg.Gather, "master"); !ok || got != want {
		t.Fatalf("master expiry = %v (present %v), want %v", got, ok, want)
	}
	if _, ok := expiryGauge(t, newMasterMetrics(nil).reg.Gather, ""); ok {
		t.Fatal("a plaintext master exports a certificate expiry")
	}

	bcfg := rpctest.DevTLSConfig(t, pki, certs.RoleBackend)
	for _, tc := range []struct {
		name    string
		tls     bool
		present bool
	}{{"tls", true, true}, {"plaintext", false, false}} {
		cfg := backend.Config{ListenAddr: "127.0.0.1:0", DataDir: t.TempDir(), Isolation: backend.IsolationBestEffort}
		if tc.tls {
			cfg.RPC = bcfg
		}
		a, err := backend.New(cfg, OKRunner{})
		if err != nil {
			t.Fatal(err)
		}
		got, ok := expiryGauge(t, a.Registry().Gather, "backend")
		a.Close()
		if ok != tc.present || (ok && got != float64(bcfg.Certs.Leaf().NotAfter.Unix())) {
			t.Fatalf("%s backend: expiry = %v (present %v)", tc.name, got, ok)
		}
	}
}

// expiryGauge returns the value of the certificate-expiry series whose
// role is role ("" = any) in what gather returns; ok is false without one.
func expiryGauge(t *testing.T, gather func() ([]*dto.MetricFamily, error), role string) (float64, bool) {
	t.Helper()
	fams, err := gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != "lancemaster_tls_certificate_expiry_timestamp_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "role" && (role == "" || l.GetValue() == role) {
					return m.GetGauge().GetValue(), true
				}
			}
		}
	}
	return 0, false
}
