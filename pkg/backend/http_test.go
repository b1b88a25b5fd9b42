package backend

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/backend/frame"
	"github.com/lancemaster/lancemaster/pkg/metrics/metricstest"
)

func withHTTP(c *Config) { c.HTTPListen = "127.0.0.1:0" }

func (h *harness) scrape() (string, metricstest.Families) {
	h.t.Helper()
	return metricstest.Scrape(h.t, "http://"+h.a.HTTPAddr()+"/metrics")
}

func (h *harness) gauge(name string, labels ...string) float64 {
	h.t.Helper()
	_, f := h.scrape()
	v, ok := f.Value(name, labels...)
	if !ok {
		h.t.Fatalf("no series %s%v", name, labels)
	}
	return v
}

// The agent's /metrics follows its queue, workers, proofs, OOM kills,
// memory peaks, outbox and deliveries; /livez and /readyz answer; nothing
// exported carries a storage option or the invocation secret.
func TestBackendMetricsAndHealth(t *testing.T) {
	m := newFakeMaster(t)
	h := newHarness(t, func(c *Config) { withHTTP(c); c.Masters = []string{m.Addr()} })
	base := "http://" + h.a.HTTPAddr()
	if code, body := metricstest.Get(t, base+"/livez"); code != 200 || body != "ok\n" {
		t.Fatalf("livez: %d %q", code, body)
	}
	code, body := metricstest.Get(t, base+"/readyz?verbose")
	for _, want := range []string{"[+]listening ok: 127.0.0.1:", "[+]isolation ok: verified", "[+]outbox ok: open, 0 entries",
		"[+]heartbeat ok: no master has heartbeaten"} {
		if code != 200 || !strings.Contains(body, want) {
			t.Fatalf("readyz?verbose: %d, want %q in\n%s", code, want, body)
		}
	}
	// Every counter series exists before its first event.
	_, f0 := h.scrape()
	for _, c := range []struct{ name, label, value string }{
		{"lancemaster_backend_dispatches_total", "status", "OK"},
		{"lancemaster_backend_dispatches_total", "status", "SHUTTING_DOWN"},
		{"lancemaster_backend_dispatches_total", "status", "OTHER_CLUSTER"},
		{"lancemaster_backend_results_total", "result", "trusted"},
		{"lancemaster_backend_results_total", "result", "none"},
	} {
		if v, ok := f0.Value(c.name, c.label, c.value); !ok || v != 0 {
			t.Errorf("%s{%s=%q} before any event: %v %v, want 0", c.name, c.label, c.value, v, ok)
		}
	}
	for _, reason := range []string{"evicted", "expired", "gave_up"} {
		if v, ok := f0.Value("lancemaster_rpc_connections_closed_total", "role", "backend", "reason", reason); !ok || v != 0 {
			t.Errorf("lancemaster_rpc_connections_closed_total{reason=%q}: %v %v, want 0", reason, v, ok)
		}
	}
	if v, ok := f0.Value("lancemaster_rpc_connections", "role", "backend", "pool", "served"); !ok || v < 0 {
		t.Errorf("lancemaster_rpc_connections{pool=served}: %v %v", v, ok)
	}
	if h.gauge("lancemaster_backend_heartbeaten") != 0 || h.gauge("lancemaster_backend_concurrency") != 1 ||
		h.gauge("lancemaster_backend_queue_capacity") != 2 || h.gauge("lancemaster_backend_isolation_verified") != 1 {
		t.Fatal("implausible static gauges")
	}

	h.ready(4)
	if h.gauge("lancemaster_backend_heartbeaten") != 1 || h.gauge("lancemaster_backend_highest_leader_term") != 4 {
		t.Fatal("the heartbeat is not reflected")
	}
	// One running, one queued behind it (concurrency 1).
	h.runner.hold()
	canary := map[string]string{canaryKey: canaryValue}
	for _, id := range []string{"a", "b"} {
		d := h.dispatch(id, 4)
		d.StorageOptions = canary
		if st := h.submit(d); st != wire.TStatusCode_OK {
			t.Fatal(st)
		}
	}
	h.runner.waitStarted(t, "a")
	if h.gauge("lancemaster_backend_running_workers") != 1 || h.gauge("lancemaster_backend_queued") != 1 {
		t.Fatal("running and queued not exported")
	}
	h.runner.release()
	h.waitState(4, "b", wire.TLanceInvocationState_FINISHED)
	eventually(t, func() bool {
		_, f := h.scrape()
		d, _ := f.Value("lancemaster_backend_reports_total", "outcome", "delivered")
		n, _ := f.Value("lancemaster_backend_outbox_entries")
		return d == 2 && n == 0
	}, "the two reports were not delivered")

	// A worker the kernel OOM-killed.
	h.runner.setScript(func(context.Context, *frame.Request) Outcome {
		return Outcome{Proof: ProofChildReaped, OOMKilled: true, PID: 4242, Signal: "SIGKILL", ExitCode: -1,
			PeakMemoryBytes: 3 << 30, Duration: 2 * time.Second, Failure: "killed"}
	})
	d := h.dispatch("oom", 4)
	d.StorageOptions = canary
	if st := h.submit(d); st != wire.TStatusCode_OK {
		t.Fatal(st)
	}
	h.waitState(4, "oom", wire.TLanceInvocationState_FINISHED)
	// A refused dispatch (stale leader term).
	if st := h.submit(h.dispatch("stale", 3)); st != wire.TStatusCode_STALE_LEADER_TERM {
		t.Fatal(st)
	}

	text, f := h.scrape()
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"lancemaster_backend_proofs_total", []string{"proof", "CHILD_REAPED"}, 3},
		{"lancemaster_backend_proofs_total", []string{"proof", "NEVER_LAUNCHED"}, 0},
		{"lancemaster_backend_proofs_total", []string{"proof", "NONE"}, 0},
		{"lancemaster_backend_results_total", []string{"result", "trusted"}, 2},
		{"lancemaster_backend_results_total", []string{"result", "none"}, 1},
		{"lancemaster_backend_oom_kills_total", nil, 1},
		{"lancemaster_backend_worker_peak_memory_bytes", nil, 1}, // one sample: the two fakes report no pid
		{"lancemaster_backend_worker_duration_seconds", nil, 1},
		{"lancemaster_backend_dispatches_total", []string{"status", "OK"}, 3},
		{"lancemaster_backend_dispatches_total", []string{"status", "STALE_LEADER_TERM"}, 1},
		{"lancemaster_backend_running_workers", nil, 0},
		{"lancemaster_backend_queued", nil, 0},
		{"lancemaster_backend_reports_total", []string{"outcome", "refused"}, 0},
		{"lancemaster_backend_reports_total", []string{"outcome", "expired"}, 0},
	} {
		if got, ok := f.Value(c.name, c.labels...); !ok || got != c.want {
			t.Errorf("%s%v = %v (present %v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}
	if sum := f["lancemaster_backend_worker_peak_memory_bytes"].GetMetric()[0].GetHistogram().GetSampleSum(); sum != 3<<30 {
		t.Errorf("peak memory sum %v", sum)
	}
	for _, secret := range []string{canaryKey, canaryValue, testSecret} {
		if strings.Contains(text, secret) {
			t.Fatalf("/metrics carries %q", secret)
		}
	}
}

// With isolation required and not verified the agent is alive but not
// ready, and says why; best-effort is ready. After Close, /readyz's checks
// fail (shutting down, outbox closed) and the port is closed.
func TestBackendReadiness(t *testing.T) {
	r := newFakeRunner()
	r.verified.Store(false)
	h := startHarness(t, testConfig(t), r, withHTTP)
	base := "http://" + h.a.HTTPAddr()
	if code, _ := metricstest.Get(t, base+"/livez"); code != 200 {
		t.Fatal(code)
	}
	code, body := metricstest.Get(t, base+"/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "[-]isolation failed: worker isolation is required") {
		t.Fatalf("readyz: %d\n%s", code, body)
	}
	if h.gauge("lancemaster_backend_isolation_verified") != 0 {
		t.Fatal("isolation_verified should be 0")
	}

	be := startHarness(t, testConfig(t), r, func(c *Config) { withHTTP(c); c.Isolation = IsolationBestEffort })
	code, body = metricstest.Get(t, "http://"+be.a.HTTPAddr()+"/readyz?verbose")
	if code != 200 || !strings.Contains(body, "[+]isolation ok: best-effort (not verified)") {
		t.Fatalf("best-effort readyz: %d\n%s", code, body)
	}

	addr := be.a.HTTPAddr()
	if err := be.a.Close(); err != nil {
		t.Fatal(err)
	}
	failed := map[string]bool{}
	for _, c := range be.a.readyChecks() {
		if _, err := c.Fn(context.Background()); err != nil {
			failed[c.Name] = true
		}
	}
	if !failed["listening"] || !failed["outbox"] || failed["heartbeat"] {
		t.Fatalf("after Close the failing checks are %v", failed)
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Fatal("the HTTP port still accepts after Close")
	}
}

// Without HTTPListen nothing is served, and the registry still works.
func TestBackendWithoutHTTP(t *testing.T) {
	h := newHarness(t, nil)
	if h.a.HTTPAddr() != "" {
		t.Fatal("an HTTP listener without HTTPListen")
	}
	if fams, err := h.a.Registry().Gather(); err != nil || len(fams) == 0 {
		t.Fatalf("gather: %v, %d families", err, len(fams))
	}
}

func TestFileConfigHTTPListen(t *testing.T) {
	base := "listen: 127.0.0.1:7401\ndata_dir: /d\nmasters: [127.0.0.1:7201]\n"
	c, err := ParseFileConfig([]byte(base + "http_listen: :7501\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.AgentConfig().HTTPListen != ":7501" {
		t.Fatalf("agent config %+v", c.AgentConfig())
	}
	c, err = ParseFileConfig([]byte(base + "http_listen: nope\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "http_listen") {
		t.Fatalf("a bad http_listen validated: %v", err)
	}
}
