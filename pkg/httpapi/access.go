package httpapi

import (
	"net/http"

	"github.com/lancemaster/lancemaster/pkg/certs"
)

// Access is who may read /v1 and /ui.
//
//   - TLS: the listener serves TLS and verifies client certificates when
//     given (scrapers of /metrics present none). A request is answered
//     only with a verified certificate of role operator, the role that may
//     call the admin API's read methods from outside the cluster (docs/rpc.md).
//   - Without TLS, requests are answered only when Plaintext is set: the
//     listener is bound to loopback, or the operator opted in
//     (http_api_plaintext, with a warning at start-up).
type Access struct {
	TLS       bool
	Plaintext bool
}

// check returns why r may not be answered, or "".
func (c Access) check(r *http.Request) string {
	if r.TLS != nil {
		cs := r.TLS
		if len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
			return "this API answers operator certificates only, and the request presented no client certificate"
		}
		role, err := certs.RoleOf(cs.VerifiedChains[0][0])
		if err != nil {
			return "this API answers operator certificates only: " + err.Error()
		}
		if role != certs.RoleOperator {
			return "this API answers operator certificates only; the client certificate has role " + role.String()
		}
		return ""
	}
	if c.TLS {
		return "this API is served over TLS only"
	}
	if !c.Plaintext {
		return "without TLS this API is served on a loopback listener only (http_bind); set http_api_plaintext: true in the node file to serve it anyway"
	}
	return ""
}
