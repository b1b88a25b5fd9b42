package httpapi

import (
	"context"
	"net/http"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
)

// serve runs one read: the parameters checked against accepted, the
// consistent-read barrier when asked, then fn, whose body goes out with
// the envelope (and stale, the admin layer's warning, if any).
func (a *API) serve(w http.ResponseWriter, r *http.Request, accepted []string,
	fn func(ctx context.Context, q *query) (body map[string]any, stale string, err error)) {
	q, err := parseQuery(r, accepted...)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	rd, cancel, err := a.begin(r, q)
	defer cancel()
	if err != nil {
		a.fail(w, r, err)
		return
	}
	body, stale, err := fn(rd.ctx, q)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.reply(w, r, rd, body, stale)
}

// simple serves an endpoint without parameters (but consistent): get reads
// the resource, which goes into the body under key.
func (a *API) simple(w http.ResponseWriter, r *http.Request, key string, get func(ctx context.Context) (any, error)) {
	a.serve(w, r, nil, func(ctx context.Context, _ *query) (map[string]any, string, error) {
		v, err := get(ctx)
		return map[string]any{key: v}, "", err
	})
}

// listCatalogs is GET /v1/catalogs: catalogs list (a credentials
// reference is a name under the secrets dir, never the file's content).
func (a *API) listCatalogs(w http.ResponseWriter, r *http.Request) {
	a.simple(w, r, "catalogs", func(ctx context.Context) (any, error) {
		return list(a.d.Admin.ListCatalogs(ctx))
	})
}

// listBackends is GET /v1/backends: backends list, with the leader's
// heartbeat view.
func (a *API) listBackends(w http.ResponseWriter, r *http.Request) {
	a.simple(w, r, "backends", func(ctx context.Context) (any, error) {
		return list(a.d.Admin.ListBackends(ctx))
	})
}

// showBackend is GET /v1/backends/{id}: backends show ID.
func (a *API) showBackend(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := positiveID("id", id); err != nil {
		a.fail(w, r, err)
		return
	}
	a.simple(w, r, "backend", func(ctx context.Context) (any, error) { return a.d.Admin.ShowBackend(ctx, id) })
}

// listOptions is GET /v1/options: config list.
func (a *API) listOptions(w http.ResponseWriter, r *http.Request) {
	a.simple(w, r, "options", func(ctx context.Context) (any, error) {
		return list(a.d.Admin.ListOptions(ctx))
	})
}

// members is GET /v1/members: operator raft list-peers.
func (a *API) members(w http.ResponseWriter, r *http.Request) {
	a.simple(w, r, "members", func(ctx context.Context) (any, error) {
		resp, err := a.d.Admin.ListPeers(ctx)
		if resp != nil && resp.Peers == nil {
			resp.Peers = []*adminapi.TRaftPeer{}
		}
		return resp, err
	})
}

// health is GET /v1/health: operator raft health.
func (a *API) health(w http.ResponseWriter, r *http.Request) {
	a.simple(w, r, "health", func(ctx context.Context) (any, error) {
		resp, err := a.d.Admin.RaftHealth(ctx)
		if resp != nil && resp.Members == nil {
			resp.Members = []*adminapi.TRaftMemberHealth{}
		}
		return resp, err
	})
}

// list answers a list as a JSON array, never null.
func list[T any](xs []T, err error) (any, error) {
	if xs == nil {
		xs = []T{}
	}
	return xs, err
}
