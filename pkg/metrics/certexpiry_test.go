package metrics

import (
	"crypto/x509"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// expiryOf gathers reg and returns the certificate-expiry series' value
// and role label; ok is false when there is none.
func expiryOf(t *testing.T, reg *prometheus.Registry) (v float64, role string, ok bool) {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != "lancemaster_tls_certificate_expiry_timestamp_seconds" {
			continue
		}
		if len(f.GetMetric()) != 1 {
			t.Fatalf("%d series, want 1", len(f.GetMetric()))
		}
		m := f.GetMetric()[0]
		for _, l := range m.GetLabel() {
			if l.GetName() == "role" {
				role = l.GetValue()
			}
		}
		return m.GetGauge().GetValue(), role, true
	}
	return 0, "", false
}

// The gauge is the leaf's NotAfter, read at every scrape: a rotated
// certificate shows at the next one. No leaf, no series.
func TestCertExpiryGauge(t *testing.T) {
	first := time.Date(2027, 3, 1, 12, 0, 0, 0, time.UTC)
	leaf := &x509.Certificate{NotAfter: first}
	reg := prometheus.NewRegistry()
	reg.MustRegister(CertExpiry("backend", func() *x509.Certificate { return leaf }))
	v, role, ok := expiryOf(t, reg)
	if !ok || v != float64(first.Unix()) || role != "backend" {
		t.Fatalf("expiry = %v %q %v, want %d backend", v, role, ok, first.Unix())
	}
	rotated := first.Add(90 * 24 * time.Hour)
	leaf = &x509.Certificate{NotAfter: rotated}
	if v, _, _ := expiryOf(t, reg); v != float64(rotated.Unix()) {
		t.Fatalf("after rotation: %v, want %d", v, rotated.Unix())
	}
	leaf = nil
	if _, _, ok := expiryOf(t, reg); ok {
		t.Fatal("a series without a certificate")
	}
	none := prometheus.NewRegistry()
	none.MustRegister(CertExpiry("master", nil))
	if _, _, ok := expiryOf(t, none); ok {
		t.Fatal("a series without a leaf func")
	}
}
