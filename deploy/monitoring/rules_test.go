package monitoring

import (
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []rule `yaml:"rules"`
	} `yaml:"groups"`
}

type rule struct {
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

type testFile struct {
	RuleFiles          []string `yaml:"rule_files"`
	EvaluationInterval string   `yaml:"evaluation_interval"`
	Tests              []struct {
		Interval    string `yaml:"interval"`
		InputSeries []struct {
			Series string `yaml:"series"`
			Values string `yaml:"values"`
		} `yaml:"input_series"`
		AlertRuleTest []struct {
			EvalTime  string `yaml:"eval_time"`
			Alertname string `yaml:"alertname"`
			ExpAlerts []struct {
				ExpLabels map[string]string `yaml:"exp_labels"`
			} `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

func decodeStrict(t *testing.T, path string, v any) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := yaml.NewDecoder(f)
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func mustDuration(t *testing.T, s string) time.Duration {
	t.Helper()
	if s == "" {
		return 0
	}
	d, err := parseDuration(s)
	if err != nil {
		t.Fatalf("duration %q: %v", s, err)
	}
	return d
}

var valueTerm = regexp.MustCompile(`^(-?[0-9.e+]+?)(?:([+-])([0-9.e]+))?x([0-9]+)$`)

// expandValues reads promtool's expanding notation: 'a', 'axn' and
// 'a+bxn' / 'a-bxn' (n+1 samples), '_' (no sample) and '_xn' (n of them).
// Missing samples are returned as nil.
func expandValues(s string) ([]*float64, error) {
	var out []*float64
	for _, term := range strings.Fields(s) {
		if term == "_" {
			out = append(out, nil)
			continue
		}
		if n, ok := strings.CutPrefix(term, "_x"); ok {
			k, err := strconv.Atoi(n)
			if err != nil {
				return nil, fmt.Errorf("term %q: %v", term, err)
			}
			out = append(out, make([]*float64, k)...)
			continue
		}
		if v, err := strconv.ParseFloat(term, 64); err == nil {
			out = append(out, &v)
			continue
		}
		m := valueTerm.FindStringSubmatch(term)
		if m == nil {
			return nil, fmt.Errorf("term %q: not a, axn, a+bxn or _", term)
		}
		start, err1 := strconv.ParseFloat(m[1], 64)
		n, err2 := strconv.Atoi(m[4])
		step := 0.0
		var err3 error
		if m[3] != "" {
			step, err3 = strconv.ParseFloat(m[3], 64)
			if m[2] == "-" {
				step = -step
			}
		}
		if err1 != nil || err2 != nil || err3 != nil {
			return nil, fmt.Errorf("term %q: bad number", term)
		}
		for i := 0; i <= n; i++ {
			v := start + float64(i)*step
			out = append(out, &v)
		}
	}
	return out, nil
}

// parseSeries reads 'name{a="b",...}' into a label set with __name__.
func parseSeries(s string) (map[string]string, error) {
	n, err := parseExpr(s)
	if err != nil {
		return nil, err
	}
	sel, ok := n.(*selector)
	if !ok || sel.rng != 0 {
		return nil, fmt.Errorf("series %q is not a plain selector", s)
	}
	ls := map[string]string{}
	for _, m := range sel.matchers {
		if m.neq {
			return nil, fmt.Errorf("series %q: != in a series", s)
		}
		ls[m.name] = m.val
	}
	return ls, nil
}

func labelString(ls map[string]string) string {
	var parts []string
	for k, v := range ls {
		parts = append(parts, k+"="+strconv.Quote(v))
	}
	sort.Strings(parts)
	return "{" + strings.Join(parts, ",") + "}"
}

// firing evaluates r at every evaluation step from 0 to at and returns
// the label sets of its alerts that are firing at at (active for at least
// its for duration), as Prometheus's rule manager would: an alert's labels
// are its sample's (without __name__), then the rule's labels and
// alertname.
func firing(t *testing.T, r rule, expr node, db []series, step, at time.Duration) []string {
	t.Helper()
	hold := mustDuration(t, r.For)
	activeSince := map[string]time.Duration{}
	for ts := time.Duration(0); ts <= at; ts += step {
		v := eval(expr, db, ts)
		if v.scalar {
			t.Fatalf("%s: the expression is a scalar", r.Alert)
		}
		now := map[string]bool{}
		for _, s := range v.vec {
			ls := dropName(s.labels)
			for k, val := range r.Labels {
				ls[k] = val
			}
			ls["alertname"] = r.Alert
			k := labelString(ls)
			if now[k] {
				t.Fatalf("%s at %v: two samples with the labels %s", r.Alert, ts, k)
			}
			now[k] = true
			if _, ok := activeSince[k]; !ok {
				activeSince[k] = ts
			}
		}
		for k := range activeSince {
			if !now[k] {
				delete(activeSince, k) // resolved: a later match starts pending again
			}
		}
	}
	var out []string
	for k, since := range activeSince {
		if at-since >= hold {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func loadRules(t *testing.T) map[string]rule {
	t.Helper()
	var rf ruleFile
	decodeStrict(t, "alerts.yml", &rf)
	rules := map[string]rule{}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || r.Expr == "" || r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
				t.Fatalf("rule %+v: alert, expr, labels.severity and annotations.summary are required", r)
			}
			if _, dup := rules[r.Alert]; dup {
				t.Fatalf("two rules named %s", r.Alert)
			}
			rules[r.Alert] = r
		}
	}
	return rules
}

// Every rule of alerts.yml is evaluated on the recorded series of
// alerts_test.yml, and each has at least one case where it fires and one
// where it does not.
func TestAlertRules(t *testing.T) {
	rules := loadRules(t)
	var tf testFile
	decodeStrict(t, "alerts_test.yml", &tf)
	if len(tf.RuleFiles) != 1 || tf.RuleFiles[0] != "alerts.yml" {
		t.Fatalf("rule_files = %v, want [alerts.yml]", tf.RuleFiles)
	}
	step := mustDuration(t, tf.EvaluationInterval)
	fires, quiet := map[string]bool{}, map[string]bool{}
	for i, tc := range tf.Tests {
		interval := mustDuration(t, tc.Interval)
		var db []series
		for _, in := range tc.InputSeries {
			ls, err := parseSeries(in.Series)
			if err != nil {
				t.Fatalf("test %d: %v", i, err)
			}
			vals, err := expandValues(in.Values)
			if err != nil {
				t.Fatalf("test %d: %s: %v", i, in.Series, err)
			}
			se := series{labels: ls}
			for j, v := range vals {
				if v != nil {
					se.points = append(se.points, point{time.Duration(j) * interval, *v})
				}
			}
			db = append(db, se)
		}
		for _, at := range tc.AlertRuleTest {
			r, ok := rules[at.Alertname]
			if !ok {
				t.Fatalf("test %d: no rule %s in alerts.yml", i, at.Alertname)
			}
			expr, err := parseExpr(r.Expr)
			if err != nil {
				t.Fatalf("%s: %v", r.Alert, err)
			}
			var want []string
			for _, e := range at.ExpAlerts {
				ls := map[string]string{"alertname": r.Alert}
				for k, v := range e.ExpLabels {
					ls[k] = v
				}
				want = append(want, labelString(ls))
			}
			sort.Strings(want)
			got := firing(t, r, expr, db, step, mustDuration(t, at.EvalTime))
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("test %d: %s at %s: firing %v, want %v", i, r.Alert, at.EvalTime, got, want)
			}
			if len(want) > 0 {
				fires[r.Alert] = true
			} else {
				quiet[r.Alert] = true
			}
		}
	}
	for name := range rules {
		if !fires[name] || !quiet[name] {
			t.Errorf("%s: alerts_test.yml needs a case where it fires and one where it does not (fires %v, quiet %v)",
				name, fires[name], quiet[name])
		}
	}
}
