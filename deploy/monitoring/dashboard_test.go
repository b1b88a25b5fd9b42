package monitoring

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
)

var (
	metricRef = regexp.MustCompile(`\blancemaster_[a-z0-9_]+`)
	// A documented metric: the first cell of a row of docs/metrics.md's tables.
	docRow = regexp.MustCompile("(?m)^\\| `(lancemaster_[a-z0-9_]+)` \\|")
)

// documentedMetrics are the metric names docs/metrics.md's tables list.
func documentedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, m := range docRow.FindAllStringSubmatch(string(b), -1) {
		names[m[1]] = true
	}
	if len(names) < 40 {
		t.Fatalf("only %d metrics found in docs/metrics.md: has its table format changed?", len(names))
	}
	return names
}

// checkMetrics fails for every lancemaster_ name in expr that is not
// documented (a histogram's _bucket, _sum and _count series count as its
// name) and returns the names it found.
func checkMetrics(t *testing.T, where, expr string, doc map[string]bool) []string {
	t.Helper()
	var found []string
	for _, name := range metricRef.FindAllString(expr, -1) {
		base := name
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if s, ok := strings.CutSuffix(name, suffix); ok && doc[s] {
				base = s
			}
		}
		if !doc[base] {
			t.Errorf("%s: %s is not a metric docs/metrics.md lists", where, name)
		}
		found = append(found, base)
	}
	return found
}

type dashboard struct {
	Title  string  `json:"title"`
	UID    string  `json:"uid"`
	Panels []panel `json:"panels"`
}

type panel struct {
	ID      int    `json:"id"`
	Type    string `json:"type"`
	Title   string `json:"title"`
	GridPos struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
}

// The Grafana dashboard parses, each panel has a query per target, every
// metric it queries is one docs/metrics.md documents, and it shows what an
// operator needs first.
func TestDashboard(t *testing.T) {
	b, err := os.ReadFile("dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}
	if d.Title == "" || d.UID == "" || len(d.Panels) == 0 {
		t.Fatalf("dashboard.json: title %q, uid %q, %d panels", d.Title, d.UID, len(d.Panels))
	}
	doc := documentedMetrics(t)
	used := map[string]bool{}
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d twice", p.ID)
		}
		ids[p.ID] = true
		if p.GridPos.W <= 0 || p.GridPos.H <= 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %q: gridPos %+v outside the 24-column grid", p.Title, p.GridPos)
		}
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			if tg.Expr == "" || tg.RefID == "" || refs[tg.RefID] {
				t.Errorf("panel %q: a target without an expr, or a missing or repeated refId %q", p.Title, tg.RefID)
			}
			refs[tg.RefID] = true
			for _, n := range checkMetrics(t, "dashboard.json panel "+p.Title, tg.Expr, doc) {
				used[n] = true
			}
		}
	}
	for _, want := range []string{
		"lancemaster_jobs_by_mutation_state", "lancemaster_jobs_unknown_unresolved", "lancemaster_dispatch_outcomes_total",
		"lancemaster_reports_total", "lancemaster_backend_reports_total", "lancemaster_propose_duration_seconds",
		"lancemaster_is_leader", "lancemaster_leader_known", "lancemaster_backend_held_slots", "lancemaster_backend_queued",
		"lancemaster_backend_oom_kills_total", "lancemaster_tls_certificate_expiry_timestamp_seconds",
	} {
		if !used[want] {
			t.Errorf("dashboard.json shows no %s", want)
		}
	}
}

// The rules query documented metrics only, and docs/metrics.md points to
// the rules file instead of carrying a copy that could drift.
func TestAlertRulesUseDocumentedMetrics(t *testing.T) {
	doc := documentedMetrics(t)
	for name, r := range loadRules(t) {
		checkMetrics(t, "alerts.yml "+name, r.Expr, doc)
	}
	b, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	if s := string(b); !strings.Contains(s, "deploy/monitoring/alerts.yml") || strings.Contains(s, "- alert: ") {
		t.Error("docs/metrics.md must point to deploy/monitoring/alerts.yml and carry no copy of the rules")
	}
}
