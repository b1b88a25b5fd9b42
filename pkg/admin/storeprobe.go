package admin

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/objstore"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// storeProbeTimeout bounds one probe_object_store call (the backend's own
// probe is bounded by the timeout_ms it is sent, a little less).
const storeProbeTimeout = 20 * time.Second

// checkCatalogStore vouches for a catalog's object store before it is
// journaled: when the catalog's root (rec's, or for an update the current
// one) is on an object store and the request sets the root or the
// credentials reference, a live backend probes the store with the
// catalog's credentials, resolved from the secrets directory here as
// admission does. A store that does not honour conditional PUT is refused
// (INVALID): Lance would lose one of two concurrent commits there. No live
// backend, or none that could answer, is UNAVAILABLE. Nothing is journaled
// on a refusal. The error is an admin error, ready to return.
func (s *Server) checkCatalogStore(ctx context.Context, rec *journal.TCatalogRecord, update bool) error {
	if err := s.vouchForStore(ctx, rec, update); err != nil {
		return toAdminError(err)
	}
	return nil
}

func (s *Server) vouchForStore(ctx context.Context, rec *journal.TCatalogRecord, update bool) error {
	st := s.d.Reader.State()
	root, ref := rec.GetRootURI(), rec.GetCredentialsRef()
	if update {
		if rec.RootURI == nil && rec.CredentialsRef == nil {
			return nil // neither where nor how the store is reached changes
		}
		if cur, ok := st.Catalog(rec.Name); ok {
			if rec.RootURI == nil {
				root = cur.RootURI
			}
			if rec.CredentialsRef == nil {
				ref = cur.CredentialsRef
			}
		}
	}
	if !objstore.IsObjectStore(root) {
		return nil
	}
	opts, err := s.d.Credentials.Resolve(ref)
	if err != nil {
		// The error names the reference, never the content.
		return job.Errorf(job.CodeInvalid, "credentials of catalog %q cannot be read: %v", rec.Name, err)
	}
	backends := s.liveBackends(st)
	if len(backends) == 0 {
		return job.Errorf(job.CodeUnavailable, "no live backend can probe the object store at %s for conditional PUT; "+
			"add one with `backends add` and wait until it is alive, then try again", root)
	}
	scrub := secretValues(opts)
	var cluster *string // the backend fences another cluster's leader
	if id := st.ClusterID(); id != "" {
		cluster = &id
	}
	timeoutMs := (storeProbeTimeout - 2*time.Second).Milliseconds()
	var tried []string
	for _, b := range backends {
		pctx, cancel := context.WithTimeout(ctx, storeProbeTimeout)
		resp, err := s.d.Backends.ProbeStore(pctx, b.Address, &wire.TProbeStoreRequest{RootURI: root, StorageOptions: opts,
			ClusterID: cluster, TimeoutMs: &timeoutMs})
		cancel()
		switch {
		case err != nil:
			tried = append(tried, fmt.Sprintf("backend %d unreachable", b.ID))
			s.d.Logger.Warn("store probe: backend unreachable", zap.Int64("backend_id", b.ID), zap.Error(err))
			continue
		case resp == nil || resp.Status == nil:
			tried = append(tried, fmt.Sprintf("backend %d answered without a status", b.ID))
			continue
		}
		msg := ""
		if len(resp.Status.ErrorMsgs) > 0 {
			msg = scrub(job.TruncateMessage(resp.Status.ErrorMsgs[0]))
		}
		switch resp.Status.StatusCode {
		case wire.TStatusCode_OK:
		case wire.TStatusCode_INVALID_ARGUMENT, wire.TStatusCode_RUNTIME_ERROR:
			// The backend reached the store (or read the options) and
			// says what is wrong: the operator's to fix.
			return job.Errorf(job.CodeInvalid, "the object store at %s could not be vouched for conditional PUT (backend %d): %s", root, b.ID, msg)
		default: // cannot probe now (an older backend, shutting down, another cluster): ask the next
			tried = append(tried, fmt.Sprintf("backend %d: %s %s", b.ID, resp.Status.StatusCode, msg))
			continue
		}
		detail := scrub(job.TruncateMessage(resp.GetDetail()))
		if !resp.IsSetConditionalPut() || !resp.GetConditionalPut() {
			s.d.Logger.Warn("catalog refused: the object store ignores conditional PUT", zap.String("catalog", rec.Name),
				zap.Int64("backend_id", b.ID), zap.String("detail", detail))
			return job.Errorf(job.CodeInvalid, "the object store at %s does not honour conditional PUT (If-None-Match); "+
				"Lance would lose concurrent commits (backend %d: %s)", root, b.ID, detail)
		}
		s.d.Logger.Info("object store vouched for", zap.String("catalog", rec.Name), zap.Int64("backend_id", b.ID),
			zap.String("detail", detail))
		return nil
	}
	return job.Errorf(job.CodeUnavailable, "no backend could probe the object store at %s for conditional PUT (%s)",
		root, strings.Join(tried, "; "))
}

// liveBackends are the registered backends the leader hears as alive (all
// registered ones when the server has no view of liveness).
func (s *Server) liveBackends(st *raftfsm.State) []*raftfsm.Backend {
	all := st.Backends()
	if s.d.BackendView == nil {
		return all
	}
	var live []*raftfsm.Backend
	for _, b := range all {
		if alive, _, known := s.d.BackendView(b.ID); known && alive {
			live = append(live, b)
		}
	}
	return live
}

// secretValues returns a function that removes every credential value from
// a backend's words (a backend is meant never to echo one; this is the
// master not trusting that). The endpoint, region and allow_http stay
// readable.
func secretValues(opts map[string]string) func(string) string {
	var secrets []string
	for k, v := range opts {
		if len(v) >= 4 && !objstore.IsDescriptiveOption(k) {
			secrets = append(secrets, v)
		}
	}
	return func(s string) string {
		for _, v := range secrets {
			s = strings.ReplaceAll(s, v, "[redacted]")
		}
		return s
	}
}
