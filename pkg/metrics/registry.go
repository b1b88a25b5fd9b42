package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// NewRegistry returns a fresh registry with the Go runtime and process
// collectors (go_*, process_*) registered. Each master or backend has its
// own.
func NewRegistry() *prometheus.Registry {
	r := prometheus.NewRegistry()
	r.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return r
}

// Bool is 1 for true and 0 for false, for gauges.
func Bool(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
