package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// rfHook is a webhook target on 127.0.0.1 that records what it receives.
type rfHook struct {
	srv    *httptest.Server
	mu     sync.Mutex
	hits   []*http.Request
	bodies [][]byte
}

func rfNewHook(t *testing.T, handler func(w http.ResponseWriter, r *http.Request)) *rfHook {
	t.Helper()
	h := &rfHook{}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		h.hits, h.bodies = append(h.hits, r), append(h.bodies, body)
		h.mu.Unlock()
		handler(w, r)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *rfHook) count() int { h.mu.Lock(); defer h.mu.Unlock(); return len(h.hits) }

func (h *rfHook) hit(i int) (*http.Request, []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.hits[i], h.bodies[i]
}

func rfWebhookRequest(url string) RefreshRequest {
	return RefreshRequest{JobID: 42, Catalog: "lake", DB: "sales", Table: "orders", IndexName: "ByDay",
		MutationType: "CREATE", Outcome: "COMMITTED", URL: url}
}

func TestWebhookPostsJobWithHeaders(t *testing.T) {
	h := rfNewHook(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	w := NewWebhookRefresher(WebhookOptions{})
	if err := w.Refresh(context.Background(), rfWebhookRequest(h.srv.URL+"/refresh?token=t0ken")); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	if h.count() != 1 {
		t.Fatalf("%d requests, want 1", h.count())
	}
	r, raw := h.hit(0)
	if r.Method != http.MethodPost || r.URL.Path != "/refresh" || r.URL.Query().Get("token") != "t0ken" {
		t.Fatalf("request %s %s", r.Method, r.URL)
	}
	if got := r.Header.Get("Idempotency-Key"); got != "lancemaster-job-42" {
		t.Fatalf("Idempotency-Key = %q", got)
	}
	if got := r.Header.Get("Content-Type"); got != "application/json" {
		t.Fatalf("Content-Type = %q", got)
	}
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		t.Fatalf("body %q: %v", raw, err)
	}
	want := map[string]any{"catalog": "lake", "db": "sales", "table": "orders", "job_id": float64(42),
		"index_name": "ByDay", "mutation_type": "CREATE", "outcome": "COMMITTED"}
	if len(body) != len(want) {
		t.Fatalf("body %v, want exactly %v", body, want)
	}
	for k, v := range want {
		if body[k] != v {
			t.Fatalf("body[%s] = %v, want %v", k, body[k], v)
		}
	}
	if w.client.Jar != nil {
		t.Fatalf("the client has a cookie jar")
	}
}

func TestWebhookNon2xxFails(t *testing.T) {
	for _, code := range []int{http.StatusBadRequest, http.StatusInternalServerError, http.StatusNotModified} {
		h := rfNewHook(t, func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(code)
			_, _ = io.WriteString(w, "secret-ish body text")
		})
		err := NewWebhookRefresher(WebhookOptions{}).Refresh(context.Background(), rfWebhookRequest(h.srv.URL+"/r?token=t0ken"))
		var se *WebhookStatusError
		if !errors.As(err, &se) || se.StatusCode != code {
			t.Fatalf("status %d: err = %v, want a WebhookStatusError", code, err)
		}
		rfWantCleanError(t, err)
	}
}

func TestWebhookLargeBodyIsCutOff(t *testing.T) {
	h := rfNewHook(t, func(w http.ResponseWriter, _ *http.Request) {
		chunk := strings.Repeat("x", 32<<10)
		for range 64 { // 2 MiB, far past the drain limit
			if _, err := io.WriteString(w, chunk); err != nil {
				return
			}
		}
	})
	if err := NewWebhookRefresher(WebhookOptions{}).Refresh(context.Background(), rfWebhookRequest(h.srv.URL)); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
}

func TestWebhookTimeout(t *testing.T) {
	h := rfNewHook(t, func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	w := NewWebhookRefresher(WebhookOptions{Timeout: 50 * time.Millisecond})
	start := time.Now()
	err := w.Refresh(context.Background(), rfWebhookRequest(h.srv.URL+"/r?token=t0ken"))
	if err == nil || time.Since(start) > 2*time.Second {
		t.Fatalf("err = %v after %s, want a timeout within the bound", err, time.Since(start))
	}
	rfWantCleanError(t, err)

	// The caller's ctx ends a call sooner than the timeout.
	w = NewWebhookRefresher(WebhookOptions{Timeout: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start = time.Now()
	if err := w.Refresh(ctx, rfWebhookRequest(h.srv.URL)); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 2*time.Second {
		t.Fatalf("err = %v after %s, want the ctx deadline", err, time.Since(start))
	}
}

func TestWebhookRedirectNotFollowed(t *testing.T) {
	var target *rfHook
	target = rfNewHook(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	h := rfNewHook(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.srv.URL+"/elsewhere", http.StatusTemporaryRedirect)
	})
	err := NewWebhookRefresher(WebhookOptions{}).Refresh(context.Background(), rfWebhookRequest(h.srv.URL+"/r?token=t0ken"))
	var se *WebhookStatusError
	if !errors.As(err, &se) || se.StatusCode != http.StatusTemporaryRedirect {
		t.Fatalf("err = %v, want a failure with status 307", err)
	}
	if target.count() != 0 {
		t.Fatalf("the redirect was followed")
	}
	rfWantCleanError(t, err)
}

func TestWebhookBadURLAndRefusedConnection(t *testing.T) {
	w := NewWebhookRefresher(WebhookOptions{Timeout: time.Second})
	for _, u := range []string{"", "ftp://host/x?token=t0ken", "http://%zz?token=t0ken", "/relative?token=t0ken"} {
		if err := w.Refresh(context.Background(), rfWebhookRequest(u)); !errors.Is(err, errWebhookURL) {
			t.Fatalf("URL %q: err = %v", u, err)
		} else {
			rfWantCleanError(t, err)
		}
	}
	// A port nobody listens on: the error names no query string.
	err := w.Refresh(context.Background(), rfWebhookRequest("http://"+rfDeadAddress(t)+"/r?token=t0ken"))
	if err == nil {
		t.Fatalf("refused connection: no error")
	}
	rfWantCleanError(t, err)
}

// rfWantCleanError: an error names the job, never the URL's query or a body.
func rfWantCleanError(t *testing.T, err error) {
	t.Helper()
	msg := err.Error()
	if strings.Contains(msg, "t0ken") || strings.Contains(msg, "secret-ish") || !strings.Contains(msg, "job 42") {
		t.Fatalf("error %q leaks the URL or a body, or does not name the job", msg)
	}
}
