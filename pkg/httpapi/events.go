package httpapi

import (
	"context"
	"net/http"
	"strconv"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
)

var eventsParams = []string{"kind", "subject", "actor", "since", "limit", "cursor"}

// listEvents is GET /v1/events: the audit trail as `lancemaster events`
// lists it, newest first, with its cursor (the last event's seq).
func (a *API) listEvents(w http.ResponseWriter, r *http.Request) {
	a.serve(w, r, eventsParams, func(ctx context.Context, q *query) (map[string]any, string, error) {
		req := &adminapi.TListEventsRequest{}
		for _, p := range []struct {
			name string
			dst  **string
		}{{"kind", &req.Kind}, {"subject", &req.Subject}, {"actor", &req.Actor}} {
			if s := q.str(p.name); s != "" {
				*p.dst = &s
			}
		}
		limit, since, cursor, err := q.page(a.d.Clock())
		if err != nil {
			return nil, "", err
		}
		req.Limit, req.BeforeSeq = &limit, cursor
		if since != 0 {
			req.SinceMs = &since
		}
		resp, err := a.d.Admin.ListEvents(ctx, req)
		if err != nil {
			return nil, "", err
		}
		body := map[string]any{"events": resp.Events}
		if resp.Events == nil {
			body["events"] = []*adminapi.TAuditEvent{}
		}
		if next := resp.NextBeforeSeq; next != nil {
			body["next_cursor"] = strconv.FormatInt(*next, 10)
		}
		return body, resp.GetStaleWarning(), nil
	})
}
