package backend

import (
	"context"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/backend/frame"
)

func (h *harness) inspect(timeoutMs int64) *wire.TInspectDatasetResponse {
	h.t.Helper()
	req := &wire.TInspectDatasetRequest{DatasetURI: "/data/db/t.lance", StorageOptions: map[string]string{"region": "x"}}
	if timeoutMs != 0 {
		req.TimeoutMs = &timeoutMs
	}
	resp, err := h.client.Inspect(h.ctx(), h.a.Addr(), req)
	if err != nil {
		h.t.Fatalf("inspect: %v", err)
	}
	return resp
}

// Inspect needs no heartbeat, converts the worker's answer, and is bounded
// by min(timeout_ms, InspectTimeout).
func TestInspectConverts(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.InspectTimeout = 30 * time.Second })
	h.runner.setScript(func(_ context.Context, req *frame.Request) Outcome {
		return Outcome{Proof: ProofChildReaped, Result: &frame.Result{Protocol: 1, Mode: frame.ModeInspect, OK: true, DatasetVersion: 4,
			Fields: []frame.Field{
				{FieldID: 0, Name: "id", DataType: "int64"},
				{FieldID: 1, Name: "vector", DataType: "fixed_size_list", Nullable: true, ListDimension: 128, ElementType: "float32"},
			},
			Indexes: []frame.Index{{Name: "id_idx", IndexType: "BTREE", Columns: []string{"id"}}},
		}}
	})
	start := time.Now()
	resp := h.inspect(5000) // no heartbeat before it
	if resp.Status.StatusCode != wire.TStatusCode_OK || resp.GetDatasetVersion() != 4 || len(resp.Fields) != 2 || len(resp.Indexes) != 1 {
		t.Fatalf("inspect: %+v", resp)
	}
	v := resp.Fields[1]
	if v.GetListDimension() != 128 || v.GetElementType() != "float32" || v.GetElementNullable() || !v.Nullable || v.FieldID != 1 {
		t.Fatalf("vector field: %+v", v)
	}
	if resp.Fields[0].ListDimension != nil || resp.Fields[0].ElementType != nil {
		t.Fatalf("scalar field: %+v", resp.Fields[0])
	}
	if ix := resp.Indexes[0]; ix.Name != "id_idx" || ix.IndexType != "BTREE" || len(ix.Columns) != 1 || ix.PropertiesJSON != nil {
		t.Fatalf("index: %+v", ix)
	}
	req, deadline := h.runner.lastRequest()
	if req.Mode != frame.ModeInspect || req.DatasetURI != "/data/db/t.lance" || req.StorageOptions["region"] != "x" || req.InvocationID != "" {
		t.Fatalf("worker request: %+v", req)
	}
	// 5 s less the reserve (a fifth): 4 s.
	if d := deadline.Sub(start); d > 4*time.Second+time.Second || d < 3*time.Second {
		t.Fatalf("worker deadline %s after the call; want ≈ 4 s (the request's 5 s less the reserve)", d)
	}
	h.inspect(0)
	if _, deadline := h.runner.lastRequest(); deadline.Sub(time.Now()) < 20*time.Second {
		t.Fatal("without timeout_ms the InspectTimeout (30 s) should bound it")
	}
	h.inspect(3_600_000)
	if _, deadline := h.runner.lastRequest(); deadline.Sub(time.Now()) > 31*time.Second {
		t.Fatal("a timeout_ms above InspectTimeout must be capped")
	}
}

func TestInspectFailures(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.InspectTimeout = 200 * time.Millisecond })
	for _, tc := range []struct {
		out  Outcome
		want wire.TStatusCode
	}{
		{Outcome{Result: &frame.Result{Mode: frame.ModeInspect, ErrorCode: "NOT_FOUND", Message: "no dataset"}}, wire.TStatusCode_NOT_FOUND},
		{Outcome{Result: &frame.Result{Mode: frame.ModeInspect, ErrorCode: "INVALID_ARGUMENT"}}, wire.TStatusCode_INVALID_ARGUMENT},
		{Outcome{Result: &frame.Result{Mode: frame.ModeInspect, ErrorCode: "IO"}}, wire.TStatusCode_RUNTIME_ERROR},
		{Outcome{Result: &frame.Result{Mode: frame.ModeInspect, ErrorCode: "WHATEVER"}}, wire.TStatusCode_INTERNAL_ERROR},
		{Outcome{Result: &frame.Result{Mode: frame.ModeBuild, OK: true}}, wire.TStatusCode_INTERNAL_ERROR},
		{Outcome{Failure: "crashed", Signal: "SIGSEGV"}, wire.TStatusCode_INTERNAL_ERROR},
	} {
		h.runner.setScript(func(context.Context, *frame.Request) Outcome { return tc.out })
		resp := h.inspect(0)
		if resp.Status.StatusCode != tc.want || len(resp.Status.ErrorMsgs) != 1 || resp.Status.ErrorMsgs[0] == "" {
			t.Errorf("%+v: %+v, want %s with a message", tc.out, resp.Status, tc.want)
		}
	}
	// A worker that outlives the timeout: the Runner is cancelled → TIMEOUT.
	h.runner.setScript(func(ctx context.Context, _ *frame.Request) Outcome {
		<-ctx.Done()
		return Outcome{Proof: ProofChildReaped, Failure: "killed"}
	})
	if resp := h.inspect(0); resp.Status.StatusCode != wire.TStatusCode_TIMEOUT {
		t.Fatalf("slow worker: %s", resp.Status.StatusCode)
	}
	// Bad requests.
	resp, err := h.client.Inspect(h.ctx(), h.a.Addr(), &wire.TInspectDatasetRequest{DatasetURI: ""})
	if err != nil || resp.Status.StatusCode != wire.TStatusCode_INVALID_ARGUMENT {
		t.Fatalf("no uri: %v %+v", err, resp)
	}
	resp, err = h.client.Inspect(h.ctx(), h.a.Addr(), &wire.TInspectDatasetRequest{DatasetURI: "/x", StorageOptions: map[string]string{"": "v"}})
	if err != nil || resp.Status.StatusCode != wire.TStatusCode_INVALID_ARGUMENT {
		t.Fatalf("bad options: %v %+v", err, resp)
	}
}

func TestInspectNeedsVerifiedIsolation(t *testing.T) {
	h := newHarness(t, nil)
	h.runner.verified.Store(false)
	if resp := h.inspect(0); resp.Status.StatusCode != wire.TStatusCode_NOT_READY {
		t.Fatalf("required, unverified: %s", resp.Status.StatusCode)
	}
	be := newHarness(t, func(c *Config) { c.Isolation = IsolationBestEffort })
	be.runner.verified.Store(false)
	if resp := be.inspect(0); resp.Status.StatusCode != wire.TStatusCode_OK {
		t.Fatalf("best-effort, unverified: %s", resp.Status.StatusCode)
	}
	be.ready(1)
	if got := be.submit(be.dispatch("inv", 1)); got != wire.TStatusCode_OK {
		t.Fatalf("best-effort submit: %s", got)
	}
}
