package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/lancemaster/lancemaster/pkg/version"
)

// NewRegistry returns a fresh registry with the Go runtime and process
// collectors (go_*, process_*) registered. Each master or backend has its
// own.
func NewRegistry() *prometheus.Registry {
	r := prometheus.NewRegistry()
	r.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		buildInfo(),
	)
	return r
}

// buildInfo is lancemaster_build_info: always 1, its labels say what this
// binary is (pkg/version), so a dashboard can tell masters and backends of
// different builds apart during a rolling upgrade.
func buildInfo() prometheus.Collector {
	i := version.Get()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "lancemaster_build_info",
		Help: "Always 1; the labels name this binary's version, git revision, Go version and the fingerprint of the wire contract it speaks.",
		ConstLabels: prometheus.Labels{"version": i.Version, "revision": i.Revision, "goversion": i.GoVersion,
			"wire_contract": i.WireContract},
	})
	g.Set(1)
	return g
}

// Bool is 1 for true and 0 for false, for gauges.
func Bool(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
