package metrics

import (
	"testing"

	"github.com/lancemaster/lancemaster/pkg/version"
)

// Every registry (a master's, a backend's) exports lancemaster_build_info
// with this binary's version and revision.
func TestRegistryExportsBuildInfo(t *testing.T) {
	fams, err := NewRegistry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	i := version.Get()
	for _, f := range fams {
		if f.GetName() != "lancemaster_build_info" {
			continue
		}
		labels := map[string]string{}
		for _, l := range f.GetMetric()[0].GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if f.GetMetric()[0].GetGauge().GetValue() != 1 || labels["version"] != i.Version || labels["revision"] != i.Revision ||
			labels["wire_contract"] != i.WireContract {
			t.Fatalf("build_info = %v", f)
		}
		return
	}
	t.Fatal("no lancemaster_build_info")
}
