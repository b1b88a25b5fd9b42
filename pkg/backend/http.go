package backend

import (
	"context"
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lancemaster/lancemaster/pkg/metrics"
)

// readyChecks are the agent's /readyz checks (docs/metrics.md):
//
//   - listening: the Thrift server is serving and the agent is not shutting
//     down;
//   - isolation: worker isolation is verified, or not required
//     (best-effort); with isolation required and unverified every dispatch
//     is refused, so the agent is not ready;
//   - outbox: the outbox file is open and readable;
//   - heartbeat: always passes; says whether a master has heartbeaten this
//     process yet. It is not a condition: a backend reachable only once it
//     is ready (a Kubernetes Service) would never be heartbeaten otherwise.
func (a *Agent) readyChecks() []metrics.Check {
	return []metrics.Check{
		{Name: "listening", Fn: func(context.Context) (string, error) {
			a.mu.Lock()
			srv, shutting := a.srv, a.shutting
			a.mu.Unlock()
			switch {
			case shutting:
				return "", errors.New("the backend is shutting down")
			case srv == nil:
				return "", errors.New("the Thrift server is not serving yet")
			}
			return srv.Addr().String(), nil
		}},
		{Name: "isolation", Fn: func(context.Context) (string, error) {
			switch {
			case a.runner.Verified():
				return "verified", nil
			case a.cfg.Isolation == IsolationBestEffort:
				return "best-effort (not verified)", nil
			}
			return "", errors.New("worker isolation is required but could not be verified: every dispatch is refused")
		}},
		{Name: "outbox", Fn: func(context.Context) (string, error) {
			n, err := a.outbox.Len()
			if err != nil {
				return "", fmt.Errorf("the outbox is not readable: %w", err)
			}
			return fmt.Sprintf("open, %d entries", n), nil
		}},
		{Name: "heartbeat", Fn: func(context.Context) (string, error) {
			a.mu.Lock()
			hb := a.heartbeaten
			a.mu.Unlock()
			if hb {
				return "a master has heartbeaten this process", nil
			}
			return "no master has heartbeaten this process yet (dispatches are refused until one does)", nil
		}},
	}
}

// startHTTP serves /metrics, /livez and /readyz on Config.HTTPListen; ""
// serves nothing. Called by Start.
func (a *Agent) startHTTP() (*metrics.Server, error) {
	if a.cfg.HTTPListen == "" {
		return nil, nil
	}
	return metrics.Listen(metrics.Options{Addr: a.cfg.HTTPListen, Gatherer: a.metrics.reg, Ready: a.readyChecks(),
		Logger: a.log.Named("http")})
}

// Registry is the agent's Prometheus registry (what /metrics serves).
func (a *Agent) Registry() *prometheus.Registry { return a.metrics.reg }

// HTTPAddr is the metrics and health listener's address ("" without
// HTTPListen, or before Start).
func (a *Agent) HTTPAddr() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.http == nil {
		return ""
	}
	return a.http.Addr()
}
