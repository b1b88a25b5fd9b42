package backend

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/pkg/testkit"

	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/objstore"
	"github.com/lancemaster/lancemaster/pkg/s3test"
)

const storeCanary = "STORE-CANARY-b7d2e04f19"

func (h *harness) probeStore(root string, opts map[string]string, cluster string) *wire.TProbeStoreResponse {
	h.t.Helper()
	r := &wire.TProbeStoreRequest{RootURI: root, StorageOptions: opts}
	if cluster != "" {
		r.ClusterID = &cluster
	}
	resp, err := h.client.ProbeStore(h.ctx(), h.a.Addr(), r)
	if err != nil {
		h.t.Fatalf("probe: %v", err)
	}
	return resp
}

// noCanary fails when any status message, detail or log line carries the
// secret.
func (h *harness) noCanary(texts ...string) {
	h.t.Helper()
	testkit.NoSecret(h.t, "message", texts, storeCanary)
	testkit.NoSecretInLogs(h.t, h.logs, storeCanary)
}

// probe_object_store on the S3 fake: a store that honours If-None-Match is
// conditional_put true (two conditional PUTs, the object deleted); one that
// ignores it is false, saying so; gs:// and az:// are true without a probe;
// refused credentials are RUNTIME_ERROR; another cluster is OTHER_CLUSTER.
// No answer and no log line carries the secret.
func TestProbeObjectStore(t *testing.T) {
	h := newHarness(t, nil)
	good, bad := s3test.Start(t), s3test.StartIgnoringConditionalPut(t)

	resp := h.probeStore(good.Root("prefix"), good.StorageOptions(storeCanary), "")
	if resp.Status.StatusCode != wire.TStatusCode_OK || !resp.GetConditionalPut() || !strings.Contains(resp.GetDetail(), "412") {
		t.Fatalf("honouring store: %+v", resp)
	}
	if good.ConditionalPuts() != 2 || len(good.Keys(t, "")) != 0 {
		t.Fatalf("conditional PUTs %d, objects left %v", good.ConditionalPuts(), good.Keys(t, ""))
	}
	resp = h.probeStore(bad.Root("prefix"), bad.StorageOptions(storeCanary), "")
	if resp.Status.StatusCode != wire.TStatusCode_OK || resp.GetConditionalPut() || !strings.Contains(resp.GetDetail(), "ignores the precondition") {
		t.Fatalf("ignoring store: %+v", resp)
	}
	for _, root := range []string{"gs://b/p", "az://c/p"} {
		resp = h.probeStore(root, nil, "")
		if resp.Status.StatusCode != wire.TStatusCode_OK || !resp.GetConditionalPut() || !strings.Contains(resp.GetDetail(), "natively") {
			t.Fatalf("%s: %+v", root, resp)
		}
	}
	forbidden, _ := s3test.StartForbidden(t)
	resp = h.probeStore("s3://lake/p", map[string]string{"aws_endpoint": forbidden, "allow_http": "true",
		"aws_access_key_id": storeCanary, "aws_secret_access_key": storeCanary + "x"}, "")
	if resp.Status.StatusCode != wire.TStatusCode_RUNTIME_ERROR || !strings.Contains(resp.Status.ErrorMsgs[0], "HTTP 403") {
		t.Fatalf("forbidden: %+v", resp)
	}
	h.noCanary(resp.Status.ErrorMsgs...)
	if resp = h.probeStore("ftp://x/y", nil, ""); resp.Status.StatusCode != wire.TStatusCode_INVALID_ARGUMENT {
		t.Fatalf("ftp: %+v", resp)
	}
	h.heartbeatCluster("A", 1)
	if resp = h.probeStore(good.Root("p"), good.StorageOptions(storeCanary), "B"); resp.Status.StatusCode != wire.TStatusCode_OTHER_CLUSTER {
		t.Fatalf("another cluster: %+v", resp)
	}
	h.noCanary()
}

