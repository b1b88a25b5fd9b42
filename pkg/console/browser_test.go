package console_test

import (
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/pkg/console/consoletest"
)

// ids are the job ids of rows, top to bottom.
func ids(rows []consoletest.JobRow) []int64 {
	out := make([]int64, len(rows))
	for i, r := range rows {
		out[i] = r.ID
	}
	return out
}

// want are the ids of the fixture's jobs that match q's filters on its
// first page (cursor: a later one).
func (f *fixtureAPI) want(t *testing.T, filters map[string]string) []int64 {
	q := map[string][]string{}
	for k, v := range filters {
		q[k] = []string{v}
	}
	jobs, _ := f.page(q)
	out := make([]int64, len(jobs))
	for i, j := range jobs {
		out[i] = j.JobID
	}
	return out
}

// checkRows compares the page's rows with the fixture's jobs field by field.
func checkRows(t *testing.T, f *fixtureAPI, rows []consoletest.JobRow, want []int64) {
	t.Helper()
	if got := ids(rows); !slices.Equal(got, want) {
		t.Fatalf("rows %v, want %v", got, want)
	}
	for _, r := range rows {
		j := f.jobs[slices.IndexFunc(f.jobs, func(j *adminapi.TJobView) bool { return j.JobID == r.ID })]
		target := j.GetCatalog() + "." + j.GetDb() + "." + j.GetTable()
		if r.State != j.GetMutationState() || r.Cols["target"] != target || r.Cols["index"] != j.GetIndexName() ||
			r.Cols["mutation"] != j.GetMutationType() || r.Cols["refresh"] != j.GetRefreshState() || r.Unresolved != j.GetUnresolved() {
			t.Errorf("row %d = %+v; the API said %s %s %s %s %s unresolved=%v", r.ID, r, j.GetMutationState(), target,
				j.GetIndexName(), j.GetMutationType(), j.GetRefreshState(), j.GetUnresolved())
		}
		needsOperator := j.GetMutationState() == "UNKNOWN" && !j.GetForceReleased()
		if strings.Contains(r.Classes, "needs-operator") != needsOperator {
			t.Errorf("row %d: classes %q; an UNKNOWN job not force-released must stand out, no other", r.ID, r.Classes)
		}
	}
}

func noCanary(t *testing.T, b *consoletest.Browser, where string) {
	t.Helper()
	if s := b.Everything(); strings.Contains(s, canary) {
		i := strings.Index(s, canary)
		t.Errorf("%s: the secret canary is in the page: …%s…", where, s[max(0, i-120):min(len(s), i+60)])
	}
}

