// Package httpapi is the versioned HTTP/JSON read API of a master (/v1/,
// docs/http-api.md) and the door of the console (/ui/). Every answer is read
// through the admin layer (pkg/admin's Server): the filters, the validation,
// the stale warnings and the consistent reads are the CLI's. It only reads:
// any method but GET and HEAD answers 405.
package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/pkg/admin"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// Raft is this master's view of the cluster, for the answered_by envelope.
type Raft interface {
	IsLeader() bool
	Leader() (id, rpcAddr string)
	// LastContact is when this master last heard from a leader (zero:
	// never, or it leads).
	LastContact() time.Time
}

// Deps are what the API is built from. Admin, Reader and Raft are required.
type Deps struct {
	Admin  *admin.Server
	Reader raftfsm.Reader // the job timeline (the admin views do not carry it)
	Raft   Raft
	NodeID string
	Clock  func() time.Time
	Logger *zap.Logger
	// Console is served under /ui/ (nil: /ui/ answers 404).
	Console http.Handler
	// Access decides who may read /v1 and /ui (access.go); the zero value
	// answers nobody.
	Access Access
}

// requestTimeout bounds one answer (a consistent read waits for the leader's
// read index at most this long).
const requestTimeout = 10 * time.Second

// API serves /v1/ and /ui/.
type API struct {
	d   Deps
	mux *http.ServeMux
}

// New returns the API. It panics on a missing dependency (a wiring bug).
func New(d Deps) *API {
	if d.Admin == nil || d.Reader == nil || d.Raft == nil {
		panic("httpapi.New: Admin, Reader and Raft are required")
	}
	if d.Clock == nil {
		d.Clock = time.Now
	}
	if d.Logger == nil {
		d.Logger = zap.NewNop()
	}
	a := &API{d: d, mux: http.NewServeMux()}
	a.mux.HandleFunc("/v1/jobs", a.listJobs)
	a.mux.HandleFunc("/v1/jobs/{id}", a.showJob)
	a.mux.HandleFunc("/v1/jobs/{id}/logs", a.jobLogs)
	a.mux.HandleFunc("/v1/catalogs", a.listCatalogs)
	a.mux.HandleFunc("/v1/backends", a.listBackends)
	a.mux.HandleFunc("/v1/backends/{id}", a.showBackend)
	a.mux.HandleFunc("/v1/options", a.listOptions)
	a.mux.HandleFunc("/v1/members", a.members)
	a.mux.HandleFunc("/v1/health", a.health)
	a.mux.HandleFunc("/v1/events", a.listEvents)
	a.mux.HandleFunc("/v1/", func(w http.ResponseWriter, r *http.Request) {
		a.fail(w, r, errNotFound("no such resource %s (see docs/http-api.md for the endpoints)", r.URL.Path))
	})
	return a
}

// Patterns are the paths to mount the API at on a listener's mux.
var Patterns = []string{"/v1/", "/ui/"}

// ServeHTTP serves /v1/... and /ui/....
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if denied := a.d.Access.check(r); denied != "" {
		a.fail(w, r, &apiError{status: http.StatusForbidden, code: adminapi.TErrorCode_PERMISSION_DENIED.String(), msg: denied})
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		a.fail(w, r, &apiError{status: http.StatusMethodNotAllowed, code: adminapi.TErrorCode_INVALID.String(),
			msg: fmt.Sprintf("method %s is not allowed: this API only reads (GET, HEAD)", r.Method)})
		return
	}
	if path := r.URL.Path; path == "/ui" || len(path) >= 4 && path[:4] == "/ui/" {
		if a.d.Console == nil {
			a.fail(w, r, errNotFound("this master serves no console"))
			return
		}
		a.d.Console.ServeHTTP(w, r)
		return
	}
	a.mux.ServeHTTP(w, r)
}

// AnsweredBy says which master answered and what it knows of the leader.
type AnsweredBy struct {
	NodeID      string `json:"node_id"`
	IsLeader    bool   `json:"is_leader"`
	KnownLeader bool   `json:"known_leader"`
	LeaderID    string `json:"leader_id,omitempty"`
	// LastContactMs: ms since this master last heard from the leader; 0
	// on the leader, -1 when it never did.
	LastContactMs int64 `json:"last_contact_ms"`
}

func (a *API) answeredBy() AnsweredBy {
	id, _ := a.d.Raft.Leader()
	ab := AnsweredBy{NodeID: a.d.NodeID, IsLeader: a.d.Raft.IsLeader(), KnownLeader: id != "", LeaderID: id}
	switch last := a.d.Raft.LastContact(); {
	case ab.IsLeader:
	case last.IsZero():
		ab.LastContactMs = -1
	default:
		ab.LastContactMs = max(a.d.Clock().Sub(last).Milliseconds(), 0)
	}
	return ab
}

