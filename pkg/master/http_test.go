package master_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/pkg/master"
	"github.com/lancemaster/lancemaster/pkg/master/masterkit"
	"github.com/lancemaster/lancemaster/pkg/master/mastertest"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/pkg/config"
	"github.com/lancemaster/lancemaster/pkg/dispatch"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/metrics"
	"github.com/lancemaster/lancemaster/pkg/metrics/metricstest"
	"github.com/lancemaster/lancemaster/pkg/options"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
	"github.com/lancemaster/lancemaster/pkg/report"
)

// withHTTP gives each master of a mastertest.Cluster an HTTP listener on a port the
// kernel picks at bind time (read it with m.HTTPAddr()).
func withHTTP(t *testing.T, more func(n *config.Node)) func(n *config.Node) {
	return func(n *config.Node) {
		n.HTTPBind = "127.0.0.1:0"
		if more != nil {
			more(n)
		}
	}
}

func scrape(t *testing.T, m *master.Master) (string, metricstest.Families) {
	t.Helper()
	return metricstest.Scrape(t, "http://"+m.HTTPAddr()+"/metrics")
}

func value(t *testing.T, f metricstest.Families, name string, labels ...string) float64 {
	t.Helper()
	v, ok := f.Value(name, labels...)
	if !ok {
		t.Fatalf("no series %s%v", name, labels)
	}
	return v
}

