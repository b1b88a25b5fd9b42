package httpapi

import (
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// query is a request's parameters, checked against the names an endpoint
// accepts: a misspelt parameter is a 400, not a filter silently ignored.
type query struct{ v url.Values }

func parseQuery(r *http.Request, accepted ...string) (*query, error) {
	v, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, &apiError{status: http.StatusBadRequest, code: "INVALID", msg: "the query string does not parse: " + err.Error()}
	}
	accepted = append(accepted, "consistent")
	var unknown []string
	for k, vals := range v {
		if !slices.Contains(accepted, k) {
			unknown = append(unknown, k)
		} else if len(vals) > 1 {
			return nil, errBadParam(k, "given %d times; give it once", len(vals))
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		sort.Strings(accepted)
		return nil, errBadParam(unknown[0], "unknown parameter (accepted: %s)", strings.Join(accepted, ", "))
	}
	return &query{v}, nil
}

func (q *query) str(name string) string { return q.v.Get(name) }

// boolean reads a flag: absent is false; present empty ("?consistent"),
// true or 1 is true; false or 0 is false.
func (q *query) boolean(name string) (bool, error) {
	if !q.v.Has(name) {
		return false, nil
	}
	switch strings.ToLower(q.v.Get(name)) {
	case "", "true", "1":
		return true, nil
	case "false", "0":
		return false, nil
	}
	return false, errBadParam(name, "%q is not a boolean (accepted: true, false, or the name alone)", q.v.Get(name))
}

// limit reads a page size: 1..maxPage, def when absent.
func (q *query) limit(name string, def, maxPage int) (int, error) {
	if !q.v.Has(name) {
		return def, nil
	}
	n, err := strconv.Atoi(q.v.Get(name))
	if err != nil || n < 1 || n > maxPage {
		return 0, errBadParam(name, "%q is not an integer from 1 to %d", q.v.Get(name), maxPage)
	}
	return n, nil
}

// since reads a time: RFC 3339, or a Go duration d meaning now-d. 0 when
// absent.
func (q *query) since(name string, now time.Time) (int64, error) {
	s := q.v.Get(name)
	if s == "" {
		return 0, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t.UnixMilli(), nil
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return now.Add(-d).UnixMilli(), nil
	}
	return 0, errBadParam(name, "%q is neither an RFC 3339 time (2026-12-01T08:00:00Z) nor a positive duration (2h, 30m)", s)
}

// page reads what every paged list takes: limit (1..maxJobsPage), since
// (0 when absent) and cursor (nil when absent: the first page).
func (q *query) page(now time.Time) (limit int32, since int64, cursor *int64, err error) {
	n, err := q.limit("limit", defaultJobsPage, maxJobsPage)
	if err != nil {
		return 0, 0, nil, err
	}
	if since, err = q.since("since", now); err != nil {
		return 0, 0, nil, err
	}
	if c := q.str("cursor"); c != "" {
		id, err := strconv.ParseInt(c, 10, 64)
		if err != nil || id <= 0 {
			return 0, 0, nil, errBadParam("cursor", "%q is not a cursor: pass the next_cursor of the previous page unchanged", c)
		}
		cursor = &id
	}
	return int32(n), since, cursor, nil
}

// positiveID reads a path id.
func positiveID(name, s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, errBadParam(name, "%q is not a positive integer", s)
	}
	return n, nil
}