// Every inspect, submit and resolve of a dataset on an s3:// store that
// ignores If-None-Match is refused before a worker runs: inspect and
// resolve with a non-OK status naming the reason, submit with a non-OK
// status, and the invocation is unknown (never enqueued). On a store that
// honours it, the same requests reach the worker.
func TestRequestsOnAStoreIgnoringConditionalPutAreRefused(t *testing.T) {
	h := newHarness(t, nil)
	h.heartbeat(1)
	bad, good := s3test.StartIgnoringConditionalPut(t), s3test.Start(t)
	uri := bad.Root("prefix/db/items.lance")
	const why = "does not honour conditional PUT (If-None-Match); Lance would lose concurrent commits"

	ins, err := h.client.Inspect(h.ctx(), h.a.Addr(), &wire.TInspectDatasetRequest{DatasetURI: uri, StorageOptions: bad.StorageOptions(storeCanary)})
	if err != nil || ins.Status.StatusCode != wire.TStatusCode_INVALID_ARGUMENT || !strings.Contains(ins.Status.ErrorMsgs[0], why) {
		t.Fatalf("inspect: %+v %v", ins, err)
	}
	d := h.dispatch("s3-bad", 1)
	d.DatasetURI, d.StorageOptions = uri, bad.StorageOptions(storeCanary)
	st, err := h.client.Submit(h.ctx(), h.a.Addr(), d)
	if err != nil || st.StatusCode != wire.TStatusCode_INVALID_ARGUMENT || !strings.Contains(st.ErrorMsgs[0], why) {
		t.Fatalf("submit: %+v %v", st, err)
	}
	if got := h.state(1, "s3-bad").State; got != wire.TLanceInvocationState_UNKNOWN_INVOCATION {
		t.Fatalf("the refused dispatch is %s, want UNKNOWN_INVOCATION", got)
	}
	res := h.resolve(resolveReq(func(r *wire.TResolveJobRequest) {
		r.DatasetURI, r.StorageOptions = uri, bad.StorageOptions(storeCanary)
	}))
	if res.Status.StatusCode != wire.TStatusCode_INVALID_ARGUMENT || !strings.Contains(res.Status.ErrorMsgs[0], why) {
		t.Fatalf("resolve: %+v", res)
	}
	h.runner.mu.Lock()
	ran := len(h.runner.requests)
	h.runner.mu.Unlock()
	if ran != 0 {
		t.Fatalf("%d worker runs on a store that ignores If-None-Match", ran)
	}
	// The verdict is cached: one probe (two PUTs) for the three requests.
	if n := bad.ConditionalPuts(); n != 2 {
		t.Fatalf("%d conditional PUTs; want one probe for the bucket", n)
	}

	// The store that honours it: the requests reach the worker.
	guri := good.Root("prefix/db/items.lance")
	ins, _ = h.client.Inspect(h.ctx(), h.a.Addr(), &wire.TInspectDatasetRequest{DatasetURI: guri, StorageOptions: good.StorageOptions(storeCanary)})
	if ins.Status.StatusCode != wire.TStatusCode_OK {
		t.Fatalf("inspect on a good store: %+v", ins)
	}
	d = h.dispatch("s3-good", 1)
	d.DatasetURI, d.StorageOptions = guri, good.StorageOptions(storeCanary)
	if got := h.submit(d); got != wire.TStatusCode_OK {
		t.Fatalf("submit on a good store: %s", got)
	}
	h.runner.waitStarted(t, "s3-good")
	h.noCanary(ins.Status.GetErrorMsgs()...)
}

// A redelivery of an accepted dispatch answers OK even when the store is no
// longer vouched for: "not enqueued" about an enqueued dispatch would let
// the master release a slot whose worker may be running.
func TestRedeliveryIsAcknowledgedWhenTheProbeNowFails(t *testing.T) {
	h := newHarness(t, nil)
	h.heartbeat(1)
	var failing atomic.Bool
	h.a.stores.Probe = func(context.Context, objstore.Target, time.Duration) (objstore.Result, error) {
		if failing.Load() {
			return objstore.Result{}, &objstore.ProbeError{Msg: "the store is unreachable"}
		}
		return objstore.Result{ConditionalPut: true}, nil
	}
	h.a.stores.TTL = time.Nanosecond // every request probes again
	h.runner.hold()
	d := h.dispatch("inv", 1)
	d.DatasetURI, d.StorageOptions = "s3://lake/db/items.lance", map[string]string{"aws_endpoint": "http://127.0.0.1:9", "allow_http": "true"}
	if got := h.submit(d); got != wire.TStatusCode_OK {
		t.Fatalf("first submit: %s", got)
	}
	failing.Store(true)
	if got := h.submit(d); got != wire.TStatusCode_OK {
		t.Fatalf("redelivery: %s, want OK", got)
	}
	other := h.dispatch("inv2", 1)
	other.DatasetURI, other.StorageOptions = d.DatasetURI, d.StorageOptions
	if got := h.submit(other); got != wire.TStatusCode_RUNTIME_ERROR {
		t.Fatalf("a new dispatch while the probe fails: %s, want RUNTIME_ERROR", got)
	}
	if n := h.runner.runCount("inv"); n > 1 {
		t.Fatalf("ran %d times", n)
	}
}
