package master_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/pkg/master"
	"github.com/lancemaster/lancemaster/pkg/master/mastertest"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/config"
	"github.com/lancemaster/lancemaster/pkg/console"
	"github.com/lancemaster/lancemaster/pkg/console/consoletest"
	"github.com/lancemaster/lancemaster/pkg/options"
)

// consoleRig is a three-master cluster serving the console, with jobs
// COMMITTED, NOT_COMMITTED, UNKNOWN, CANCELLED and PENDING, and a storage
// credential canary in its catalog's credentials file.
type consoleRig struct {
	c    *mastertest.Cluster
	via  int // the follower the browser and the admin client ask
	ids  map[string][]int64
	base string
}

func newConsoleRig(t *testing.T) *consoleRig {
	secrets := t.TempDir()
	if err := os.WriteFile(filepath.Join(secrets, "lake-creds"),
		[]byte(`{"aws_access_key_id":"AKIA-canary","aws_secret_access_key":"`+storageCanary+`"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	// The default raft timeouts: on a loaded machine the fast ones can lose
	// a leader in the middle of the setup.
	c := mastertest.NewWith(t, withHTTP(t, func(n *config.Node) { n.SecretsDir, n.Timeouts = secrets, config.RaftProfileDefault }), func(int) master.Options {
		return master.Options{Console: console.Handler(), Knobs: &master.Knobs{HeartbeatInterval: 50 * time.Millisecond}, Credentials: config.DirCredentials{Dir: secrets}}
	})
	w := newWorker(c)
	w.mu.Lock()
	// A backend that failed to redact: its log tails carry the credential
	// (the masters must keep it out of every answer, and so of every page).
	w.logTail = "building btree on id\nopening s3 with aws_secret_access_key=" + storageCanary + "\nwrote 3 files\n"
	w.code = func(d *wire.TLanceIndexJobDispatch) wire.TLanceIndexJobResultCode {
		switch {
		case strings.HasPrefix(d.GetIndexName(), "nc"):
			return wire.TLanceIndexJobResultCode_NATIVE_COMMIT_CONFLICT // NOT_COMMITTED
		case strings.HasPrefix(d.GetIndexName(), "unk"):
			return wire.TLanceIndexJobResultCode_NATIVE_IO // UNKNOWN
		}
		return wire.TLanceIndexJobResultCode_NATIVE_OK
	}
	w.mu.Unlock()
	l := c.Leader()
	c.Setup(l)
	c.SetOptions(l, map[string]string{options.OptEnableLocalFileMutation: "true"})
	creds := "lake-creds"
	r := &consoleRig{c: c, ids: map[string][]int64{}}
	r.admin(l, func(ctx context.Context, a *adminapi.LanceMasterServiceClient) error {
		_, err := a.UpdateCatalog(ctx, &adminapi.TUpdateCatalogRequest{Name: "lake", CredentialsRef: &creds})
		return err
	})
	for _, p := range []string{"ok", "nc", "unk"} {
		r.ids[p] = c.AdmitIDs(l, "lake", "items", p, 2)
	}
	want := map[string]string{"ok": "COMMITTED", "nc": "NOT_COMMITTED", "unk": "UNKNOWN"}
	r.waitStates(want)
	// Then, with the dispatcher paused, two that stay PENDING; one is cancelled.
	c.SetOptions(l, map[string]string{options.OptDispatcherPaused: "true"})
	r.ids["pend"] = c.AdmitIDs(l, "lake", "items", "pend", 2)
	r.ids["cancel"] = r.ids["pend"][1:]
	r.ids["pend"] = r.ids["pend"][:1]
	r.admin(l, func(ctx context.Context, a *adminapi.LanceMasterServiceClient) error {
		_, err := a.CancelJob(ctx, &adminapi.TCancelRequest{JobID: r.ids["cancel"][0]})
		return err
	})
	want["pend"], want["cancel"] = "PENDING", "CANCELLED"
	r.waitStates(want)
	r.via = c.Follower()
	r.base = "http://" + c.Masters[r.via].HTTPAddr()
	return r
}

func (r *consoleRig) admin(via int, fn func(context.Context, *adminapi.LanceMasterServiceClient) error) {
	r.c.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.c.Client(via).Call(ctx, fn); err != nil {
		r.c.T.Fatal(err)
	}
}

// waitStates waits until every master has each group of jobs in its state
// with nothing left to refresh, except the UNKNOWN and PENDING ones, which
// stay unresolved.
func (r *consoleRig) waitStates(want map[string]string) {
	r.c.T.Helper()
	for i := range r.c.Masters {
		eventually(r.c.T, 30*time.Second, fmt.Sprintf("m%d has every job in its state", i+1), func() bool {
			st := r.c.LiveMasters()[i].FSM().State()
			for group, state := range want {
				for _, id := range r.ids[group] {
					rec, ok := st.Job(id)
					if !ok || rec.MutationState.String() != state || (state != "UNKNOWN" && state != "PENDING" && rec.Unresolved()) {
						return false
					}
				}
			}
			return true
		})
	}
}

// listed is what `lancemaster -o json jobs list --all` prints: the admin
// API's job views, in its order, as JSON objects.
type listed struct {
	order []int64
	jobs  map[int64]map[string]any
}

func (r *consoleRig) jobsList(req *adminapi.TListJobsRequest) listed {
	r.c.T.Helper()
	req.OldestFirst = ptr(false) // newest first, as jobs list asks
	out := listed{jobs: map[int64]map[string]any{}}
	r.admin(r.via, func(ctx context.Context, a *adminapi.LanceMasterServiceClient) error {
		resp, err := a.ListJobs(ctx, req)
		if err != nil {
			return err
		}
		if resp.IsSetNextAfterJobID() || resp.IsSetNextBeforeJobID() {
			r.c.T.Fatalf("more than one page of jobs: %d", len(resp.Jobs))
		}
		for _, j := range resp.Jobs {
			b, _ := json.Marshal(j)
			m := map[string]any{}
			if err := json.Unmarshal(b, &m); err != nil {
				return err
			}
			out.order = append(out.order, j.JobID)
			out.jobs[j.JobID] = m
		}
		return nil
	})
	return out
}

// get answers a /v1 path of the rig's master as raw JSON.
func (r *consoleRig) get(path string) string {
	r.c.T.Helper()
	cl := &http.Client{Timeout: 10 * time.Second}
	resp, err := cl.Get(r.base + path)
	if err != nil {
		r.c.T.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		r.c.T.Fatalf("GET %s: %d %v %s", path, resp.StatusCode, err, b)
	}
	return string(b)
}

func str(m map[string]any, k string) string {
	if v, ok := m[k]; ok {
		return fmt.Sprint(v)
	}
	return ""
}

// checkConsoleRows compares the jobs page's rows with the admin API's views.
func checkConsoleRows(t *testing.T, rows []consoletest.JobRow, want listed) {
	t.Helper()
	var got []int64
	for _, row := range rows {
		got = append(got, row.ID)
	}
	if !slices.Equal(got, want.order) {
		t.Fatalf("the page shows jobs %v; jobs list says %v", got, want.order)
	}
	for _, row := range rows {
		j := want.jobs[row.ID]
		backend := str(j, "backend_id")
		if backend == "" {
			backend = "—"
		}
		for col, w := range map[string]string{"target": str(j, "catalog") + "." + str(j, "db") + "." + str(j, "table"),
			"index": str(j, "index_name"), "mutation": str(j, "mutation_type"), "type": str(j, "index_type"),
			"refresh": str(j, "refresh_state"), "backend": backend, "creator": str(j, "creator")} {
			if row.Cols[col] != w {
				t.Errorf("job %d: %s shows %q, jobs list says %q", row.ID, col, row.Cols[col], w)
			}
		}
		if row.State != str(j, "mutation_state") || row.Unresolved != (j["unresolved"] == true) {
			t.Errorf("job %d: state %s unresolved %v; jobs list says %s %v", row.ID, row.State, row.Unresolved, str(j, "mutation_state"), j["unresolved"])
		}
	}
}

// The console served by a real follower of a three-master cluster, in
// headless chromium: the jobs page equals jobs list (all of it and
// filtered), a job's timeline is its journal's in order, and neither the
// storage credential canary, nor an invocation secret, nor a dataset
// locator is in any page or API answer.
func TestConsoleAgainstRealCluster(t *testing.T) {
	consoletest.Chromium(t) // skip (or fail under CI) before a cluster starts
	r := newConsoleRig(t)
	b := consoletest.New(t, r.base)

	start := time.Now()
	b.Open("", "#/jobs")
	took := time.Since(start)
	t.Logf("figure: console jobs page (%d jobs) loaded and rendered in %v", len(r.jobsList(&adminapi.TListJobsRequest{}).order), took.Round(time.Millisecond))
	checkConsoleRows(t, b.JobRows(), r.jobsList(&adminapi.TListJobsRequest{}))
	b.Screenshot("e2e-console-jobs")

	b.Click(`input[data-state="UNKNOWN"]`)
	b.WaitRendered("#/jobs?state=UNKNOWN")
	checkConsoleRows(t, b.JobRows(), r.jobsList(&adminapi.TListJobsRequest{State: ptr("UNKNOWN")}))
	b.Click(`input[data-state="PENDING"]`)
	b.WaitRendered("#/jobs?state=PENDING%2CUNKNOWN")
	checkConsoleRows(t, b.JobRows(), r.jobsList(&adminapi.TListJobsRequest{State: ptr("PENDING,UNKNOWN")}))
	if got := len(b.JobRows()); got != len(r.ids["unk"])+len(r.ids["pend"]) {
		t.Errorf("PENDING,UNKNOWN shows %d rows, want %d", got, len(r.ids["unk"])+len(r.ids["pend"]))
	}
	b.Go("#/jobs?unresolved=true")
	unresolved := r.jobsList(&adminapi.TListJobsRequest{Unresolved: ptr(true)})
	checkConsoleRows(t, b.JobRows(), unresolved)
	for _, id := range append(slices.Clone(r.ids["ok"]), r.ids["cancel"]...) {
		if _, ok := unresolved.jobs[id]; ok {
			t.Errorf("job %d is resolved but listed as unresolved", id)
		}
	}

	// A COMMITTED job's timeline: the API's, in journal order, from
	// admission through the report.
	id := r.ids["ok"][0]
	b.Go("#/jobs/" + strconv.FormatInt(id, 10))
	var ans struct {
		Timeline []struct {
			Kind  string `json:"kind"`
			Index int64  `json:"index"`
		} `json:"timeline"`
	}
	if err := json.Unmarshal([]byte(r.get("/v1/jobs/"+strconv.FormatInt(id, 10))), &ans); err != nil {
		t.Fatal(err)
	}
	tl := b.Timeline()
	var kinds []string
	for i, e := range tl {
		kinds = append(kinds, e.Kind)
		if i >= len(ans.Timeline) || e.Kind != ans.Timeline[i].Kind || e.Index != ans.Timeline[i].Index {
			t.Errorf("timeline step %d %+v; the API says %+v", i, e, ans.Timeline)
		}
		if e.Index <= 0 {
			t.Errorf("timeline step %d %+v has no journal index", i, e)
		}
		if i > 0 && e.Index < tl[i-1].Index {
			t.Errorf("timeline out of journal order at step %d: %+v", i, tl)
		}
	}
	if len(tl) != len(ans.Timeline) {
		t.Errorf("timeline has %d steps, the API %d", len(tl), len(ans.Timeline))
	}
	for _, k := range []string{"ADMITTED", "DISPATCHED", "REPORTED"} {
		if !slices.Contains(kinds, k) {
			t.Errorf("timeline %v lacks %s", kinds, k)
		}
	}
	if slices.Index(kinds, "ADMITTED") != 0 || slices.Index(kinds, "DISPATCHED") > slices.Index(kinds, "REPORTED") {
		t.Errorf("timeline %v is not in the order of the job's life", kinds)
	}
	if got := consoletest.Eval[string](b, `(document.getElementById("log-tail") || {}).textContent || ""`); !strings.Contains(got, "wrote 3 files") || !strings.Contains(got, "[redacted]") {
		t.Errorf("the job page's log tail is %q; the report carried one, with a credential to redact", got)
	}
	b.Screenshot("e2e-console-job")

	// No secret anywhere: not in a page, not in an API answer.
	var secrets []string
	for _, d := range r.c.Backend.Dispatches() {
		if s := d.GetInvocationSecret(); s != "" {
			secrets = append(secrets, s)
		}
	}
	if len(secrets) < 6 {
		t.Fatalf("only %d invocation secrets seen by the backend", len(secrets))
	}
	forbidden := append([]string{storageCanary, "/data/lake/db/items.lance"}, secrets...)
	check := func(where, text string) {
		for _, s := range forbidden {
			if strings.Contains(text, s) {
				t.Errorf("%s carries %q", where, s)
			}
		}
	}
	pages := map[string]string{}
	for p, name := range map[string]string{"#/jobs": "", "#/jobs/" + strconv.FormatInt(r.ids["unk"][0], 10): "job-unknown",
		"#/backends": "backends", "#/cluster": "cluster", "#/options": "options", "#/events": "events"} {
		b.Go(p)
		pages[p] = b.Everything()
		check("page "+p, pages[p])
		if name != "" {
			b.Screenshot("e2e-console-" + name)
		}
	}
	if !strings.Contains(pages["#/backends"], r.c.Backend.Addr()) || !strings.Contains(pages["#/cluster"], "m1") ||
		!strings.Contains(pages["#/events"], "catalog.update") {
		t.Error("the backends, cluster or events page does not show the cluster (the scan would prove nothing)")
	}
	paths := []string{"/v1/jobs", "/v1/events", "/v1/catalogs", "/v1/backends", "/v1/backends/1", "/v1/options", "/v1/members", "/v1/health"}
	for _, ids := range r.ids {
		for _, id := range ids {
			paths = append(paths, "/v1/jobs/"+strconv.FormatInt(id, 10), "/v1/jobs/"+strconv.FormatInt(id, 10)+"/logs")
		}
	}
	for _, p := range paths {
		check("GET "+p, r.get(p))
	}
	if !strings.Contains(r.get("/v1/catalogs"), "lake-creds") {
		t.Error("/v1/catalogs does not name the credentials file (the scan would prove nothing)")
	}
	b.NoProblems("the console against a real cluster")
}

func ptr[T any](v T) *T { return &v }
