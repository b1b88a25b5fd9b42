package metrics

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
)

// Bounds of the HTTP server. Scrapes and probes are small requests from a
// few clients; anything slower or larger is a misbehaving peer.
const (
	DefaultMaxConns   = 64
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 10 * time.Second
	writeTimeout      = 30 * time.Second
	idleTimeout       = 60 * time.Second
	maxHeaderBytes    = 16 << 10
	// scrapeTimeout bounds one /metrics answer; scrapesInFlight how many
	// are gathered at once (the rest get 503).
	scrapeTimeout   = 20 * time.Second
	scrapesInFlight = 4
	// checkTimeout bounds all readiness checks of one /readyz request.
	checkTimeout = 5 * time.Second
	// shutdownTimeout is how long Close lets requests in flight finish.
	shutdownTimeout = 5 * time.Second
)

// Check is one readiness check. Fn returns a short detail and nil when it
// passes, or an error saying why not. Both are shown by /readyz?verbose:
// they must never carry a secret. Fn is called from HTTP handler
// goroutines, concurrently, and must be cheap (no network).
type Check struct {
	Name string
	Fn   func(ctx context.Context) (detail string, err error)
}

// Options configure a Server.
type Options struct {
	// Addr is the listen address (host:port; port 0 picks one).
	Addr string
	// Gatherer is what /metrics exposes (a *prometheus.Registry).
	Gatherer prometheus.Gatherer
	// Ready are the /readyz checks, run in order; all must pass.
	Ready []Check
	// MaxConns caps open connections (default DefaultMaxConns).
	MaxConns int
	// Logger; nil discards logs.
	Logger *zap.Logger
	// Mounts are more handlers on the listener, by http.ServeMux pattern
	// ("/v1/"): a master's read API and console.
	Mounts map[string]http.Handler
	// TLS, when set, makes the listener serve TLS with this configuration
	// (for scrapers too: /metrics, /livez and /readyz are then https).
	TLS *tls.Config
}

// Handler is the HTTP handler of a Server: GET (and HEAD) /metrics, /livez
// and /readyz; any other method answers 405, any other path 404.
func Handler(o Options) http.Handler {
	log := o.Logger
	if log == nil {
		log = zap.NewNop()
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(o.Gatherer, promhttp.HandlerOpts{
		ErrorLog:            zap.NewStdLog(log),
		ErrorHandling:       promhttp.ContinueOnError,
		MaxRequestsInFlight: scrapesInFlight,
		Timeout:             scrapeTimeout,
	}))
	mux.HandleFunc("GET /livez", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	checks := append([]Check(nil), o.Ready...)
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		serveReady(w, r, checks)
	})
	for pattern, h := range o.Mounts {
		mux.Handle(pattern, h)
	}
	return mux
}

// serveReady runs every check. 200 "ok" when all pass, 503 otherwise; the
// failing checks are always listed, every check with ?verbose.
func serveReady(w http.ResponseWriter, r *http.Request, checks []Check) {
	ctx, cancel := context.WithTimeout(r.Context(), checkTimeout)
	defer cancel()
	verbose := r.URL.Query().Has("verbose")
	var b strings.Builder
	failed := false
	for _, c := range checks {
		detail, err := c.Fn(ctx)
		switch {
		case err != nil:
			failed = true
			fmt.Fprintf(&b, "[-]%s failed: %s\n", c.Name, oneLine(err.Error()))
		case verbose && detail != "":
			fmt.Fprintf(&b, "[+]%s ok: %s\n", c.Name, oneLine(detail))
		case verbose:
			fmt.Fprintf(&b, "[+]%s ok\n", c.Name)
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if failed {
		w.WriteHeader(http.StatusServiceUnavailable)
		b.WriteString("readyz check failed\n")
	} else if verbose {
		b.WriteString("readyz check passed\n")
	} else {
		b.WriteString("ok\n")
	}
	_, _ = w.Write([]byte(b.String()))
}

func oneLine(s string) string { return strings.ReplaceAll(strings.ReplaceAll(s, "\r", " "), "\n", " ") }

// Server serves Handler on its own listener, with header, read, write and
// idle timeouts, a header size cap and a connection cap. Its methods are
// safe for concurrent use.
type Server struct {
	log  *zap.Logger
	ln   net.Listener
	srv  *http.Server
	done chan struct{}
	once sync.Once
}

// Listen binds o.Addr and serves in the background until Close.
func Listen(o Options) (*Server, error) {
	if o.Gatherer == nil {
		return nil, errors.New("metrics: no gatherer")
	}
	log := o.Logger
	if log == nil {
		log = zap.NewNop()
	}
	if o.MaxConns <= 0 {
		o.MaxConns = DefaultMaxConns
	}
	raw, err := net.Listen("tcp", o.Addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: listen on %s: %w", o.Addr, err)
	}
	var ln net.Listener = newLimitListener(raw, o.MaxConns)
	scheme := "http"
	if o.TLS != nil {
		// The handshake runs on the connection's first read, in its own
		// goroutine, bounded by the read header timeout.
		ln, scheme = tls.NewListener(ln, o.TLS), "https"
	}
	s := &Server{
		log: log,
		ln:  ln,
		srv: &http.Server{
			Handler:           Handler(o),
			ReadHeaderTimeout: readHeaderTimeout,
			ReadTimeout:       readTimeout,
			WriteTimeout:      writeTimeout,
			IdleTimeout:       idleTimeout,
			MaxHeaderBytes:    maxHeaderBytes,
			ErrorLog:          zap.NewStdLog(log),
		},
		done: make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics: HTTP server stopped", zap.String("addr", raw.Addr().String()), zap.Error(err))
		}
	}()
	log.Info("metrics: serving /metrics, /livez, /readyz", zap.String("addr", raw.Addr().String()), zap.String("scheme", scheme))
	return s, nil
}

// Addr is the bound address (with the real port when Addr had port 0).
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops the server: requests in flight get a few seconds, then every
// connection is closed. It is idempotent.
func (s *Server) Close() error {
	var err error
	s.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		if err = s.srv.Shutdown(ctx); err != nil {
			err = errors.Join(err, s.srv.Close())
		}
		<-s.done
	})
	return err
}

// limitListener holds at most n connections open at once: Accept waits for
// a free slot, so excess clients queue in the kernel's backlog instead of
// costing a goroutine and buffers each.
type limitListener struct {
	net.Listener
	sem  chan struct{}
	stop chan struct{}
	once sync.Once
}

func newLimitListener(l net.Listener, n int) *limitListener {
	return &limitListener{Listener: l, sem: make(chan struct{}, n), stop: make(chan struct{})}
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	case <-l.stop:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.sem }}, nil
}

func (l *limitListener) Close() error {
	l.once.Do(func() { close(l.stop) })
	return l.Listener.Close()
}

type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
