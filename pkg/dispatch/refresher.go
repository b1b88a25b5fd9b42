package dispatch

import (
	"context"
	"errors"
	"fmt"

	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// Refresher refreshes the external metadata of one table after a job reached
// an outcome (DESIGN.md §3 R1–R3): the refresh driver's only side effect.
//
// Concurrency: the refresh driver calls Refresh from up to
// RefreshDeps.Concurrency goroutines at once, each for a different job, so an
// implementation must be safe for concurrent use. Refresh must return
// promptly once ctx is done (ctx carries the step's budget and the
// leadership term); a Refresh that ignores ctx is abandoned and recorded as
// FAILED when the budget is over.
//
// Idempotency: the same job may be refreshed more than once — a FAILED
// refresh is retried, a leader may die between the refresh and its R2 (the
// next leader downgrades the job with R4 and refreshes again), a call that
// timed out may still have reached the target. The target must treat
// repeated requests with the same JobID as one.
//
// A nil error means the refresh took effect (R2, the job is resolved); any
// error records R3 (FAILED) and the job is retried after
// lance_index_job_refresh_retry_second.
type Refresher interface {
	Refresh(ctx context.Context, r RefreshRequest) error
}

// RefreshRequest is what a refresher learns about a job. It never carries
// the dataset locator or any credential.
type RefreshRequest struct {
	JobID        int64
	Catalog      string // the catalog's name
	DB, Table    string
	IndexName    string // the user's spelling (display name); "" for OPTIMIZE
	MutationType string // CREATE, REPLACE, DROP or OPTIMIZE (dataset-scoped: no index name)
	Outcome      string // COMMITTED, NOT_COMMITTED or UNKNOWN
	// URL is the catalog's refresh target of kind webhook ("" otherwise).
	// It may carry a token in its query string: never log it.
	URL string
	// Address, Statement and CredentialsRef are the catalog's fields of
	// kind mysql ("" otherwise): HOST:PORT, the statement template (""
	// means raftfsm.DefaultRefreshStatement) and the name of the
	// credentials file under the secrets directory (never the secret).
	Address, Statement, CredentialsRef string
}

// NoneRefresher is refresh kind "none": nothing outside lancemaster caches
// the table's indexes, so a refresh succeeds at once. The driver still
// journals R1 and R2 for it, so every outcome resolves the same way.
type NoneRefresher struct{}

// Refresh returns nil.
func (NoneRefresher) Refresh(context.Context, RefreshRequest) error { return nil }

// ErrUnknownRefreshKind: a catalog names a refresh kind this master has no
// Refresher for (the driver records R3 and logs it).
var ErrUnknownRefreshKind = errors.New("unknown refresh kind")

// Refreshers maps a catalog refresh kind (raftfsm.RefreshNone,
// raftfsm.RefreshWebhook, raftfsm.RefreshMySQL) to its Refresher. It is
// read-only once the driver runs.
type Refreshers map[string]Refresher

// DefaultRefreshers is kind none, kind webhook through w (a default
// WebhookRefresher when w is nil) and kind mysql through m (when nil, a
// MySQLRefresher without credentials, whose every refresh fails with a
// clear error: the master passes one over its secrets directory).
func DefaultRefreshers(w *WebhookRefresher, m *MySQLRefresher) Refreshers {
	if w == nil {
		w = NewWebhookRefresher(WebhookOptions{})
	}
	if m == nil {
		m = NewMySQLRefresher(MySQLOptions{})
	}
	return Refreshers{raftfsm.RefreshNone: NoneRefresher{}, raftfsm.RefreshWebhook: w, raftfsm.RefreshMySQL: m}
}

// Lookup returns the Refresher of kind. An unknown kind is an error rather
// than a silent success: a refresh that never happened must not resolve the
// job. The FSM stores kind "" as none, so "" means none here too.
func (rs Refreshers) Lookup(kind string) (Refresher, error) {
	if kind == "" {
		kind = raftfsm.RefreshNone
	}
	if r, ok := rs[kind]; ok && r != nil {
		return r, nil
	}
	return nil, fmt.Errorf("%w %q", ErrUnknownRefreshKind, kind)
}
