// Package metrics is the plumbing every lancemaster process shares for
// Prometheus metrics and health: a registry per process (never the global
// default one, so a test can run several masters in one process), and a
// bounded HTTP server for /metrics, /livez and /readyz.
//
// What each process exports lives beside the code it measures
// (pkg/master/metrics.go, pkg/backend/metrics.go); docs/metrics.md lists
// every metric. Metrics carry ids, addresses, states and counts only: never
// a storage option, a credential or an invocation secret.
package metrics
