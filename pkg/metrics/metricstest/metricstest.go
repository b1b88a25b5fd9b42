// Package metricstest reads a Prometheus text exposition in tests: scrape a
// /metrics endpoint over HTTP and look series up by name and labels.
package metricstest

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// maxScrape bounds what Scrape reads.
const maxScrape = 16 << 20

// Families are parsed metric families by name.
type Families map[string]*dto.MetricFamily

// Get GETs url and returns the status code and body.
func Get(t testing.TB, url string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxScrape))
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode, string(b)
}

// Scrape GETs a /metrics url, fails the test unless it answers 200 with a
// parsable text exposition, and returns the raw text and the families.
func Scrape(t testing.TB, url string) (string, Families) {
	t.Helper()
	code, body := Get(t, url)
	if code != http.StatusOK {
		t.Fatalf("GET %s: status %d: %s", url, code, body)
	}
	return body, Parse(t, body)
}

// Parse parses a text exposition.
func Parse(t testing.TB, text string) Families {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("unparsable exposition: %v", err)
	}
	return fams
}

// Value sums the series of name whose labels include every given pair
// (labels: name, value, name, value, ...): a gauge's or counter's value, a
// histogram's sample count. ok is false when no series matched.
func (f Families) Value(name string, labels ...string) (v float64, ok bool) {
	fam := f[name]
	if fam == nil {
		return 0, false
	}
	for _, m := range fam.GetMetric() {
		if !hasLabels(m, labels) {
			continue
		}
		ok = true
		switch {
		case m.Gauge != nil:
			v += m.GetGauge().GetValue()
		case m.Counter != nil:
			v += m.GetCounter().GetValue()
		case m.Histogram != nil:
			v += float64(m.GetHistogram().GetSampleCount())
		case m.Untyped != nil:
			v += m.GetUntyped().GetValue()
		}
	}
	return v, ok
}

// Series returns the label sets of name's series, each as a map.
func (f Families) Series(name string) []map[string]string {
	var out []map[string]string
	if fam := f[name]; fam != nil {
		for _, m := range fam.GetMetric() {
			ls := map[string]string{}
			for _, l := range m.GetLabel() {
				ls[l.GetName()] = l.GetValue()
			}
			out = append(out, ls)
		}
	}
	return out
}

func hasLabels(m *dto.Metric, pairs []string) bool {
	for i := 0; i+1 < len(pairs); i += 2 {
		found := false
		for _, l := range m.GetLabel() {
			if l.GetName() == pairs[i] && l.GetValue() == pairs[i+1] {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}
