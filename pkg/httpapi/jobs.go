package httpapi

import (
	"context"
	"net/http"
	"strconv"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/pkg/admin"
	"github.com/lancemaster/lancemaster/pkg/job"
)

// Jobs list bounds: the admin API's.
const (
	defaultJobsPage = 100
	maxJobsPage     = 1000
)

var jobsParams = []string{"catalog", "db", "table", "state", "mutation_type", "index_type", "unresolved", "held",
	"limit", "cursor", "reverse", "since"}

// listJobs is GET /v1/jobs: jobs list's filters and pages, newest first
// (reverse=true: oldest first), with jobs list's cursor.
func (a *API) listJobs(w http.ResponseWriter, r *http.Request) {
	a.serve(w, r, jobsParams, func(ctx context.Context, q *query) (map[string]any, string, error) {
		req, err := a.jobsRequest(q)
		if err != nil {
			return nil, "", err
		}
		resp, err := a.d.Admin.ListJobs(ctx, req)
		if err != nil {
			return nil, "", err
		}
		jobs := resp.Jobs
		if jobs == nil {
			jobs = []*adminapi.TJobView{}
		}
		body := map[string]any{"jobs": jobs}
		// The cursor is jobs list -o json's: the last job id of the page,
		// continued in the request's direction.
		if next := resp.NextBeforeJobID; next != nil {
			body["next_cursor"] = strconv.FormatInt(*next, 10)
		} else if next := resp.NextAfterJobID; next != nil {
			body["next_cursor"] = strconv.FormatInt(*next, 10)
		}
		return body, resp.GetStaleWarning(), nil
	})
}

// jobsRequest is the admin request of a jobs query.
func (a *API) jobsRequest(q *query) (*adminapi.TListJobsRequest, error) {
	req := &adminapi.TListJobsRequest{}
	for _, p := range []struct {
		name string
		dst  **string
	}{{"catalog", &req.Catalog}, {"db", &req.Db}, {"table", &req.Table}, {"state", &req.State},
		{"mutation_type", &req.MutationType}, {"index_type", &req.IndexType}} {
		if s := q.str(p.name); s != "" {
			*p.dst = &s
		}
	}
	unresolved, err := q.boolean("unresolved")
	if err != nil {
		return nil, err
	}
	held, err := q.boolean("held")
	if err != nil {
		return nil, err
	}
	oldest, err := q.boolean("reverse")
	if err != nil {
		return nil, err
	}
	limit, since, cursor, err := q.page(a.d.Clock())
	if err != nil {
		return nil, err
	}
	req.Limit = &limit
	if unresolved {
		req.Unresolved = &unresolved
	}
	if held {
		req.Held = &held
	}
	// Always said: a request that does not say is an older client's,
	// answered in id order.
	req.OldestFirst = &oldest
	if since != 0 {
		req.SinceMs = &since
	}
	if cursor != nil && oldest {
		req.AfterJobID = cursor
	} else {
		req.BeforeJobID = cursor
	}
	return req, nil
}

// Event is one transition of a job's timeline as the API shows it.
type Event struct {
	Kind   string `json:"kind"`
	TimeMs int64  `json:"time_ms"`
	Index  uint64 `json:"index"`
	Actor  string `json:"actor,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// showJob is GET /v1/jobs/{id}: jobs show's view and the timeline.
func (a *API) showJob(w http.ResponseWriter, r *http.Request) {
	id, err := positiveID("id", r.PathValue("id"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.serve(w, r, nil, func(ctx context.Context, _ *query) (map[string]any, string, error) {
		// The timeline is read from the view's state or a later one: a job
		// only ever moves further along.
		v, err := a.d.Admin.ShowJob(ctx, id, false)
		if err != nil {
			return nil, "", err
		}
		stale := v.GetStaleWarning()
		v.StaleWarning = nil
		events := []Event{}
		if rec, ok := a.d.Reader.State().Job(id); ok {
			for _, t := range job.TimelineOf(rec) {
				events = append(events, Event{Kind: t.Kind.String(), TimeMs: t.TimeMs, Index: t.Index, Actor: t.Actor, Detail: t.Detail})
			}
		}
		return map[string]any{"job": v, "timeline": events}, stale, nil
	})
}

// jobLogs is GET /v1/jobs/{id}/logs: jobs logs (the redacted worker log,
// from its backend, else the journal's tail). max_bytes keeps the newest
// bytes (1..262144; default all the backend keeps).
func (a *API) jobLogs(w http.ResponseWriter, r *http.Request) {
	id, err := positiveID("id", r.PathValue("id"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.serve(w, r, []string{"max_bytes"}, func(ctx context.Context, q *query) (map[string]any, string, error) {
		maxBytes, err := q.limit("max_bytes", 0, admin.MaxJobLogBytes)
		if err != nil {
			return nil, "", err
		}
		logs, err := a.d.Admin.JobLogs(ctx, id, int32(maxBytes))
		if err != nil {
			return nil, "", err
		}
		return map[string]any{"logs": logs}, "", nil
	})
}
