package metrics

import (
	"crypto/x509"

	"github.com/prometheus/client_golang/prometheus"
)

// CertExpiry is lancemaster_tls_certificate_expiry_timestamp_seconds{role}:
// the NotAfter of the certificate leaf returns, read at scrape time
// (rpc.Certs.Leaf re-reads rotated files). A nil leaf func, or one that
// returns nil, exports nothing: a process without TLS has no series.
func CertExpiry(role string, leaf func() *x509.Certificate) prometheus.Collector {
	return certExpiry{role: role, leaf: leaf}
}

type certExpiry struct {
	role string
	leaf func() *x509.Certificate
}

var descCertExpiryRole = prometheus.NewDesc("lancemaster_tls_certificate_expiry_timestamp_seconds",
	"When this process's own TLS certificate (the leaf it presents) expires, as a Unix time; re-read at every scrape, so a rotated certificate shows at once. Absent without mutual TLS.",
	[]string{"role"}, nil)

func (c certExpiry) Describe(ch chan<- *prometheus.Desc) { ch <- descCertExpiryRole }

func (c certExpiry) Collect(ch chan<- prometheus.Metric) {
	if c.leaf == nil {
		return
	}
	l := c.leaf()
	if l == nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(descCertExpiryRole, prometheus.GaugeValue, float64(l.NotAfter.Unix()), c.role)
}
