package master

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"strconv"

	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/pkg/httpapi"
	"github.com/lancemaster/lancemaster/pkg/metrics"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
	"github.com/lancemaster/lancemaster/pkg/rpc"
)

// DefaultReadyMaxApplyLag is how many committed entries the journal replica
// may still have to apply and the master be ready: a replica that keeps up
// is a few entries behind at most under load; one restoring a snapshot or
// replaying a log is thousands behind.
const DefaultReadyMaxApplyLag = 64

// readyChecks are a master's /readyz checks (docs/metrics.md):
//
//   - leader: this master knows a leader (itself or another);
//   - fsm_caught_up: its journal replica has applied every entry up to the
//     commit index it knows, within maxLag entries. The replica's own
//     applied index is used (raft's runs ahead of the FSM by what is queued
//     for it); raft's is the fallback while the replica has none (an older
//     snapshot that does not carry it, before the next entry).
//
// Raft entries that never reach the FSM (no-ops, configuration changes)
// leave the replica a few entries "behind" until the next command; the lag
// allowance absorbs them.
func readyChecks(r raftView, fsm raftfsm.Reader, maxLag uint64) []metrics.Check {
	return []metrics.Check{
		{Name: "leader", Fn: func(context.Context) (string, error) {
			id, addr := r.Leader()
			if id == "" {
				s := r.Stats()
				return "", fmt.Errorf("no leader known (raft state %s, term %s)", s["state"], s["term"])
			}
			if r.IsLeader() {
				return id + " (this master)", nil
			}
			return fmt.Sprintf("%s at %s", id, addr), nil
		}},
		{Name: "fsm_caught_up", Fn: func(context.Context) (string, error) {
			s := r.Stats()
			commit, err := strconv.ParseUint(s["commit_index"], 10, 64)
			if err != nil {
				return "", fmt.Errorf("raft reports no commit index (state %s)", s["state"])
			}
			applied := fsm.State().AppliedIndex()
			if applied == 0 {
				applied, _ = strconv.ParseUint(s["applied_index"], 10, 64)
			}
			if commit > applied && commit-applied > maxLag {
				return "", fmt.Errorf("applied index %d is %d entries behind the commit index %d (allowed %d)",
					applied, commit-applied, commit, maxLag)
			}
			return fmt.Sprintf("applied index %d, commit index %d", applied, commit), nil
		}},
	}
}

// httpListener is what the HTTP listener is built from.
type httpListener struct {
	addr      string
	plaintext bool // http_api_plaintext: serve /v1 and /ui without TLS off loopback
	certs     *rpc.Certs
	api       httpapi.Deps // Access is set here
	maxLag    uint64
	log       *zap.Logger
}

// startHTTP serves /metrics, /livez, /readyz, the read API (/v1/) and the
// console (/ui/) on addr; "" serves nothing. With certificates the
// listener serves TLS, verifying client certificates when they are given:
// scrapers present none, the API answers operator certificates only.
// Without, the API answers only on a loopback listener, unless the
// operator opted in.
func startHTTP(h httpListener, mm *masterMetrics, r raftView, fsm raftfsm.Reader) (*metrics.Server, error) {
	if h.addr == "" {
		return nil, nil
	}
	if h.maxLag == 0 {
		h.maxLag = DefaultReadyMaxApplyLag
	}
	o := metrics.Options{Addr: h.addr, Gatherer: mm.reg, Ready: readyChecks(r, fsm, h.maxLag), Logger: h.log}
	access, warn := httpAccess(h.addr, h.plaintext, h.certs)
	h.api.Access = access
	switch {
	case h.certs != nil:
		o.TLS = clientCertIfGiven(h.certs.ServerConfig())
	case warn:
		h.log.Warn("http: no mutual TLS: every caller may read the /v1 API and the console (plaintext is for loopback demos only)",
			zap.String("addr", h.addr))
	case !access.Plaintext:
		h.log.Info("http: /v1 and /ui answer 403 on this plaintext listener, which is not loopback (http_api_plaintext opts in)",
			zap.String("addr", h.addr))
	}
	api := httpapi.New(h.api)
	o.Mounts = map[string]http.Handler{}
	for _, p := range httpapi.Patterns {
		o.Mounts[p] = api
	}
	return metrics.Listen(o)
}

// httpAccess is who the API answers on a listener at addr: with
// certificates, operator certificates; without, everyone on loopback, or
// anywhere when the operator opted in (plaintext), which warns.
func httpAccess(addr string, plaintext bool, c *rpc.Certs) (a httpapi.Access, warn bool) {
	switch {
	case c != nil:
		return httpapi.Access{TLS: true}, false
	case loopback(addr):
		return httpapi.Access{Plaintext: true}, false
	case plaintext:
		return httpapi.Access{Plaintext: true}, true
	}
	return httpapi.Access{}, false
}

// clientCertIfGiven is a listener's TLS configuration that verifies a
// client certificate when one is presented instead of requiring one.
func clientCertIfGiven(c *tls.Config) *tls.Config {
	c = c.Clone()
	c.ClientAuth = tls.VerifyClientCertIfGiven
	if get := c.GetConfigForClient; get != nil {
		c.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			cc, err := get(hello)
			if err != nil || cc == nil {
				return cc, err
			}
			cc = cc.Clone()
			cc.ClientAuth = tls.VerifyClientCertIfGiven
			return cc, nil
		}
	}
	return c
}

// loopback reports whether addr (host:port) binds a loopback address only.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