// Three masters over loopback, each serving /metrics: after admissions
// (through a follower, one refused), dispatches that finish and dispatches
// left RUNNING (admitted by the leader, without a read index), every
// master exports the same job counts and held slots,
// exactly one says it leads, the leader shows its rounds and dispatch
// outcomes, and nothing exported carries a storage credential or an
// invocation secret.
func TestMetricsOfACluster(t *testing.T) {
	secrets := t.TempDir()
	if err := os.WriteFile(filepath.Join(secrets, "lake-creds"),
		[]byte(`{"aws_secret_access_key":"`+storageCanary+`"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	c := mastertest.NewWith(t, withHTTP(t, func(n *config.Node) { n.SecretsDir = secrets }), func(int) master.Options {
		return master.Options{Knobs: &master.Knobs{HeartbeatInterval: 50 * time.Millisecond}, Credentials: config.DirCredentials{Dir: secrets}}
	})
	w := newWorker(c)
	l := c.Leader()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	root, creds := "/data/lake", "lake-creds"
	err := c.Client(l).Call(ctx, func(ctx context.Context, a *adminapi.LanceMasterServiceClient) error {
		if _, err := a.CreateCatalog(ctx, &adminapi.TCatalog{Name: "lake", RootURI: &root, CredentialsRef: &creds}, ""); err != nil {
			return err
		}
		_, err := a.AddBackend(ctx, c.Backend.Addr(), "")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	c.SetOptions(l, map[string]string{options.OptEnableLocalFileMutation: "true"})
	c.Backend.SetDataset("/data/lake/db/items.lance", job.Snapshot{Version: 3, Fields: []job.Field{{ID: 0, Name: "id", Type: "int32"}}})

	f := c.Follower()
	eventually(t, 10*time.Second, "the follower applies the setup", func() bool {
		_, ok := c.Masters[f].FSM().State().Catalog("lake")
		return ok && c.Masters[f].FSM().State().Options().EnableLocalFileMutation
	})
	done := c.AdmitIDs(f, "lake", "items", "d", 4)
	c.WaitSettled(l, done)
	// One admission refused: no such catalog.
	err = c.Client(f).Call(ctx, func(ctx context.Context, a *adminapi.LanceMasterServiceClient) error {
		_, err := a.CreateIndex(ctx, &adminapi.TCreateIndexRequest{Catalog: "nope", Db: "db", Table: "items",
			IndexName: "x", Column: "id", IndexType: "BTREE"})
		return err
	})
	if err == nil {
		t.Fatal("an admission into a missing catalog was accepted")
	}
	refused := errCode(t, err).String()
	// Three more whose reports never come: two RUNNING (max_inflight_per_backend
	// is 2), one PENDING behind them.
	w.setSuppress(true)
	// The leader journals them on its own view: no read index. The writes
	// before (the set-up, the follower's admissions and refusal) each took
	// one from it.
	_, fams := scrape(t, c.Masters[l])
	rounds := value(t, fams, "lancemaster_read_index_rounds_total")
	if rounds < 1 {
		t.Fatalf("the leader ran %v read index rounds for the writes before, want at least 1", rounds)
	}
	c.AdmitIDs(l, "lake", "items", "h", 3)
	if _, fams := scrape(t, c.Masters[l]); value(t, fams, "lancemaster_read_index_rounds_total") != rounds {
		t.Fatalf("admissions the leader journaled ran read index rounds: %v, then %v",
			rounds, value(t, fams, "lancemaster_read_index_rounds_total"))
	}
	eventually(t, 20*time.Second, "two slots held", func() bool { return c.Masters[l].FSM().State().HeldSlots(1) == 2 })

	want := map[string]float64{"PENDING": 1, "RUNNING": 2, "COMMITTED": 4, "NOT_COMMITTED": 0, "UNKNOWN": 0, "CANCELLED": 0, "OTHER": 0}
	eventually(t, 20*time.Second, "every master exports the same job counts and one leader", func() bool {
		leaders := 0.0
		for _, m := range c.Masters {
			_, fams := scrape(t, m)
			for s, n := range want {
				if v, _ := fams.Value("lancemaster_jobs_by_mutation_state", "mutation_state", s); v != n {
					return false
				}
			}
			if v, _ := fams.Value("lancemaster_backend_held_slots", "backend_id", "1", "address", c.Backend.Addr()); v != 2 {
				return false
			}
			leaders += value(t, fams, "lancemaster_is_leader")
		}
		return leaders == 1
	})

	var appliedResults float64
	for i, m := range c.Masters {
		text, fams := scrape(t, m)
		for _, secret := range []string{storageCanary, "aws_secret_access_key", "/data/lake/db"} {
			if strings.Contains(text, secret) {
				t.Fatalf("m%d's /metrics carries %q", i+1, secret)
			}
		}
		for _, r := range allJobs(m.FSM().State()) {
			if r.InvocationSecret != "" && strings.Contains(text, r.InvocationSecret) {
				t.Fatalf("m%d's /metrics carries job %d's invocation secret", i+1, r.JobID)
			}
		}
		isLeader := i == l
		if got := value(t, fams, "lancemaster_is_leader"); got != metrics.Bool(isLeader) {
			t.Errorf("m%d is_leader = %v", i+1, got)
		}
		if got := value(t, fams, "lancemaster_raft_state", "state", "Leader"); got != metrics.Bool(isLeader) {
			t.Errorf("m%d raft_state{Leader} = %v", i+1, got)
		}
		if value(t, fams, "lancemaster_leader_known") != 1 || value(t, fams, "lancemaster_raft_commit_index") < 10 ||
			value(t, fams, "lancemaster_fsm_applied_index") < 10 || value(t, fams, "lancemaster_raft_term") < 1 {
			t.Errorf("m%d: implausible raft gauges", i+1)
		}
		if got := value(t, fams, "lancemaster_raft_last_contact_seconds"); got < 0 || got > 5 {
			t.Errorf("m%d last contact %v s", i+1, got)
		}
		if value(t, fams, "lancemaster_jobs_by_refresh_state") != 7 || value(t, fams, "lancemaster_jobs_unknown") != 0 ||
			value(t, fams, "lancemaster_jobs_unknown_unresolved") != 0 ||
			value(t, fams, "lancemaster_max_inflight_per_backend") != 2 || value(t, fams, "lancemaster_backends") != 1 {
			t.Errorf("m%d: implausible job or backend gauges", i+1)
		}
		if len(fams.Series("lancemaster_reports_total")) != len(reasonNamesForTest()) {
			t.Errorf("m%d: reports_total has %d reasons", i+1, len(fams.Series("lancemaster_reports_total")))
		}
		appliedResults += value(t, fams, "lancemaster_reports_total", "reason", "applied_result")
		if _, ok := fams.Value("go_goroutines"); !ok {
			t.Errorf("m%d: no Go runtime metrics", i+1)
		}
		if isLeader {
			if value(t, fams, "lancemaster_leader_term") != value(t, fams, "lancemaster_raft_term") {
				t.Error("the leader's leader_term is not its raft term")
			}
			if got := value(t, fams, "lancemaster_dispatch_outcomes_total", "outcome", "accepted"); got < 6 {
				t.Errorf("accepted dispatches = %v, want >= 6", got)
			}
			if len(fams.Series("lancemaster_dispatch_outcomes_total")) != len(dispatch.Outcomes()) {
				t.Error("not every dispatch outcome is exported")
			}
			if value(t, fams, "lancemaster_dispatch_round_duration_seconds") < 1 {
				t.Error("no dispatch round observed")
			}
			if value(t, fams, "lancemaster_propose_duration_seconds", "command", "mark_running", "result", "ok") < 1 {
				t.Error("no timed mark_running proposal")
			}
			if value(t, fams, "lancemaster_backend_alive", "backend_id", "1") != 1 {
				t.Error("the leader does not see the backend alive")
			}
			if value(t, fams, "lancemaster_leader_services_running") < 1 {
				t.Error("no leader service running")
			}
		} else if value(t, fams, "lancemaster_leader_term") != 0 {
			t.Errorf("follower m%d has a leader term", i+1)
		}
		if i == f {
			if got := value(t, fams, "lancemaster_admin_requests_total", "method", "createIndex"); got != 5 {
				t.Errorf("createIndex requests on the follower = %v, want 5", got)
			}
			if got := value(t, fams, "lancemaster_admin_errors_total", "method", "createIndex", "code", refused); got != 1 {
				t.Errorf("createIndex %s errors = %v, want 1", refused, got)
			}
			if v, _ := fams.Value("lancemaster_admin_errors_total", "code", "INTERNAL"); v != 0 {
				t.Errorf("untyped admin errors: %v", v)
			}
			if value(t, fams, "lancemaster_propose_duration_seconds", "result", "ok") < 1 {
				t.Error("the follower's forwarded proposals were not timed")
			}
		}
		code, body := metricstest.Get(t, "http://"+m.HTTPAddr()+"/readyz?verbose")
		if code != 200 || !strings.Contains(body, "[+]leader ok") || !strings.Contains(body, "[+]fsm_caught_up ok") {
			t.Errorf("m%d readyz: %d\n%s", i+1, code, body)
		}
	}
	if appliedResults < 4 {
		t.Errorf("applied results over all masters = %v, want >= 4", appliedResults)
	}
}

func reasonNamesForTest() []string { return report.ReasonNames() }

func allJobs(st *raftfsm.State) []*job.Record {
	all, _ := st.ListJobs(raftfsm.JobFilter{}, 0, 0)
	return all
}

// A master alone (its two peers not started) knows no leader: /livez says
// alive, /readyz says not ready and why; once a second master starts and a
// leader is elected, /readyz passes.
func TestReadyzFollowsLeadership(t *testing.T) {
	c, err := masterkit.New(masterkit.Config{Dir: t.TempDir(), FirstID: 1, HTTP: true,
		Options: func(int) master.Options {
			return master.Options{Logger: zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel))}
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	start := func(i int) *master.Master {
		if err := c.StartMaster(i); err != nil {
			t.Fatal(err)
		}
		return c.Master(i)
	}
	m1 := start(0)
	base := "http://" + m1.HTTPAddr()
	if code, _ := metricstest.Get(t, base+"/livez"); code != 200 {
		t.Fatalf("livez %d", code)
	}
	code, body := metricstest.Get(t, base+"/readyz?verbose")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "[-]leader failed: no leader known") {
		t.Fatalf("a lone master is ready: %d\n%s", code, body)
	}
	if code, body := metricstest.Get(t, base+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "[-]leader") {
		t.Fatalf("readyz: %d %s", code, body)
	}
	_, fams := metricstest.Scrape(t, base+"/metrics")
	if value(t, fams, "lancemaster_leader_known") != 0 || value(t, fams, "lancemaster_is_leader") != 0 {
		t.Fatal("a lone master claims a leader")
	}

	start(1)
	eventually(t, 15*time.Second, "m1 ready", func() bool {
		code, _ := metricstest.Get(t, base+"/readyz")
		return code == 200
	})
	code, body = metricstest.Get(t, base+"/readyz?verbose")
	if code != 200 || !strings.Contains(body, "[+]leader ok: m") || !strings.Contains(body, "[+]fsm_caught_up ok: applied index") {
		t.Fatalf("readyz after election: %d\n%s", code, body)
	}
}