// The console against fixture API answers in a real headless chromium:
// every page loads without a console error, the jobs rows equal the
// answer, each filter changes the request and the rows, paging follows
// next_cursor, the timeline lists the transitions in journal order, the
// stale and no-leader banners show, no fixture secret and no injected
// markup reaches the page, the auto-refresh polls and pauses; a screenshot
// of each page.
func TestConsolePagesAgainstFixtureAPI(t *testing.T) {
	f := newFixtureAPI(t)
	srv := httptest.NewServer(fixtureServer(f))
	defer srv.Close()
	b := consoletest.New(t, srv.URL)

	// Jobs: the first page, newest first, as the API answered it.
	b.Open("", "#/jobs")
	checkRows(t, f, b.JobRows(), f.want(t, nil))
	if q := f.lastQuery("/v1/jobs"); len(q) != 0 {
		t.Errorf("the unfiltered jobs page sent filters: %v", q)
	}
	if bn := b.Banners(); !strings.Contains(bn["unknown-jobs"], "1 UNKNOWN job needs an operator") || bn["stale"] != "" || bn["no-leader"] != "" {
		t.Errorf("jobs page banners: %v", bn)
	}
	if s := consoletest.Eval[string](b, `document.getElementById("answered-by").textContent`); s != "answered by m2 (a follower; leader m1) · last contact 12 ms ago" {
		t.Errorf("answered-by line: %q", s)
	}
	b.Screenshot("console-jobs")

	// The injected index name is text, not markup.
	if n := consoletest.Eval[int](b, `document.querySelectorAll("#jobs img").length + (window.__pwned ? 100 : 0)`); n != 0 {
		t.Errorf("markup from the API was interpreted (%d)", n)
	}

	// Paging: next_cursor is sent back unchanged.
	b.Click("#next-page")
	b.WaitRendered("#/jobs?cursor=before-4")
	if c := f.lastQuery("/v1/jobs").Get("cursor"); c != "before-4" {
		t.Errorf("next page sent cursor %q, want before-4", c)
	}
	checkRows(t, f, b.JobRows(), []int64{3, 2, 1})
	if strings.Contains(consoletest.Eval[string](b, `document.documentElement.outerHTML`), "<img src=x") {
		t.Error("the injected index name is in the DOM as markup")
	}
	if got := consoletest.Eval[string](b, `document.querySelector('tr[data-job-id="1"] td[data-col="index"]').textContent`); got != xssName {
		t.Errorf("job 1's index name shows as %q, want the literal %q", got, xssName)
	}
	b.Click("#first-page")
	b.WaitRendered("#/jobs")

	// Filters: several states, then the others one by one.
	filters := []struct {
		click, hash string
		want        map[string]string
	}{
		{`input[data-state="UNKNOWN"]`, "#/jobs?state=UNKNOWN", map[string]string{"state": "UNKNOWN"}},
		{`input[data-state="PENDING"]`, "#/jobs?state=PENDING%2CUNKNOWN", map[string]string{"state": "PENDING,UNKNOWN"}},
		{`input[data-state="refresh:FAILED"]`, "#/jobs?state=PENDING%2CUNKNOWN%2Crefresh%3AFAILED", map[string]string{"state": "PENDING,UNKNOWN,refresh:FAILED"}},
		{"#f-unresolved", "#/jobs?state=PENDING%2CUNKNOWN%2Crefresh%3AFAILED&unresolved=true", map[string]string{"state": "PENDING,UNKNOWN,refresh:FAILED", "unresolved": "true"}},
		{"#f-clear", "#/jobs", nil},
	}
	for _, tc := range filters {
		before := f.count("/v1/jobs")
		b.Click(tc.click)
		b.WaitRendered(tc.hash)
		if f.count("/v1/jobs") <= before {
			t.Fatalf("%s: no new request", tc.click)
		}
		q := f.lastQuery("/v1/jobs")
		for k, v := range tc.want {
			if q.Get(k) != v {
				t.Errorf("%s: request %v, want %s=%s", tc.click, q, k, v)
			}
		}
		if len(q) != len(tc.want) {
			t.Errorf("%s: request %v, want only %v", tc.click, q, tc.want)
		}
		checkRows(t, f, b.JobRows(), f.want(t, tc.want))
	}
	for _, tc := range []struct{ input, value, hash, param, flag string }{
		{"#f-catalog", "docs", "#/jobs?catalog=docs", "catalog", "--catalog docs"},
		{"#f-table", "orders", "#/jobs?table=orders", "table", "--table orders"},
		{"#f-mutation_type", "DROP", "#/jobs?mutation_type=DROP", "mutation_type", "--type DROP"},
		{"#f-index_type", "BTREE", "#/jobs?index_type=BTREE", "index_type", "--index-type BTREE"},
	} {
		b.Go("#/jobs")
		consoletest.Eval[bool](b, `(() => { const e = document.querySelector(`+"`"+tc.input+"`"+`); e.value = `+"`"+tc.value+"`"+`;
			e.dispatchEvent(new Event("change")); return true; })()`)
		b.WaitRendered(tc.hash)
		if got := f.lastQuery("/v1/jobs").Get(tc.param); got != tc.value {
			t.Errorf("%s: sent %s=%q", tc.input, tc.param, got)
		}
		checkRows(t, f, b.JobRows(), f.want(t, map[string]string{tc.param: tc.value}))
		if cmd := consoletest.Eval[string](b, `document.querySelector("#jobs-cli code").textContent`); cmd != "lancemaster jobs list "+tc.flag+" --all" {
			t.Errorf("%s: the CLI box says %q", tc.input, cmd)
		}
	}
	if len(f.queries("/v1/catalogs")) == 0 {
		t.Error("the catalog filter never asked for the catalogs")
	}
	noCanary(t, b, "jobs")

	// A row leads to its job; the timeline is the answer's, in order.
	b.Go("#/jobs?cursor=before-4")
	b.Click(`tr[data-job-id="3"] td[data-col="index"]`)
	b.WaitRendered("#/jobs/3")
	tl := b.Timeline()
	if len(tl) != len(timeline3) {
		t.Fatalf("timeline %+v, want %d steps", tl, len(timeline3))
	}
	for i, e := range tl {
		w := timeline3[i]
		if e.Kind != w["kind"] || e.Index != int64(w["index"].(int)) || (w["actor"] != nil && !strings.Contains(e.Text, w["actor"].(string))) ||
			(w["detail"] != nil && !strings.Contains(e.Text, w["detail"].(string))) {
			t.Errorf("timeline step %d = %+v, want %v", i, e, w)
		}
		if i > 0 && e.Index < tl[i-1].Index {
			t.Errorf("timeline not in journal order at step %d: %+v", i, tl)
		}
	}
	page := consoletest.Eval[string](b, `document.getElementById("job").innerText`)
	for _, s := range []string{"inv-3-7d2f", "NATIVE_OK", "CHILD_REAPED", "8.4 s", "700.0 MiB (cgroup)", "training 4.0 s", "writing 2.4 s", "1764633000123", "lancemaster jobs show 3"} {
		if !strings.Contains(page, s) {
			t.Errorf("the job page lacks %q", s)
		}
	}
	if got := consoletest.Eval[string](b, `document.getElementById("log-tail").textContent`); got != log3 {
		t.Errorf("log tail %q, want %q", got, log3)
	}
	if q := f.lastQuery("/v1/jobs/3/logs"); q.Get("max_bytes") != "16384" {
		t.Errorf("logs request %v, want max_bytes=16384", q)
	}
	noCanary(t, b, "job 3")
	b.FullScreenshot("console-job")

	// An UNKNOWN job says what the operator may do, as a command.
	b.Go("#/jobs/6")
	if !strings.Contains(b.Banners()["unknown"], "UNKNOWN") ||
		!strings.Contains(b.Everything(), "lancemaster jobs resolve 6 --force-release --comment") {
		t.Error("the UNKNOWN job's page has no banner or no force-release command")
	}
	// A missing job: the API's error, shown.
	b.Go("#/jobs/999")
	if e := b.Banners()["error"]; !strings.Contains(e, "NOT_FOUND: no job 999") {
		t.Errorf("error banner %q", e)
	}
	b.ExpectProblem("/v1/jobs/999") // the browser logs the 404 answer itself
	b.NoProblems("jobs and job pages")

	// Backends: slots, draining, and the stale/no-leader banners of that answer.
	b.Go("#/backends")
	txt := consoletest.Eval[string](b, `document.getElementById("backends").innerText`)
	for _, s := range []string{"1 / 4", "ACCEPTING", "DRAINING", "1764633000123", "v0.9.0", "no heartbeat answer for 40s"} {
		if !strings.Contains(txt, s) {
			t.Errorf("backends page lacks %q:\n%s", s, txt)
		}
	}
	if f.count("/v1/backends/1") == 0 || f.count("/v1/backends/2") == 0 {
		t.Error("the backends page did not ask each backend for its slots (backends show)")
	}
	bn := b.Banners()
	if !strings.Contains(bn["stale"], "may be stale") || !strings.Contains(bn["no-leader"], "knows no leader") {
		t.Errorf("backends banners: %v", bn)
	}
	if s := consoletest.Eval[string](b, `document.getElementById("answered-by").textContent`); !strings.Contains(s, "m3 (a master that knows no leader)") {
		t.Errorf("answered-by line: %q", s)
	}
	noCanary(t, b, "backends")
	b.Screenshot("console-backends")

	b.Go("#/cluster")
	if s := consoletest.Eval[string](b, `document.getElementById("leader").textContent + "|" + document.getElementById("failure-tolerance").textContent`); s != "m1|0" {
		t.Errorf("cluster leader|tolerance = %q", s)
	}
	b.Screenshot("console-cluster")

	b.Go("#/options")
	if n := consoletest.Eval[int](b, `document.querySelectorAll("#options tr.changed").length`); n != 1 {
		t.Errorf("%d options marked changed, want 1", n)
	}
	noCanary(t, b, "options")
	b.Screenshot("console-options")

	// Events: the audit trail, filtered by a kind prefix.
	b.Go("#/events")
	if n := consoletest.Eval[int](b, `document.querySelectorAll("#events tbody tr").length`); n != len(fixtureEvents) {
		t.Errorf("events page shows %d rows, want %d", n, len(fixtureEvents))
	}
	b.Screenshot("console-events")
	consoletest.Eval[bool](b, `(() => { const e = document.getElementById("e-kind"); e.value = "backend."; e.dispatchEvent(new Event("change")); return true; })()`)
	b.WaitRendered("#/events?kind=backend.")
	if k := f.lastQuery("/v1/events").Get("kind"); k != "backend." {
		t.Errorf("events kind filter sent %q", k)
	}
	if got := consoletest.Eval[[]string](b, `[...document.querySelectorAll('#events td[data-col="kind"]')].map((td) => td.textContent)`); !slices.Equal(got, []string{"backend.drain", "backend.add"}) {
		t.Errorf("events filtered by backend.: %v", got)
	}
	if cmd := consoletest.Eval[string](b, `document.querySelector("#events-cli code").textContent`); cmd != "lancemaster events --kind backend." {
		t.Errorf("events CLI box %q", cmd)
	}
	noCanary(t, b, "events")
	b.NoProblems("all pages")

	// Auto-refresh: it polls, the pause stops it, resume restarts it.
	b.Open("refresh_ms=200", "#/options")
	n := f.count("/v1/options")
	b.WaitFor("three refreshes", `Number(document.getElementById("app").dataset.renders) >= 4`)
	if f.count("/v1/options") < n+3 {
		t.Errorf("auto-refresh: %d requests, want at least %d", f.count("/v1/options"), n+3)
	}
	b.Click("#pause")
	b.WaitFor("the pause", `document.body.classList.contains("paused") && document.getElementById("app").dataset.state === "ready"`)
	n = f.count("/v1/options")
	time.Sleep(time.Second) // five refresh periods: none may come
	if m := f.count("/v1/options"); m != n {
		t.Errorf("paused, the console still asked %d times", m-n)
	}
	renders := consoletest.Eval[int](b, `Number(document.getElementById("app").dataset.renders)`)
	b.Click("#pause")
	b.WaitFor("a refresh after resume", `Number(document.getElementById("app").dataset.renders) > `+strconv.Itoa(renders))
	if f.count("/v1/options") <= n {
		t.Error("resumed, the console asked nothing")
	}
	b.NoProblems("auto-refresh")
}
