package httpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/pkg/admin"
	"github.com/lancemaster/lancemaster/pkg/config"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
	"github.com/lancemaster/lancemaster/pkg/raftfsm/raftfsmtest"
	"github.com/lancemaster/lancemaster/pkg/rpc"
)

// jobIDs are the job_id fields of an answer's jobs, in order.
func jobIDs(t *testing.T, body map[string]any) []int64 {
	t.Helper()
	list, ok := body["jobs"].([]any)
	if !ok {
		t.Fatalf("no jobs list in %v", body)
	}
	out := make([]int64, 0, len(list))
	for _, j := range list {
		out = append(out, int64(j.(map[string]any)["job_id"].(float64)))
	}
	return out
}

// rigWithJobs: eight jobs on two tables in several states.
//
//	1 items/a IVF_PQ COMMITTED   2 items/b BTREE RUNNING   3 items/c IVF_PQ PENDING
//	4 other/d BTREE  CANCELLED   5..8 other/e..h IVF_PQ PENDING
func rigWithJobs(t *testing.T) *rig {
	r := newRig(t)
	now := int64(testNow - 3_600_000)
	for i, n := range []struct{ table, name, typ string }{
		{"items", "a", "IVF_PQ"}, {"items", "b", "BTREE"}, {"items", "c", "IVF_PQ"}, {"other", "d", "BTREE"},
		{"other", "e", "IVF_PQ"}, {"other", "f", "IVF_PQ"}, {"other", "g", "IVF_PQ"}, {"other", "h", "IVF_PQ"},
	} {
		r.admit(n.table, n.name, n.typ, now+int64(i)*60_000)
	}
	r.dispatch(1, now+600_000)
	r.complete(1, job.NativeOK, now+700_000)
	r.dispatch(2, now+800_000)
	r.cancel(4, now+900_000)
	return r
}

func TestJobsListAndFilters(t *testing.T) {
	r := rigWithJobs(t)
	for _, c := range []struct {
		query string
		want  []int64
	}{
		{"", []int64{8, 7, 6, 5, 4, 3, 2, 1}},
		{"?reverse=true", []int64{1, 2, 3, 4, 5, 6, 7, 8}},
		{"?table=items", []int64{3, 2, 1}},
		{"?state=PENDING", []int64{8, 7, 6, 5, 3}},
		{"?state=RUNNING,CANCELLED", []int64{4, 2}},
		{"?catalog=lake&db=db&table=other&state=CANCELLED", []int64{4}},
		{"?catalog=nosuch", []int64{}},
		{"?unresolved=true&table=items", []int64{3, 2, 1}}, // 1: COMMITTED, refresh REQUIRED
		{"?held=true", []int64{}},                          // no restore ran
		{"?held=false&table=items", []int64{3, 2, 1}},
		{"?index_type=BTREE", []int64{4, 2}},
		{"?mutation_type=CREATE&table=other", []int64{8, 7, 6, 5, 4}},
		{"?mutation_type=DROP", []int64{}},
		{"?since=58m", []int64{8, 7, 6, 5, 4, 3}}, // job i was admitted 61-i minutes ago
		{"?since=" + time.UnixMilli(testNow-3_600_000+5*60_000).UTC().Format(time.RFC3339), []int64{8, 7, 6}},
		{"?since=30m", []int64{}},
	} {
		status, body, _ := r.get("/v1/jobs" + c.query)
		if status != http.StatusOK {
			t.Fatalf("%s: %d %v", c.query, status, body)
		}
		got := jobIDs(t, body)
		if !slices.Equal(got, c.want) {
			t.Errorf("/v1/jobs%s: %v, want %v", c.query, got, c.want)
		}
	}
}

// Paging through next_cursor until it is gone yields the whole filtered
// set, in order, each job once, whatever the page size.
func TestJobsPagination(t *testing.T) {
	r := rigWithJobs(t)
	for _, base := range []string{"?state=PENDING", "?reverse=true", ""} {
		_, all, _ := r.get("/v1/jobs" + base)
		want := jobIDs(t, all)
		for _, limit := range []string{"1", "2", "3"} {
			var got []int64
			q := base + sep(base) + "limit=" + limit
			for pages := 0; ; pages++ {
				if pages > 20 {
					t.Fatalf("%s: no end of pages", q)
				}
				status, body, _ := r.get("/v1/jobs" + q)
				if status != http.StatusOK {
					t.Fatalf("%s: %d %v", q, status, body)
				}
				got = append(got, jobIDs(t, body)...)
				next, ok := body["next_cursor"].(string)
				if !ok {
					break
				}
				q = base + sep(base) + "limit=" + limit + "&cursor=" + next
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s limit %s: paged %v, want %v", base, limit, got, want)
			}
		}
	}
}

