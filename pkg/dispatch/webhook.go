package dispatch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

const (
	// DefaultWebhookTimeout bounds one webhook call: long enough for a
	// metadata service to invalidate a cache, short enough that a dead one
	// cannot hold the refresh driver's step budget for long.
	DefaultWebhookTimeout = 10 * time.Second
	// webhookDrainLimit is how much of a response body is read (and thrown
	// away) so a small reply frees its connection for reuse; a larger one
	// is cut off rather than read to the end.
	webhookDrainLimit = 64 << 10
	// idempotencyKeyPrefix + job id is the Idempotency-Key header: one key
	// per job, so a retried or repeated refresh is recognisably the same.
	idempotencyKeyPrefix = "lancemaster-job-"
)

// WebhookOptions configure a WebhookRefresher. Zero values take defaults.
type WebhookOptions struct {
	// Timeout bounds each call (DefaultWebhookTimeout); the caller's ctx
	// may end it sooner.
	Timeout time.Duration
	// Transport is the round tripper (a clone of http.DefaultTransport).
	Transport http.RoundTripper
}

// WebhookRefresher is refresh kind "webhook": an HTTP POST of a small JSON
// document to the catalog's refresh_url. A 2xx answer is success; anything
// else is failure, redirects included — following one would send the job's
// details somewhere the operator did not configure.
//
// It never logs, and its errors never name the URL (its query string may
// carry a token) nor echo a body: only the job id and the status code.
// Safe for concurrent use.
type WebhookRefresher struct {
	client  *http.Client
	timeout time.Duration
}

// NewWebhookRefresher returns a WebhookRefresher.
func NewWebhookRefresher(o WebhookOptions) *WebhookRefresher {
	if o.Timeout <= 0 {
		o.Timeout = DefaultWebhookTimeout
	}
	if o.Transport == nil {
		o.Transport = http.DefaultTransport.(*http.Transport).Clone()
	}
	return &WebhookRefresher{
		timeout: o.Timeout,
		client: &http.Client{
			Transport: o.Transport,
			// No Jar: a refresh carries no state from one call to the next.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
			// A backstop only: the per-call context below is the real bound.
			Timeout: o.Timeout,
		},
	}
}

// webhookBody is the JSON document POSTed; the field names are the contract
// with the receiving service.
type webhookBody struct {
	Catalog      string `json:"catalog"`
	DB           string `json:"db"`
	Table        string `json:"table"`
	JobID        int64  `json:"job_id"`
	IndexName    string `json:"index_name"`
	MutationType string `json:"mutation_type"`
	Outcome      string `json:"outcome"`
}

// WebhookStatusError is a webhook's non-2xx answer.
type WebhookStatusError struct {
	JobID      int64
	StatusCode int
}

func (e *WebhookStatusError) Error() string {
	return fmt.Sprintf("webhook refresh of job %d: HTTP status %d", e.JobID, e.StatusCode)
}

// errWebhookURL: the stored refresh URL is missing or unusable. The message
// is fixed: parse errors quote the URL.
var errWebhookURL = errors.New("the catalog's refresh URL is missing or not an http(s) URL")

// Refresh POSTs the job to r.URL.
func (w *WebhookRefresher) Refresh(ctx context.Context, r RefreshRequest) error {
	u, err := url.Parse(r.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("webhook refresh of job %d: %w", r.JobID, errWebhookURL)
	}
	body, err := json.Marshal(webhookBody{Catalog: r.Catalog, DB: r.DB, Table: r.Table, JobID: r.JobID,
		IndexName: r.IndexName, MutationType: r.MutationType, Outcome: r.Outcome})
	if err != nil {
		return fmt.Errorf("webhook refresh of job %d: encode: %w", r.JobID, err)
	}
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("webhook refresh of job %d: %w", r.JobID, errWebhookURL)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", idempotencyKeyPrefix+strconv.FormatInt(r.JobID, 10))
	req.Header.Set("User-Agent", "lancemaster-refresh")
	resp, err := w.client.Do(req)
	if err != nil {
		return fmt.Errorf("webhook refresh of job %d: %w", r.JobID, stripURL(err))
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, webhookDrainLimit))
	_ = resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return &WebhookStatusError{JobID: r.JobID, StatusCode: resp.StatusCode}
	}
	return nil
}

// stripURL drops the *url.Error wrapper, whose message quotes the whole URL
// with its query string; what it wraps names at most host:port.
func stripURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
