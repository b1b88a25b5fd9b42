package metrics_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lancemaster/lancemaster/pkg/metrics"
	"github.com/lancemaster/lancemaster/pkg/metrics/metricstest"
)

func listen(t *testing.T, o metrics.Options) *metrics.Server {
	t.Helper()
	o.Addr = "127.0.0.1:0"
	if o.Gatherer == nil {
		o.Gatherer = metrics.NewRegistry()
	}
	s, err := metrics.Listen(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestMetricsLivezReadyz(t *testing.T) {
	reg := metrics.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "test_things_total", Help: "things"})
	reg.MustRegister(c)
	c.Add(3)
	var fail atomic.Pointer[error]
	s := listen(t, metrics.Options{Gatherer: reg, Ready: []metrics.Check{
		{Name: "always", Fn: func(context.Context) (string, error) { return "fine", nil }},
		{Name: "flaky", Fn: func(context.Context) (string, error) {
			if e := fail.Load(); e != nil {
				return "", *e
			}
			return "", nil
		}},
	}})
	base := "http://" + s.Addr()

	_, fams := metricstest.Scrape(t, base+"/metrics")
	if v, ok := fams.Value("test_things_total"); !ok || v != 3 {
		t.Fatalf("test_things_total = %v, %v", v, ok)
	}
	if _, ok := fams.Value("go_goroutines"); !ok {
		t.Fatal("the registry has no Go runtime metrics")
	}
	if _, ok := fams.Value("process_start_time_seconds"); !ok {
		t.Fatal("the registry has no process metrics")
	}

	if code, body := metricstest.Get(t, base+"/livez"); code != 200 || body != "ok\n" {
		t.Fatalf("livez: %d %q", code, body)
	}
	if code, body := metricstest.Get(t, base+"/readyz"); code != 200 || body != "ok\n" {
		t.Fatalf("readyz: %d %q", code, body)
	}
	code, body := metricstest.Get(t, base+"/readyz?verbose")
	if code != 200 || !strings.Contains(body, "[+]always ok: fine\n") || !strings.Contains(body, "[+]flaky ok\n") ||
		!strings.HasSuffix(body, "readyz check passed\n") {
		t.Fatalf("readyz?verbose: %d %q", code, body)
	}

	e := errors.New("the thing is\nbroken")
	fail.Store(&e)
	code, body = metricstest.Get(t, base+"/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "[-]flaky failed: the thing is broken\n") ||
		strings.Contains(body, "always") {
		t.Fatalf("failing readyz: %d %q", code, body)
	}
	code, body = metricstest.Get(t, base+"/readyz?verbose=1")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "[+]always ok: fine") ||
		!strings.HasSuffix(body, "readyz check failed\n") {
		t.Fatalf("failing readyz?verbose: %d %q", code, body)
	}

	if code, _ := metricstest.Get(t, base+"/nothing"); code != http.StatusNotFound {
		t.Fatalf("unknown path: %d", code)
	}
	resp, err := http.Post(base+"/readyz", "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST: %d", resp.StatusCode)
	}
}

// The connection cap holds: with one slot taken by an idle client, another
// client is not served until the slot frees.
func TestConnectionCap(t *testing.T) {
	s := listen(t, metrics.Options{MaxConns: 1})
	idle, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // let the server accept it
	cl := &http.Client{Timeout: 300 * time.Millisecond}
	if resp, err := cl.Get("http://" + s.Addr() + "/livez"); err == nil {
		resp.Body.Close()
		t.Fatal("served a second connection past the cap")
	}
	idle.Close()
	cl.Timeout = 5 * time.Second
	resp, err := cl.Get("http://" + s.Addr() + "/livez")
	if err != nil {
		t.Fatalf("not served after the slot freed: %v", err)
	}
	resp.Body.Close()
}

// Close stops the server (idempotently): the port refuses connections.
func TestCloseStopsServing(t *testing.T) {
	s, err := metrics.Listen(metrics.Options{Addr: "127.0.0.1:0", Gatherer: metrics.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	addr := s.Addr()
	if code, _ := metricstest.Get(t, "http://"+addr+"/livez"); code != 200 {
		t.Fatal(code)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Fatal("still accepting after Close")
	}
}

func TestListenNeedsAGatherer(t *testing.T) {
	if _, err := metrics.Listen(metrics.Options{Addr: "127.0.0.1:0"}); err == nil {
		t.Fatal("no error")
	}
}