func sep(q string) string {
	if q == "" {
		return "?"
	}
	return "&"
}

func TestBadParameters(t *testing.T) {
	r := rigWithJobs(t)
	for _, c := range []struct{ path, param string }{
		{"/v1/jobs?limit=0", "limit"},
		{"/v1/jobs?limit=1001", "limit"},
		{"/v1/jobs?limit=ten", "limit"},
		{"/v1/jobs?unresolved=maybe", "unresolved"},
		{"/v1/jobs?held=1x", "held"},
		{"/v1/jobs?reverse=yes", "reverse"},
		{"/v1/jobs?since=yesterday", "since"},
		{"/v1/jobs?cursor=!!", "cursor"},
		{"/v1/jobs?cursor=0", "cursor"},
		{"/v1/jobs?state=SLEEPING", "state"},
		{"/v1/jobs?colour=red", "colour"},
		{"/v1/jobs?limit=1&limit=2", "limit"},
		{"/v1/jobs?consistent=perhaps", "consistent"},
		{"/v1/jobs/abc", "id"},
		{"/v1/jobs/1/logs?max_bytes=0", "max_bytes"},
		{"/v1/jobs/1/logs?max_bytes=262145", "max_bytes"},
		{"/v1/jobs/x/logs", "id"},
		{"/v1/jobs/0", "id"},
		{"/v1/backends/x", "id"},
		{"/v1/catalogs?all=1", "all"},
		{"/v1/events?cursor=x", "cursor"},
		{"/v1/events?since=-2h", "since"},
		{"/v1/events?limit=5000", "limit"},
	} {
		status, body, _ := r.get(c.path)
		e, _ := body["error"].(map[string]any)
		if status != http.StatusBadRequest || e["code"] != "INVALID" || !strings.Contains(e["message"].(string), c.param) {
			t.Errorf("%s: %d %v; want 400 INVALID naming %s", c.path, status, body, c.param)
		}
		if _, ok := body["answered_by"]; !ok {
			t.Errorf("%s: error without answered_by", c.path)
		}
	}
}

func TestNotFoundAndMethods(t *testing.T) {
	r := rigWithJobs(t)
	for _, p := range []string{"/v1/jobs/99", "/v1/jobs/99/logs", "/v1/backends/99", "/v1/nosuch", "/v1/", "/ui/"} {
		status, body, _ := r.get(p)
		if e, _ := body["error"].(map[string]any); status != http.StatusNotFound || e["code"] != "NOT_FOUND" {
			t.Errorf("GET %s: %d %v; want 404 NOT_FOUND", p, status, body)
		}
	}
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch} {
		req, _ := http.NewRequest(m, r.srv.URL+"/v1/jobs", strings.NewReader("{}"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD" {
			t.Errorf("%s /v1/jobs: %d Allow=%q; want 405", m, resp.StatusCode, resp.Header.Get("Allow"))
		}
	}
	resp, err := http.Head(r.srv.URL + "/v1/jobs")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Lancemaster-Node") != "m1" {
		t.Errorf("HEAD /v1/jobs: %d %v", resp.StatusCode, resp.Header)
	}
}

