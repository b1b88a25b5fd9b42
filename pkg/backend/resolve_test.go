package backend

import (
	"context"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/backend/frame"
)

const (
	resolveUUID  = "82bd4ae1-fb5d-4df3-9105-bbc59c9b221a"
	resolveOther = "0aea10f2-75e1-4bbf-916e-0f03f3802a97"
	resolveKey   = "resolve-secret-key-9f2c"
)

func resolveReq(mod func(r *wire.TResolveJobRequest)) *wire.TResolveJobRequest {
	u, au, trust := resolveUUID, resolveOther, true
	r := &wire.TResolveJobRequest{JobID: 9, DatasetURI: "/data/db/t.lance", StorageOptions: map[string]string{"aws_secret_access_key": resolveKey},
		MutationType: wire.TLanceIndexMutationType_REPLACE, IndexName: "vec", AdmittedDatasetVersion: 4,
		IndexUUID: &u, AdmittedIndexUUID: &au, TrustExclusiveWriter: &trust}
	if mod != nil {
		mod(r)
	}
	return r
}

func (h *harness) resolve(r *wire.TResolveJobRequest) *wire.TResolveJobResponse {
	h.t.Helper()
	resp, err := h.client.Resolve(h.ctx(), h.a.Addr(), r)
	if err != nil {
		h.t.Fatalf("resolve: %v", err)
	}
	return resp
}

func resolved(outcome, uuid, evidence string, head int64) Outcome {
	return Outcome{Proof: ProofChildReaped, Result: &frame.Result{Protocol: 1, Mode: frame.ModeResolve, OK: true,
		Outcome: outcome, IndexUUID: uuid, Evidence: evidence, HeadVersion: head}}
}

// Resolve needs no heartbeat, hands the worker a resolve frame with every
// field, is bounded by min(timeout_ms, InspectTimeout), and maps the answer.
func TestResolveRequestAndMapping(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.InspectTimeout = 30 * time.Second })
	h.runner.setScript(func(context.Context, *frame.Request) Outcome {
		return resolved("COMMITTED", resolveUUID, "version 5 lists \"vec\" with this invocation's uuid; key "+resolveKey, 7)
	})
	timeout := int64(5000)
	start := time.Now()
	resp := h.resolve(resolveReq(func(r *wire.TResolveJobRequest) { r.TimeoutMs = &timeout }))
	if resp.Status.StatusCode != wire.TStatusCode_OK || resp.GetOutcome() != wire.TLanceResolveOutcome_COMMITTED ||
		resp.GetIndexUUID() != resolveUUID || resp.GetHeadVersion() != 7 {
		t.Fatalf("resolve: %+v", resp)
	}
	if ev := resp.GetEvidence(); !strings.Contains(ev, "version 5 lists") || strings.Contains(ev, resolveKey) {
		t.Fatalf("evidence not scrubbed or lost: %q", ev)
	}
	req, deadline := h.runner.lastRequest()
	want := frame.Request{Protocol: 1, Mode: frame.ModeResolve, DatasetURI: "/data/db/t.lance", JobID: 9, MutationType: "REPLACE",
		IndexName: "vec", AdmittedDatasetVersion: 4, IndexUUID: resolveUUID, AdmittedIndexUUID: resolveOther, TrustExclusiveWriter: true}
	got := *req
	if got.StorageOptions["aws_secret_access_key"] != resolveKey {
		t.Fatalf("storage options not handed to the worker: %+v", got.StorageOptions)
	}
	got.StorageOptions = nil
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("worker request:\n got %+v\nwant %+v", got, want)
	}
	if d := deadline.Sub(start); d > 5*time.Second || d < 3*time.Second {
		t.Fatalf("worker deadline %s after the call; want ≈ 4 s (the request's 5 s less the reserve)", d)
	}

	for _, c := range []struct {
		out     Outcome
		outcome wire.TLanceResolveOutcome
		uuid    bool
	}{
		{resolved("NOT_COMMITTED", "", "contiguous", 6), wire.TLanceResolveOutcome_NOT_COMMITTED, false},
		{resolved("UNKNOWN", "", "versions 5 are not retained (pruned)", 6), wire.TLanceResolveOutcome_UNKNOWN, false},
		// A uuid on an answer other than COMMITTED is not passed on.
		{resolved("NOT_COMMITTED", resolveOther, "x", 6), wire.TLanceResolveOutcome_NOT_COMMITTED, false},
		// DROP's COMMITTED (trust) has no uuid.
		{resolved("COMMITTED", "", "absent from 5", 6), wire.TLanceResolveOutcome_COMMITTED, false},
	} {
		h.runner.setScript(func(context.Context, *frame.Request) Outcome { return c.out })
		resp := h.resolve(resolveReq(nil))
		if resp.Status.StatusCode != wire.TStatusCode_OK || resp.GetOutcome() != c.outcome || (resp.IndexUUID != nil) != c.uuid ||
			resp.GetEvidence() != c.out.Result.Evidence || resp.GetHeadVersion() != 6 {
			t.Fatalf("%+v: %+v", c.out.Result, resp)
		}
	}
}

