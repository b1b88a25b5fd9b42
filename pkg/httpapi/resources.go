package httpapi

import (
	"context"
	"net/http"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
)

// simple serves an endpoint without parameters (but consistent): get reads
// the resource, which goes into the body under key.
func (a *API) simple(w http.ResponseWriter, r *http.Request, key string, get func(ctx context.Context) (any, error)) {
	q, err := parseQuery(r)
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
	v, err := get(rd.ctx)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.reply(w, r, rd, map[string]any{key: v}, "")
}

// listCatalogs is GET /v1/catalogs: catalogs list (a credentials
// reference is a name under the secrets dir, never the file's content).
func (a *API) listCatalogs(w http.ResponseWriter, r *http.Request) {
	a.simple(w, r, "catalogs", func(ctx context.Context) (any, error) {
		cats, err := a.d.Admin.ListCatalogs(ctx)
		if cats == nil {
			cats = []*adminapi.TCatalog{}
		}
		return cats, err
	})
}

// listBackends is GET /v1/backends: backends list, with the leader's
// heartbeat view.
func (a *API) listBackends(w http.ResponseWriter, r *http.Request) {
	a.simple(w, r, "backends", func(ctx context.Context) (any, error) {
		bes, err := a.d.Admin.ListBackends(ctx)
		if bes == nil {
			bes = []*adminapi.TBackend{}
		}
		return bes, err
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
		opts, err := a.d.Admin.ListOptions(ctx)
		if opts == nil {
			opts = []*adminapi.TOption{}
		}
		return opts, err
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