func TestEveryEndpointAnswersWithTheEnvelope(t *testing.T) {
	r := rigWithJobs(t)
	for _, c := range []struct{ path, key string }{
		{"/v1/jobs", "jobs"}, {"/v1/jobs/1", "job"}, {"/v1/catalogs", "catalogs"}, {"/v1/backends", "backends"},
		{"/v1/jobs/3/logs", "logs"}, {"/v1/jobs/1/logs?max_bytes=100", "logs"},
		{"/v1/backends/1", "backend"}, {"/v1/options", "options"}, {"/v1/members", "members"}, {"/v1/health", "health"},
		{"/v1/jobs?consistent", "jobs"}, {"/v1/jobs/2?consistent=true", "job"}, {"/v1/events", "events"},
	} {
		status, body, h := r.get(c.path)
		if status != http.StatusOK || body[c.key] == nil {
			t.Errorf("%s: %d %v", c.path, status, body)
			continue
		}
		ab, _ := body["answered_by"].(map[string]any)
		if ab["node_id"] != "m1" || ab["is_leader"] != true || ab["known_leader"] != true || ab["leader_id"] != "m1" || ab["last_contact_ms"] != 0.0 {
			t.Errorf("%s: answered_by %v", c.path, ab)
		}
		if h.Get("X-Lancemaster-Node") != "m1" || h.Get("X-Lancemaster-Known-Leader") != "true" || h.Get("X-Lancemaster-Last-Contact") != "0" {
			t.Errorf("%s: headers %v", c.path, h)
		}
		if strings.Contains(toJSON(t, body), storageCanary) || strings.Contains(toJSON(t, body), secretCanary) {
			t.Errorf("%s: a storage credential or an invocation secret in the answer", c.path)
		}
	}
}

// A job's answer carries jobs show's view and its timeline, in journal
// order, each with the entry's index.
func TestJobTimeline(t *testing.T) {
	r := rigWithJobs(t)
	for _, c := range []struct {
		id    string
		kinds string
	}{
		{"1", "ADMITTED DISPATCHED REPORTED RESOLVED REFRESH_REQUIRED"},
		{"2", "ADMITTED DISPATCHED"},
		{"3", "ADMITTED"},
		{"4", "ADMITTED CANCELLED DONE"},
	} {
		status, body, _ := r.get("/v1/jobs/" + c.id)
		if status != http.StatusOK {
			t.Fatalf("job %s: %d %v", c.id, status, body)
		}
		if v := body["job"].(map[string]any); v["job_id"] != float64(r.job(int64(len(c.id))).JobID) && v["job_id"].(float64) < 1 {
			t.Fatalf("job %s: view %v", c.id, v)
		}
		var kinds []string
		last := 0.0
		for _, e := range body["timeline"].([]any) {
			ev := e.(map[string]any)
			kinds = append(kinds, ev["kind"].(string))
			if ix := ev["index"].(float64); ix < last || ix == 0 {
				t.Errorf("job %s: index %v after %v", c.id, ix, last)
			} else {
				last = ix
			}
			if ev["kind"] == "CANCELLED" && ev["actor"] != "bob" {
				t.Errorf("job %s: cancel without its actor: %v", c.id, ev)
			}
			if ev["kind"] == "ADMITTED" && (ev["actor"] != "alice" || ev["time_ms"].(float64) == 0) {
				t.Errorf("job %s: admission %v", c.id, ev)
			}
		}
		if got := strings.Join(kinds, " "); got != c.kinds {
			t.Errorf("job %s: timeline %s, want %s", c.id, got, c.kinds)
		}
	}
}

// Without TLS the API answers only when Access allows plaintext; a TLS
// listener's API never answers a plaintext request.
func TestAccessWithoutTLS(t *testing.T) {
	r := newRig(t)
	for _, c := range []struct {
		access Access
		status int
	}{{Access{Plaintext: true}, http.StatusOK}, {Access{}, http.StatusForbidden}, {Access{TLS: true}, http.StatusForbidden}} {
		api := New(Deps{Admin: r.adm, Reader: r.fsm, Raft: leaderRaft{}, NodeID: "m1", Access: c.access})
		for _, p := range []string{"/v1/jobs", "/ui/"} {
			rec := httptest.NewRecorder()
			api.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, p, nil))
			want := c.status
			if p == "/ui/" && want == http.StatusOK {
				want = http.StatusNotFound // no console
			}
			if rec.Code != want || !strings.Contains(rec.Body.String(), "answered_by") {
				t.Errorf("%+v GET %s: %d %s; want %d", c.access, p, rec.Code, rec.Body, want)
			}
		}
	}
	console := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("console " + r.URL.Path)) })
	api := New(Deps{Admin: r.adm, Reader: r.fsm, Raft: leaderRaft{}, NodeID: "m1", Access: Access{Plaintext: true}, Console: console})
	rec := httptest.NewRecorder()
	api.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/ui/jobs.html", nil))
	if rec.Code != http.StatusOK || rec.Body.String() != "console /ui/jobs.html" {
		t.Errorf("console: %d %q", rec.Code, rec.Body)
	}
}

