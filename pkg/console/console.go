// Package console is the read-only web console every master serves under
// /ui/ (docs/console.md): static HTML, CSS and plain JavaScript modules,
// embedded in the binary, that read the same-origin /v1 JSON API and change
// nothing. There is no build step: the files under ui/ are what the browser
// runs.
package console

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strconv"
	"strings"
)

// Prefix is where the console is mounted.
const Prefix = "/ui/"

// ContentSecurityPolicy is sent with every answer: only this origin's
// files and API, no inline script or style, no framing, no form posts.
const ContentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

//go:embed ui
var files embed.FS

// contentTypes are the only file kinds the console ships; a file of
// another kind is not served.
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".svg":  "image/svg+xml",
	".png":  "image/png",
}

type asset struct {
	body        []byte
	contentType string
	etag        string
}

// Handler serves the embedded console under /ui/: /ui/ is the index page,
// /ui redirects there. GET and HEAD only. Every answer carries the
// Content-Security-Policy above, X-Content-Type-Options: nosniff, no
// framing and no referrer; files are sent with "Cache-Control: no-cache"
// and a content-hash ETag, so a browser revalidates (304) and picks up a
// new console after an upgrade at once.
func Handler() http.Handler {
	assets := map[string]asset{}
	err := fs.WalkDir(files, "ui", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		ct, ok := contentTypes[path.Ext(p)]
		if !ok {
			return nil
		}
		b, err := files.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		assets[strings.TrimPrefix(p, "ui/")] = asset{body: b, contentType: ct, etag: `"` + hex.EncodeToString(sum[:16]) + `"`}
		return nil
	})
	if err != nil {
		panic("console: embedded files unreadable: " + err.Error()) // cannot happen: the files are compiled in
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", ContentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "the console is read-only: GET or HEAD", http.StatusMethodNotAllowed)
			return
		}
		if r.URL.Path == strings.TrimSuffix(Prefix, "/") {
			http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
			return
		}
		name, ok := strings.CutPrefix(r.URL.Path, Prefix)
		if !ok {
			http.NotFound(w, r)
			return
		}
		if name == "" {
			name = "index.html"
		}
		a, ok := assets[name]
		if !ok {
			http.NotFound(w, r)
			return
		}
		h.Set("Content-Type", a.contentType)
		h.Set("Cache-Control", "no-cache")
		h.Set("ETag", a.etag)
		if match := r.Header.Get("If-None-Match"); match != "" && etagMatches(match, a.etag) {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		h.Set("Content-Length", strconv.Itoa(len(a.body)))
		if r.Method == http.MethodHead {
			return
		}
		_, _ = w.Write(a.body)
	})
}

func etagMatches(header, etag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimSpace(t)
		if t == "*" || strings.TrimPrefix(t, "W/") == etag {
			return true
		}
	}
	return false
}