// Failures are statuses, never outcomes: the worker's typed errors, a
// malformed answer, no answer, a timeout; storage options never echoed.
func TestResolveFailures(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.InspectTimeout = 300 * time.Millisecond })
	fail := func(code, msg string) Outcome {
		return Outcome{Proof: ProofChildReaped, Result: &frame.Result{Protocol: 1, Mode: frame.ModeResolve, ErrorCode: code, Message: msg}}
	}
	cases := []struct {
		out  Outcome
		want wire.TStatusCode
	}{
		{fail("NOT_FOUND", "no dataset at "+resolveKey), wire.TStatusCode_NOT_FOUND},
		{fail("INVALID_ARGUMENT", ""), wire.TStatusCode_INVALID_ARGUMENT},
		{fail("IO", "403"), wire.TStatusCode_RUNTIME_ERROR},
		{fail("INTERNAL", "panic"), wire.TStatusCode_INTERNAL_ERROR},
		{fail("WHAT", "x"), wire.TStatusCode_INTERNAL_ERROR},
		{resolved("MAYBE", "", "", 3), wire.TStatusCode_INTERNAL_ERROR},
		{resolved("COMMITTED", "", "", 0), wire.TStatusCode_INTERNAL_ERROR},
		{resolved("NOT_COMMITTED", "", "", 0), wire.TStatusCode_INTERNAL_ERROR},
		{resolved("UNKNOWN", "", "", -1), wire.TStatusCode_INTERNAL_ERROR},
		{resolved("COMMITTED", "NOT-A-UUID", "", 3), wire.TStatusCode_INTERNAL_ERROR},
		{Outcome{Proof: ProofChildReaped, Result: &frame.Result{Protocol: 1, Mode: frame.ModeInspect, OK: true}}, wire.TStatusCode_INTERNAL_ERROR},
		// Another mode's frame is no resolve answer, even one that reads as an outcome.
		{Outcome{Proof: ProofChildReaped, Result: &frame.Result{Protocol: 1, Mode: frame.ModeInspect, OK: true,
			Outcome: frame.OutcomeCommitted, HeadVersion: 3}}, wire.TStatusCode_INTERNAL_ERROR},
		{Outcome{Proof: ProofChildReaped, Failure: "exit status 1 " + resolveKey, ExitCode: 1}, wire.TStatusCode_INTERNAL_ERROR},
	}
	for _, c := range cases {
		h.runner.setScript(func(context.Context, *frame.Request) Outcome { return c.out })
		resp := h.resolve(resolveReq(nil))
		if resp.Status.StatusCode != c.want || resp.Outcome != nil || resp.Evidence != nil {
			t.Fatalf("%+v: %+v", c.out, resp)
		}
		if strings.Contains(strings.Join(resp.Status.ErrorMsgs, " "), resolveKey) {
			t.Fatalf("a storage option value leaked: %v", resp.Status.ErrorMsgs)
		}
	}
	// A worker that hangs past the deadline: TIMEOUT.
	h.runner.setScript(func(ctx context.Context, _ *frame.Request) Outcome {
		<-ctx.Done()
		return Outcome{Proof: ProofChildReaped, Failure: "killed", Signal: "SIGKILL"}
	})
	if resp := h.resolve(resolveReq(nil)); resp.Status.StatusCode != wire.TStatusCode_TIMEOUT {
		t.Fatalf("hung worker: %+v", resp)
	}
}