type followerProposer struct{ *raftfsmtest.Proposer }

func (followerProposer) IsLeader() bool { return false }

type leaderless struct{ cluster }

func (leaderless) Leader() (string, string) { return "", "" }

type leaderlessRaft struct{}

func (leaderlessRaft) IsLeader() bool           { return false }
func (leaderlessRaft) Leader() (string, string) { return "", "" }
func (leaderlessRaft) LastContact() time.Time   { return time.Time{} }

// A follower that knows no leader: its answers say so and warn that they
// may be stale; a consistent read cannot be served (503).
func TestFollowerWithoutLeader(t *testing.T) {
	r := rigWithJobs(t)
	adm := admin.New(admin.Deps{
		Proposer: followerProposer{r.prop}, Reader: r.fsm, Cluster: leaderless{cluster{r.prop}},
		Backends: rpc.NewThriftBackendClient(rpc.DefaultConfig()), Credentials: config.StaticCredentials{}, NodeID: "m2",
		Clock:     func() time.Time { return time.UnixMilli(testNow) },
		ReadIndex: func(context.Context) (uint64, error) { return 0, raftfsm.ErrNotLeader },
		CaughtUp:  func(uint64) bool { return true },
	})
	srv := httptest.NewServer(New(Deps{Admin: adm, Reader: r.fsm, Raft: leaderlessRaft{}, NodeID: "m2", Access: Access{Plaintext: true}}))
	defer srv.Close()
	status, body, h := getJSON(t, http.DefaultClient, srv.URL+"/v1/jobs")
	ab, _ := body["answered_by"].(map[string]any)
	if status != http.StatusOK || ab["known_leader"] != false || ab["last_contact_ms"] != -1.0 || ab["leader_id"] != nil ||
		h.Get("X-Lancemaster-Known-Leader") != "false" || h.Get("X-Lancemaster-Last-Contact") != "-1" {
		t.Fatalf("follower's answer: %d %v %v", status, body, h)
	}
	if w, _ := body["stale_warning"].(string); !strings.Contains(w, "master m2 knows no leader") {
		t.Fatalf("stale_warning %q", w)
	}
	for _, p := range []string{"/v1/jobs?consistent", "/v1/jobs/1?consistent", "/v1/catalogs?consistent=true"} {
		status, body, _ := getJSON(t, http.DefaultClient, srv.URL+p)
		if e, _ := body["error"].(map[string]any); status != http.StatusServiceUnavailable || e["code"] != "UNAVAILABLE" {
			t.Errorf("%s: %d %v; want 503 UNAVAILABLE", p, status, body)
		}
	}
}

// The audit trail: newest first, filtered, paged through next_cursor.
func TestEvents(t *testing.T) {
	r := rigWithJobs(t)
	_, all, _ := r.get("/v1/events")
	events, _ := all["events"].([]any)
	if len(events) < 2 || all["next_cursor"] != nil {
		t.Fatalf("events %v", all)
	}
	var kinds []string
	for _, e := range events {
		kinds = append(kinds, e.(map[string]any)["kind"].(string))
	}
	var paged []string
	q := "/v1/events?limit=1"
	for pages := 0; ; pages++ {
		if pages > len(events) {
			t.Fatal("no end of pages")
		}
		_, body, _ := r.get(q)
		for _, e := range body["events"].([]any) {
			paged = append(paged, e.(map[string]any)["kind"].(string))
		}
		next, ok := body["next_cursor"].(string)
		if !ok {
			break
		}
		q = "/v1/events?limit=1&cursor=" + next
	}
	if !slices.Equal(paged, kinds) {
		t.Fatalf("paged %v, want %v", paged, kinds)
	}
	_, body, _ := r.get("/v1/events?kind=catalog.")
	if got := body["events"].([]any); len(got) != 1 || got[0].(map[string]any)["kind"] != "catalog.create" {
		t.Fatalf("kind=catalog.: %v (all: %v)", got, kinds)
	}
}
