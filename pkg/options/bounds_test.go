package options_test

import (
	"strings"
	"testing"

	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/options"
)

// An external test package: pkg/options stays a leaf, and pinning against
// pkg/job can never form an import cycle.

// pkg/job names the options that bound index properties by their keys; they
// are this package's keys, and a property over its bound is refused naming
// the option set.
func TestPropertyBoundOptionsAreOptions(t *testing.T) {
	keys, opts := job.PropertyBounds()
	if len(keys) == 0 {
		t.Fatal("no bounded properties")
	}
	for i, opt := range opts {
		if _, ok := options.Lookup(opt); !ok {
			t.Errorf("property %s is bounded by %s, which is no option", keys[i], opt)
			continue
		}
		lim := job.Limits(options.Resolve(map[string]string{opt: "3"}).IndexLimits())
		if err := job.CheckPropertyBounds(`{"`+keys[i]+`":4}`, lim); err == nil || !strings.Contains(err.Error(), opt+" is now 3") {
			t.Errorf("%s=4 with %s=3: %v", keys[i], opt, err)
		}
	}
}

// ExecuteDeadlineSecondOf chooses the HNSW deadline for exactly the types
// pkg/job calls HNSW.
func TestExecuteDeadlineOfEveryIndexType(t *testing.T) {
	o := options.Resolve(map[string]string{options.OptExecuteDeadlineSecond: "100", options.OptHNSWExecuteDeadlineSecond: "900"})
	hnsw := 0
	for _, typ := range append(job.SupportedIndexTypes, "") { // "": a DROP
		want := int64(100)
		if job.IsHNSWIndex(typ) {
			want, hnsw = 900, hnsw+1
		}
		if got := o.ExecuteDeadlineSecondOf(typ); got != want {
			t.Errorf("%q: deadline %d; want %d", typ, got, want)
		}
	}
	if hnsw != 2 || !job.IsHNSWIndex(job.IndexIVFHNSWSQ) || !job.IsHNSWIndex(job.IndexIVFHNSWPQ) {
		t.Errorf("%d HNSW types; want IVF_HNSW_SQ and IVF_HNSW_PQ", hnsw)
	}
}
