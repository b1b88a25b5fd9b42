package admin

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/lancemaster/lancemaster/pkg/testkit"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/gen-go/wire"
)

// probeRecorder programs the fake backend's probe_object_store and keeps
// the requests it saw.
type probeRecorder struct {
	mu   sync.Mutex
	seen []*wire.TProbeStoreRequest
	resp *wire.TProbeStoreResponse
}

func (p *probeRecorder) install(h *harness) {
	h.backend.SetProbeStoreHook(func(r *wire.TProbeStoreRequest) *wire.TProbeStoreResponse {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.seen = append(p.seen, r)
		return p.resp
	})
}

func (p *probeRecorder) answer(ok bool, detail string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.resp = &wire.TProbeStoreResponse{Status: &wire.TStatus{StatusCode: wire.TStatusCode_OK},
		ConditionalPut: thrift.BoolPtr(ok), Detail: thrift.StringPtr(detail)}
}

func (p *probeRecorder) fail(code wire.TStatusCode, msg string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.resp = &wire.TProbeStoreResponse{Status: &wire.TStatus{StatusCode: code, ErrorMsgs: []string{msg}}}
}

func (p *probeRecorder) calls() int { p.mu.Lock(); defer p.mu.Unlock(); return len(p.seen) }

func (p *probeRecorder) last() *wire.TProbeStoreRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seen[len(p.seen)-1]
}

// catalogs create and update with an object-store root ask a backend to
// probe, with the catalog's credentials; a store that ignores If-None-Match
// is refused INVALID and nothing is journaled; a probe that fails is
// INVALID with the backend's words, never the credential; a local root and
// an update that changes neither root nor credentials probe nothing.
func TestCatalogOnAnObjectStoreNeedsConditionalPut(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	p := &probeRecorder{}
	p.install(h)
	create := func(name, root string) error {
		_, err := h.srv.CreateCatalog(ctx, &adminapi.TCatalog{Name: name, RootURI: strp(root), CredentialsRef: strp("lake-creds")}, "")
		return err
	}
	const why = "does not honour conditional PUT (If-None-Match); Lance would lose concurrent commits"

	p.answer(false, "the object store at s3://b at http://127.0.0.1:9 accepted a second PUT")
	before := h.prop.Index()
	err := create("s3bad", "s3://b/prefix")
	if err == nil || errCode(t, err) != adminapi.TErrorCode_INVALID || !strings.Contains(err.Error(), why) ||
		!strings.Contains(err.Error(), "s3://b/prefix") {
		t.Fatalf("a store that ignores If-None-Match: %v", err)
	}
	if n := h.prop.Index() - before; n != 0 {
		t.Fatalf("the refused catalog journaled %d entries", n)
	}
	req := p.last()
	if req.RootURI != "s3://b/prefix" || req.StorageOptions["aws_secret_access_key"] != canarySecret || req.GetTimeoutMs() <= 0 {
		t.Fatalf("probe request: root %q, options carried the credentials %v, timeout %d", req.RootURI,
			req.StorageOptions["aws_secret_access_key"] == canarySecret, req.GetTimeoutMs())
	}

	p.answer(true, "412 to the second PUT")
	if err := create("s3good", "s3://b/prefix"); err != nil {
		t.Fatalf("a store that honours If-None-Match: %v", err)
	}
	// Update: moving a local catalog onto a bad store is refused; an
	// update of the refresh fields probes nothing.
	p.answer(false, "ignores it")
	if _, err := h.srv.UpdateCatalog(ctx, &adminapi.TUpdateCatalogRequest{Name: "lake", RootURI: strp("s3://b/lake")}); err == nil ||
		errCode(t, err) != adminapi.TErrorCode_INVALID || !strings.Contains(err.Error(), why) {
		t.Fatalf("update onto a bad store: %v", err)
	}
	calls := p.calls()
	if _, err := h.srv.UpdateCatalog(ctx, &adminapi.TUpdateCatalogRequest{Name: "s3good", RefreshKind: strp("none")}); err != nil || p.calls() != calls {
		t.Fatalf("a refresh-only update: %v, %d probes", err, p.calls()-calls)
	}
	// Rotating the credentials of an object-store catalog probes with the
	// current root.
	if _, err := h.srv.UpdateCatalog(ctx, &adminapi.TUpdateCatalogRequest{Name: "s3good", CredentialsRef: strp("lake-creds")}); err == nil ||
		p.last().RootURI != "s3://b/prefix" {
		t.Fatalf("credentials update on a bad store: %v (root probed %q)", err, p.last().RootURI)
	}
	// A probe that could not reach a verdict: INVALID with the backend's
	// words, the credential scrubbed even if a backend echoed it.
	p.fail(wire.TStatusCode_RUNTIME_ERROR, "the probe's first PUT failed (HTTP 403 AccessDenied) key "+canarySecret)
	err = create("s3denied", "s3://b/other")
	if err == nil || errCode(t, err) != adminapi.TErrorCode_INVALID || !strings.Contains(err.Error(), "HTTP 403") || strings.Contains(err.Error(), canarySecret) {
		t.Fatalf("a failed probe: %v", err)
	}
	// A backend that cannot probe (an older one): UNAVAILABLE.
	p.fail(wire.TStatusCode_NOT_IMPLEMENTED_ERROR, "object store probes are not served by this backend")
	if err = create("s3old", "s3://b/other"); err == nil || errCode(t, err) != adminapi.TErrorCode_UNAVAILABLE {
		t.Fatalf("an older backend: %v", err)
	}
	// Local roots and gs:// need no backend's word here (gs is vouched
	// for by the backend, but a local root never asks).
	calls = p.calls()
	if err := create("local2", "/data/local2"); err != nil || p.calls() != calls {
		t.Fatalf("a local root: %v, %d probes", err, p.calls()-calls)
	}
	testkit.NoSecretInLogs(t, h.logs, canarySecret)
}

// No live backend: UNAVAILABLE, saying what to do, and nothing journaled.
func TestCatalogOnAnObjectStoreWithoutALiveBackend(t *testing.T) {
	h := newHarness(t)
	p := &probeRecorder{}
	p.install(h)
	h.srv.d.BackendView = func(int64) (bool, int64, bool) { return false, 0, true }
	before := h.prop.Index()
	_, err := h.srv.CreateCatalog(context.Background(), &adminapi.TCatalog{Name: "s3", RootURI: strp("s3://b/p")}, "")
	if err == nil || errCode(t, err) != adminapi.TErrorCode_UNAVAILABLE || !strings.Contains(err.Error(), "no live backend") {
		t.Fatalf("no live backend: %v", err)
	}
	if h.prop.Index() != before || p.calls() != 0 {
		t.Fatalf("journaled %d entries, %d probes", h.prop.Index()-before, p.calls())
	}
}