// Malformed requests are refused before any worker runs.
func TestResolveRefusesMalformedRequests(t *testing.T) {
	h := newHarness(t, nil)
	var ran atomic.Int32
	h.runner.setScript(func(context.Context, *frame.Request) Outcome { ran.Add(1); return resolved("UNKNOWN", "", "", 1) })
	bad := []func(r *wire.TResolveJobRequest){
		func(r *wire.TResolveJobRequest) { r.DatasetURI = "" },
		func(r *wire.TResolveJobRequest) { r.DatasetURI = "bad\xff" },
		func(r *wire.TResolveJobRequest) { r.MutationType = 0 },
		func(r *wire.TResolveJobRequest) { r.MutationType = 9 },
		func(r *wire.TResolveJobRequest) { r.IndexName = " " },
		func(r *wire.TResolveJobRequest) { r.AdmittedDatasetVersion = 0 },
		func(r *wire.TResolveJobRequest) { u := "nope"; r.IndexUUID = &u },
		func(r *wire.TResolveJobRequest) { u := "{" + resolveOther + "}"; r.AdmittedIndexUUID = &u },
		func(r *wire.TResolveJobRequest) { r.StorageOptions = map[string]string{"": "v"} },
	}
	for i, mod := range bad {
		if resp := h.resolve(resolveReq(mod)); resp.Status.StatusCode != wire.TStatusCode_INVALID_ARGUMENT {
			t.Fatalf("case %d: %+v", i, resp)
		}
	}
	if n := ran.Load(); n != 0 {
		t.Fatalf("a worker ran %d times for malformed requests", n)
	}
	// UNKNOWN with no version read: no head version.
	h.runner.setScript(func(context.Context, *frame.Request) Outcome {
		return resolved("UNKNOWN", "", "no version is retained", 0)
	})
	if resp := h.resolve(resolveReq(nil)); resp.Status.StatusCode != wire.TStatusCode_OK || resp.HeadVersion != nil ||
		resp.GetOutcome() != wire.TLanceResolveOutcome_UNKNOWN {
		t.Fatalf("UNKNOWN without a head: %+v", resp)
	}
	h.runner.setScript(func(context.Context, *frame.Request) Outcome { ran.Add(1); return resolved("UNKNOWN", "", "", 1) })
	// Upper-case uuids go to the worker in lower case.
	if resp := h.resolve(resolveReq(func(r *wire.TResolveJobRequest) { u := strings.ToUpper(resolveUUID); r.IndexUUID = &u })); resp.Status.StatusCode != wire.TStatusCode_OK {
		t.Fatalf("upper-case uuid: %+v", resp)
	}
	if req, _ := h.runner.lastRequest(); req.IndexUUID != resolveUUID {
		t.Fatalf("worker got uuid %q", req.IndexUUID)
	}
	// Empty uuids are fine (unknown).
	if resp := h.resolve(resolveReq(func(r *wire.TResolveJobRequest) { r.IndexUUID, r.AdmittedIndexUUID = nil, nil })); resp.Status.StatusCode != wire.TStatusCode_OK {
		t.Fatalf("no uuids: %+v", resp)
	}
}

// The inspect guards: unverified isolation is NOT_READY, a closing agent
// SHUTTING_DOWN; neither runs a worker.
func TestResolveGuards(t *testing.T) {
	h := newHarness(t, nil)
	h.runner.verified.Store(false)
	var ran atomic.Int32
	h.runner.setScript(func(context.Context, *frame.Request) Outcome { ran.Add(1); return resolved("UNKNOWN", "", "", 1) })
	if resp := h.resolve(resolveReq(nil)); resp.Status.StatusCode != wire.TStatusCode_NOT_READY {
		t.Fatalf("unverified isolation: %+v", resp)
	}
	h.runner.verified.Store(true)
	h.a.mu.Lock()
	h.a.shutting = true
	h.a.mu.Unlock()
	resp, err := (&service{a: h.a}).ResolveLanceIndexJob(context.Background(), resolveReq(nil))
	if err != nil || resp.Status.StatusCode != wire.TStatusCode_SHUTTING_DOWN {
		t.Fatalf("shutting down: %+v %v", resp, err)
	}
	h.a.mu.Lock()
	h.a.shutting = false
	h.a.mu.Unlock()
	if n := ran.Load(); n != 0 {
		t.Fatalf("a worker ran %d times", n)
	}
}
