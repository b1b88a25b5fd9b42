package console_test

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/lancemaster/lancemaster/pkg/console"
)

func get(t *testing.T, h http.Handler, method, path string, hdr map[string]string) *http.Response {
	t.Helper()
	r := httptest.NewRequest(method, path, nil)
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Result()
}

// Each file is served with its content type, the strict CSP, nosniff and
// revalidation headers; /ui/ is the index; /ui redirects; an unknown path
// is 404; a write is 405; an ETag answers 304.
func TestHandlerServesEmbeddedFilesWithStrictHeaders(t *testing.T) {
	h := console.Handler()
	for path, ct := range map[string]string{
		"/ui/":            "text/html; charset=utf-8",
		"/ui/index.html":  "text/html; charset=utf-8",
		"/ui/console.css": "text/css; charset=utf-8",
		"/ui/js/app.js":   "text/javascript; charset=utf-8",
		"/ui/js/jobs.js":  "text/javascript; charset=utf-8",
		"/ui/icon.svg":    "image/svg+xml",
	} {
		resp := get(t, h, http.MethodGet, path, nil)
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != ct || len(body) == 0 {
			t.Errorf("GET %s: %d %q (%d bytes), want 200 %q", path, resp.StatusCode, resp.Header.Get("Content-Type"), len(body), ct)
		}
		for k, v := range map[string]string{"Content-Security-Policy": console.ContentSecurityPolicy, "X-Content-Type-Options": "nosniff",
			"Cache-Control": "no-cache", "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer"} {
			if got := resp.Header.Get(k); got != v {
				t.Errorf("GET %s: %s = %q, want %q", path, k, got, v)
			}
		}
		etag := resp.Header.Get("ETag")
		if etag == "" {
			t.Errorf("GET %s: no ETag", path)
			continue
		}
		if r := get(t, h, http.MethodGet, path, map[string]string{"If-None-Match": etag}); r.StatusCode != http.StatusNotModified {
			t.Errorf("GET %s with its ETag: %d, want 304", path, r.StatusCode)
		}
	}
	if !strings.HasPrefix(console.ContentSecurityPolicy, "default-src 'self';") || strings.Contains(console.ContentSecurityPolicy, "unsafe") {
		t.Errorf("CSP %q is not strict", console.ContentSecurityPolicy)
	}
	if r := get(t, h, http.MethodGet, "/ui", nil); r.StatusCode != http.StatusMovedPermanently || r.Header.Get("Location") != "/ui/" {
		t.Errorf("GET /ui: %d to %q", r.StatusCode, r.Header.Get("Location"))
	}
	for _, p := range []string{"/ui/nope.js", "/ui/js/", "/ui/../console.go", "/other"} {
		if r := get(t, h, http.MethodGet, p, nil); r.StatusCode != http.StatusNotFound || r.Header.Get("Content-Security-Policy") == "" {
			t.Errorf("GET %s: %d, want 404 with the CSP", p, r.StatusCode)
		}
	}
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
		if r := get(t, h, m, "/ui/", nil); r.StatusCode != http.StatusMethodNotAllowed || r.Header.Get("Allow") != "GET, HEAD" {
			t.Errorf("%s /ui/: %d, want 405", m, r.StatusCode)
		}
	}
	if r := get(t, h, http.MethodHead, "/ui/js/app.js", nil); r.StatusCode != http.StatusOK || r.ContentLength <= 0 {
		t.Errorf("HEAD: %d, length %d", r.StatusCode, r.ContentLength)
	}
}

// The console's sources: no inline script, style or event handler in the
// HTML, no markup built from strings in the JavaScript (innerHTML and
// friends, eval), no form that could post, and no address off this
// origin (no CDN, nothing fetched but /v1).
func TestConsoleSourcesAreSafeByConstruction(t *testing.T) {
	root := "ui"
	inlineScript := regexp.MustCompile(`<script(?:\s[^>]*)?>`)
	forbiddenJS := regexp.MustCompile(`innerHTML|outerHTML\s*=|insertAdjacentHTML|document\.write|\beval\(|new Function|setTimeout\(\s*["'\x60]|javascript:`)
	offOrigin := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}`)
	n := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		n++
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		s := string(b)
		// The SVG namespace is a name, not an address that is fetched.
		s = strings.ReplaceAll(s, `xmlns="http://www.w3.org/2000/svg"`, "")
		if m := offOrigin.FindString(s); m != "" {
			t.Errorf("%s names an address off this origin: %q", p, m)
		}
		switch filepath.Ext(p) {
		case ".html":
			for _, tag := range inlineScript.FindAllString(s, -1) {
				if !strings.Contains(tag, ` src="`) {
					t.Errorf("%s has an inline script: %s", p, tag)
				}
			}
			for _, bad := range []string{" style=", "<style", " onclick", " onload", " onerror", "<form", "<iframe"} {
				if strings.Contains(strings.ToLower(s), bad) {
					t.Errorf("%s contains %q", p, bad)
				}
			}
		case ".js":
			if m := forbiddenJS.FindString(s); m != "" {
				t.Errorf("%s uses %q: build the DOM with h() and textContent", p, m)
			}
			if strings.Contains(s, "fetch(") && !strings.Contains(p, "api.js") {
				t.Errorf("%s fetches by itself: every request goes through api.js (/v1 only)", p)
			}
			for _, m := range []string{`method: "POST"`, `method: "PUT"`, `method: "DELETE"`, `method: "PATCH"`} {
				if strings.Contains(s, m) {
					t.Errorf("%s sends a write (%s): the console is read-only", p, m)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 8 {
		t.Fatalf("only %d console files found under %s", n, root)
	}
}
