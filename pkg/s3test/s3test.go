// Package s3test is the shared kit for tests on object storage: an
// in-process S3 fake (gofakes3, in memory) on 127.0.0.1:0 with one bucket,
// and a variant that ignores conditional PUT (it strips If-None-Match before
// the fake sees it), the kind of store on which Lance loses concurrent
// commits.
//
// gofakes3 checks no signature, so any access key works; tests of refused
// credentials use a fake that answers 403 instead.
package s3test

import (
	"bytes"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// Defaults of a Server.
const (
	Bucket    = "lake"
	Region    = "us-east-1"
	AccessKey = "AKIAS3TESTKEY"
)

// Server is a running fake. Its methods are safe for concurrent use.
type Server struct {
	// Endpoint is http://127.0.0.1:PORT (aws_endpoint).
	Endpoint string
	// Bucket is the bucket that exists.
	Bucket string

	mem        *s3mem.Backend
	srv        *http.Server
	ignoresINM bool

	mu       sync.Mutex
	requests []Request
}

// Request is what the fake saw of one request (never its body).
type Request struct {
	Method, Path string
	// IfNoneMatch is the If-None-Match header as sent (before a stripping
	// variant removed it).
	IfNoneMatch string
	// Header is the request's raw header, for tests that look for a secret
	// on the wire (an access key id is expected in Authorization).
	Header http.Header
}

// Start runs a fake that honours If-None-Match (412 when the object
// exists), closed when the test ends.
func Start(t testing.TB) *Server { return start(t, false) }

// StartIgnoringConditionalPut runs a fake that ignores If-None-Match on
// PUT: a second PUT of the same key succeeds and replaces the object, as
// some S3-compatible stores do.
func StartIgnoringConditionalPut(t testing.TB) *Server { return start(t, true) }

func start(t testing.TB, ignoreINM bool) *Server {
	t.Helper()
	s, err := newServer(ignoreINM)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// New runs a fake that honours If-None-Match outside a test (benchmarks);
// the caller closes it.
func New() (*Server, error) { return newServer(false) }

func newServer(ignoreINM bool) (*Server, error) {
	mem := s3mem.New()
	if err := mem.CreateBucket(Bucket); err != nil {
		return nil, err
	}
	fake := gofakes3.New(mem, gofakes3.WithLogger(gofakes3.DiscardLog()), gofakes3.WithTimeSkewLimit(0))
	s := &Server{Bucket: Bucket, mem: mem, ignoresINM: ignoreINM}
	inner := fake.Server()
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path,
			IfNoneMatch: r.Header.Get("If-None-Match"), Header: r.Header.Clone()})
		s.mu.Unlock()
		if ignoreINM && r.Method == http.MethodPut {
			r.Header.Del("If-None-Match")
		}
		inner.ServeHTTP(w, r)
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s.Endpoint = "http://" + l.Addr().String()
	s.srv = &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(l) }()
	return s, nil
}

// Close stops the fake. Idempotent.
func (s *Server) Close() { _ = s.srv.Close() }

// IgnoresConditionalPut tells which variant this is.
func (s *Server) IgnoresConditionalPut() bool { return s.ignoresINM }

// Root is s3://<bucket>/<prefix> (prefix without slashes at its ends; ""
// for the bucket's root).
func (s *Server) Root(prefix string) string {
	prefix = strings.Trim(prefix, "/")
	if prefix == "" {
		return "s3://" + s.Bucket
	}
	return "s3://" + s.Bucket + "/" + prefix
}

// StorageOptions are the options the builder (and the probe) need for this
// fake, with secret as the secret access key.
func (s *Server) StorageOptions(secret string) map[string]string {
	return map[string]string{
		"aws_endpoint":          s.Endpoint,
		"allow_http":            "true",
		"aws_region":            Region,
		"aws_access_key_id":     AccessKey,
		"aws_secret_access_key": secret,
	}
}

// Requests returns a copy of what the fake has seen so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// ConditionalPuts counts the PUTs that carried If-None-Match: * (before
// any stripping): the evidence that a client asked for a conditional PUT.
func (s *Server) ConditionalPuts() int {
	n := 0
	for _, r := range s.Requests() {
		if r.Method == http.MethodPut && r.IfNoneMatch == "*" {
			n++
		}
	}
	return n
}

// Keys lists every object key of the bucket under prefix ("" for all).
func (s *Server) Keys(t testing.TB, prefix string) []string {
	t.Helper()
	list, err := s.mem.ListBucket(s.Bucket, &gofakes3.Prefix{Prefix: prefix, HasPrefix: prefix != ""}, gofakes3.ListBucketPage{})
	if err != nil {
		t.Fatal(err)
	}
	keys := make([]string, 0, len(list.Contents))
	for _, c := range list.Contents {
		keys = append(keys, c.Key)
	}
	return keys
}

// StartForbidden runs a store that answers every request 403
// InvalidAccessKeyId and echoes the request's Authorization header (which
// names the access key id) in its message, as a careless store might: a
// client that quotes the server's words would leak it. It returns the
// endpoint and a count of the requests seen.
func StartForbidden(t testing.TB) (endpoint string, requests func() int) {
	t.Helper()
	var mu sync.Mutex
	n := 0
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		mu.Unlock()
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte("<Error><Code>InvalidAccessKeyId</Code><Message>" + r.Header.Get("Authorization") +
			"</Message></Error>"))
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + l.Addr().String(), func() int { mu.Lock(); defer mu.Unlock(); return n }
}

// Upload copies the local directory dir, recursively, to the bucket under
// prefix (no slash at its ends): a Lance dataset written locally (by
// builders/lancedb/make-dataset.js) becomes one on the store, file for
// file, as Lance reads either. It returns how many objects it wrote.
func (s *Server) Upload(t testing.TB, dir, prefix string) int {
	t.Helper()
	n, err := s.UploadDir(dir, prefix)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// UploadDir is Upload outside a test: the number of objects written, or
// the first error.
func (s *Server) UploadDir(dir, prefix string) (int, error) {
	n := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		key := strings.Trim(prefix, "/") + "/" + filepath.ToSlash(rel)
		if _, err := s.mem.PutObject(s.Bucket, key, map[string]string{}, bytes.NewReader(b), int64(len(b)), nil); err != nil {
			return err
		}
		n++
		return nil
	})
	return n, err
}
