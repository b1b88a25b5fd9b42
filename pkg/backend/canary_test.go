package backend

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/lancemaster/lancemaster/pkg/testkit"

	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/backend/frame"
)

const (
	canaryKey   = "canary_key_7e2a91"
	canaryValue = "CANARY-VALUE-b44f0d8e"
)

// A canary storage key and value sent in a dispatch and an inspect reach the
// worker, and nothing else: no log line, no outbox byte, no report, no
// query answer, no status message — even when the worker echoes them
// everywhere it can.
func TestCanaryStorageOptionGoesNowhereButTheWorker(t *testing.T) {
	m := newFakeMaster(t)
	h := newHarness(t, func(c *Config) { c.Masters = []string{closedAddr(t)} })
	echo := fmt.Sprintf("failed with %s=%s and secret %s", canaryKey, canaryValue, testSecret)
	h.runner.setScript(func(ctx context.Context, req *frame.Request) Outcome {
		if req.Mode == frame.ModeBuild {
			playStderr(ctx, "stderr line: "+echo, canaryValue, "key "+canaryKey+" alone")
		}
		if req.Mode == frame.ModeInspect { // an inspect has no invocation secret to echo
			msg := fmt.Sprintf("failed with %s=%s", canaryKey, canaryValue)
			return Outcome{Proof: ProofChildReaped, Stderr: []byte(msg),
				Result: &frame.Result{Mode: frame.ModeInspect, ErrorCode: "IO", Message: msg}}
		}
		if req.InvocationID == "crash" {
			return Outcome{Proof: ProofChildReaped, Failure: echo, Stderr: []byte("stderr: " + echo), ExitCode: 3}
		}
		return Outcome{Proof: ProofChildReaped, Result: &frame.Result{Mode: frame.ModeBuild, ResultCode: "NATIVE_IO", Message: echo}}
	})
	h.ready(1)
	opts := map[string]string{canaryKey: "plain", "aws_secret_access_key": canaryValue}

	var answers, secretFree []string // secretFree: answers without the invocation secret either
	for _, id := range []string{"build", "crash"} {
		d := h.dispatch(id, 1)
		d.StorageOptions = opts
		if got := h.submit(d); got != wire.TStatusCode_OK {
			t.Fatal(got)
		}
		st := h.waitState(1, id, wire.TLanceInvocationState_FINISHED)
		b, _ := json.Marshal(st)
		answers = append(answers, string(b))
		if !strings.Contains(string(b), testSecret) {
			t.Fatalf("the query answer should carry the invocation secret (it authenticates the stored result)")
		}
		lr := h.jobLog(id, 1, 0)
		if !strings.Contains(lr.GetLog(), "stderr line: failed with [redacted]") {
			t.Fatalf("the job log should hold the scrubbed line (the scan would prove nothing): %q", lr.GetLog())
		}
		b, _ = json.Marshal(lr)
		answers = append(answers, string(b))
		secretFree = append(secretFree, string(b), st.GetResult_().GetLogTail())
	}
	req, _ := h.runner.lastRequest()
	if req.StorageOptions["aws_secret_access_key"] != canaryValue {
		t.Fatal("the storage options did not reach the worker (the scan below would prove nothing)")
	}

	timeout := int64(5000)
	resp, err := h.client.Inspect(h.ctx(), h.a.Addr(), &wire.TInspectDatasetRequest{DatasetURI: "/d.lance", StorageOptions: opts, TimeoutMs: &timeout})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status.StatusCode != wire.TStatusCode_RUNTIME_ERROR {
		t.Fatalf("inspect: %s", resp.Status.StatusCode)
	}
	b, _ := json.Marshal(resp)
	answers = append(answers, string(b))

	// Deliver now, then stop: the outbox is read after Close.
	h.heartbeat(1, m.Addr())
	eventually(t, func() bool { return m.callCount() >= 2 }, "reports not delivered")
	results, terms := m.received()
	for _, r := range results {
		b, _ := json.Marshal(r)
		answers = append(answers, string(b))
		secretFree = append(secretFree, r.GetLogTail())
	}
	for _, r := range terms {
		b, _ := json.Marshal(r)
		answers = append(answers, string(b))
		secretFree = append(secretFree, r.GetLogTail())
	}
	if len(results) == 0 || !strings.Contains(results[0].GetLogTail(), "[redacted]") {
		t.Fatal("the result report should carry the scrubbed log tail (the scan would prove nothing)")
	}
	for _, a := range secretFree {
		if strings.Contains(a, testSecret) {
			t.Errorf("a job log or log tail holds the invocation secret: %s", a)
		}
	}
	path := h.a.OutboxPath()
	// Put a report back in the outbox file so the scan covers stored bytes.
	h.a.dlv.mu.Lock()
	h.a.dlv.targets = []string{closedAddr(t)}
	h.a.dlv.mu.Unlock()
	d := h.dispatch("stored", 1)
	d.StorageOptions = opts
	h.submit(d)
	h.waitState(1, "stored", wire.TLanceInvocationState_FINISHED)
	if err := h.a.Close(); err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(file), `"stored"`) {
		t.Fatal("the outbox should hold the undelivered report (the scan would prove nothing)")
	}

	logs := testkit.LogLines(h.logs)
	for _, s := range []string{canaryKey, canaryValue} {
		for _, l := range logs {
			if strings.Contains(l, s) {
				t.Errorf("a log line holds %q: %s", s, l)
			}
		}
		if strings.Contains(string(file), s) {
			t.Errorf("the outbox file holds %q", s)
		}
		for _, a := range answers {
			if strings.Contains(a, s) {
				t.Errorf("an answer or report holds %q: %s", s, a)
			}
		}
	}
	for _, l := range logs {
		if strings.Contains(l, testSecret) {
			t.Errorf("a log line holds the invocation secret: %s", l)
		}
	}
	if len(logs) == 0 || !strings.Contains(strings.Join(logs, "\n"), "redacted") {
		t.Error("expected the scrubbed failure in the logs (the scan would prove nothing)")
	}
}

func TestScrubber(t *testing.T) {
	s := newScrubber(map[string]string{"key": "abcdefgh", "longer_key": "abc"}, "sekret-token")
	got := s.message("x abcdefgh y longer_key z sekret-token\nline2 abc key")
	want := "x [redacted] y [redacted] z [redacted] line2 abc key"
	if got != want {
		t.Fatalf("scrub: %q, want %q", got, want)
	}
	long := s.message(strings.Repeat("é", 1000))
	if len(long) > 1024 || !strings.HasPrefix(long, "é") {
		t.Fatalf("not bounded on a rune boundary: %d bytes", len(long))
	}
	if got := s.stderrTail([]byte(strings.Repeat("a", 5000) + "abcdefgh")); strings.Contains(got, "abcdefgh") || len(got) > maxStderrLogBytes+8 {
		t.Fatalf("stderr tail %d bytes, scrubbed: %v", len(got), !strings.Contains(got, "abcdefgh"))
	}
}
