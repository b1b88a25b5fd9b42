package httpapi

import (
	"net/http"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/pkg/job"
)

// Jobs list bounds: the admin API's.
const (
	defaultJobsPage = 100
	maxJobsPage     = 1000
)

var jobsParams = []string{"catalog", "db", "table", "state", "mutation_type", "index_type", "unresolved",
	"limit", "cursor", "reverse", "since"}

// listJobs is GET /v1/jobs: jobs list's filters and pages, newest first
// (reverse=true: oldest first), with an opaque cursor.
func (a *API) listJobs(w http.ResponseWriter, r *http.Request) {
	req, rd, cancel, err := a.jobsRequest(r)
	defer cancel()
	if err != nil {
		a.fail(w, r, err)
		return
	}
	resp, err := a.d.Admin.ListJobs(rd.ctx, req)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	jobs := resp.Jobs
	if jobs == nil {
		jobs = []*adminapi.TJobView{}
	}
	body := map[string]any{"jobs": jobs}
	// The admin layer says how to go on in its paging direction; the
	// cursor carries that direction, so it works with either.
	switch {
	case resp.IsSetNextBeforeJobID():
		body["next_cursor"] = encodeCursor('b', resp.GetNextBeforeJobID())
	case resp.IsSetNextAfterJobID():
		body["next_cursor"] = encodeCursor('a', resp.GetNextAfterJobID())
	}
	a.reply(w, r, rd, body, resp.GetStaleWarning())
}

func (a *API) jobsRequest(r *http.Request) (*adminapi.TListJobsRequest, read, func(), error) {
	nop := func() {}
	q, err := parseQuery(r, jobsParams...)
	if err != nil {
		return nil, read{}, nop, err
	}
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
		return nil, read{}, nop, err
	}
	oldest, err := q.boolean("reverse")
	if err != nil {
		return nil, read{}, nop, err
	}
	limit, err := q.limit("limit", defaultJobsPage, maxJobsPage)
	if err != nil {
		return nil, read{}, nop, err
	}
	since, err := q.since("since", a.d.Clock())
	if err != nil {
		return nil, read{}, nop, err
	}
	l32 := int32(limit)
	req.Limit = &l32
	if unresolved {
		req.Unresolved = &unresolved
	}
	if oldest {
		req.OldestFirst = &oldest
	}
	if since != 0 {
		req.SinceMs = &since
	}
	if c := q.str("cursor"); c != "" {
		dir, id, err := decodeCursor(c)
		if err != nil {
			return nil, read{}, nop, err
		}
		if dir == 'b' && oldest {
			return nil, read{}, nop, errBadParam("cursor", "this cursor pages newest first; drop reverse=true or start again")
		}
		if dir == 'a' {
			req.AfterJobID = &id
		} else {
			req.BeforeJobID = &id
		}
	}
	rd, cancel, err := a.begin(r, q)
	if err != nil {
		return nil, read{}, cancel, err
	}
	return req, rd, cancel, nil
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
	q, err := parseQuery(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	id, err := positiveID("id", r.PathValue("id"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	rd, cancel, err := a.begin(r, q)
	defer cancel()
	if err != nil {
		a.fail(w, r, err)
		return
	}
	// The timeline is read from the same state the view comes from or a
	// later one; a job is never changed back, only further along.
	v, err := a.d.Admin.ShowJob(rd.ctx, id, false)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	stale := v.GetStaleWarning()
	v.StaleWarning = nil
	events := []Event{}
	if rec, ok := a.d.Reader.State().Job(id); ok {
		for _, t := range job.TimelineOf(rec) {
			events = append(events, Event{Kind: t.Kind.String(), TimeMs: t.TimeMs, Index: t.Index, Actor: t.Actor, Detail: t.Detail})
		}
	}
	a.reply(w, r, rd, map[string]any{"job": v, "timeline": events}, stale)
}