// read is what a handler needs of its request: the context and whether the
// read is consistent. begin runs the consistent-read barrier.
type read struct {
	ctx        context.Context
	consistent bool
}

// begin parses ?consistent and, when set, waits until this replica holds
// everything committed when the request arrived (admin.Server.CurrentRead).
func (a *API) begin(r *http.Request, q *query) (read, context.CancelFunc, error) {
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	consistent, err := q.boolean("consistent")
	if err != nil {
		return read{}, cancel, err
	}
	if consistent {
		if err := a.d.Admin.CurrentRead(ctx); err != nil {
			var ae *adminapi.TAdminError
			if errors.As(err, &ae) && (ae.Code == adminapi.TErrorCode_NOT_LEADER || ae.Code == adminapi.TErrorCode_UNAVAILABLE) {
				return read{}, cancel, &apiError{status: http.StatusServiceUnavailable, code: ae.Code.String(),
					msg: "a consistent read needs the leader: " + ae.Message}
			}
			return read{}, cancel, err
		}
	}
	return read{ctx: ctx, consistent: consistent}, cancel, nil
}

// reply writes body (a map the handler filled) with the envelope.
func (a *API) reply(w http.ResponseWriter, r *http.Request, rd read, body map[string]any, stale string) {
	if stale == "" && !rd.consistent {
		stale = a.d.Admin.StaleWarning(false)
	}
	if stale != "" && !rd.consistent {
		body["stale_warning"] = stale
	}
	a.write(w, r, http.StatusOK, body)
}

func (a *API) write(w http.ResponseWriter, r *http.Request, status int, body map[string]any) {
	ab := a.answeredBy()
	body["answered_by"] = ab
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Lancemaster-Node", ab.NodeID)
	h.Set("X-Lancemaster-Known-Leader", strconv.FormatBool(ab.KnownLeader))
	h.Set("X-Lancemaster-Last-Contact", strconv.FormatInt(ab.LastContactMs, 10))
	out, err := json.Marshal(body)
	if err != nil {
		a.d.Logger.Error("httpapi: encode answer", zap.String("path", r.URL.Path), zap.Error(err))
		status, out = http.StatusInternalServerError, []byte(`{"error":{"code":"INTERNAL","message":"internal error: encode the answer"}}`)
	}
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(append(out, '\n'))
	}
}

// apiError is an answer other than 200.
type apiError struct {
	status    int
	code, msg string
}

func (e *apiError) Error() string { return e.code + ": " + e.msg }

func errBadParam(name, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, code: adminapi.TErrorCode_INVALID.String(),
		msg: "parameter " + name + ": " + fmt.Sprintf(format, args...)}
}

func errNotFound(format string, args ...any) *apiError {
	return &apiError{status: http.StatusNotFound, code: adminapi.TErrorCode_NOT_FOUND.String(), msg: fmt.Sprintf(format, args...)}
}

// fail answers err: an apiError as it is, an admin error by its code, any
// other error 500 with a generic text (the detail is logged, never echoed).
func (a *API) fail(w http.ResponseWriter, r *http.Request, err error) {
	e := a.classify(r, err)
	a.write(w, r, e.status, map[string]any{"error": map[string]string{"code": e.code, "message": e.msg}})
}

func (a *API) classify(r *http.Request, err error) *apiError {
	var e *apiError
	if errors.As(err, &e) {
		return e
	}
	var ae *adminapi.TAdminError
	if errors.As(err, &ae) {
		status := http.StatusInternalServerError
		switch ae.Code {
		case adminapi.TErrorCode_NOT_FOUND:
			status = http.StatusNotFound
		case adminapi.TErrorCode_INVALID, adminapi.TErrorCode_AMBIGUOUS:
			status = http.StatusBadRequest
		case adminapi.TErrorCode_PERMISSION_DENIED:
			status = http.StatusForbidden
		case adminapi.TErrorCode_NOT_LEADER, adminapi.TErrorCode_UNAVAILABLE, adminapi.TErrorCode_TIMEOUT:
			status = http.StatusServiceUnavailable
		}
		return &apiError{status: status, code: ae.Code.String(), msg: ae.Message}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return &apiError{status: http.StatusServiceUnavailable, code: adminapi.TErrorCode_TIMEOUT.String(),
			msg: "no answer within " + requestTimeout.String()}
	}
	a.d.Logger.Error("httpapi: read failed", zap.String("path", r.URL.Path), zap.Error(err))
	return &apiError{status: http.StatusInternalServerError, code: adminapi.TErrorCode_INTERNAL.String(),
		msg: "internal error; see the master's log"}
}
