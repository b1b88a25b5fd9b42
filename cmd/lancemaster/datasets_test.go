package main

import (
	"reflect"
	"strings"
	"testing"
)

func TestDatasetsInspect(t *testing.T) {
	t.Parallel()
	f := &fakeMaster{}
	addr := serve(t, f)
	out := mustOK(t)(cli(t, addr, "datasets", "inspect", "lake.db.items"))
	for _, want := range []string{"dataset version 3", "vector", "fixed_size_list<float32>[4]", "vec_idx", "IVF_PQ", `{"metric":"l2"}`,
		"UUID", "93b84c52-b470-46bd-bde2-5cc7c768a4ff", "INDEXED", "2000", "UNINDEXED", "16", "SEGMENTS"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if got := f.onlyCall(t, "InspectDataset"); !reflect.DeepEqual(got, []string{"lake", "db", "items"}) {
		t.Errorf("request %v", got)
	}
	js := mustOK(t)(cli(t, addr, "-o", "json", "datasets", "inspect", "lake.db.items"))
	if !strings.Contains(js, `"dataset_version": 3`) || !strings.Contains(js, `"index_type": "IVF_PQ"`) {
		t.Errorf("json %s", js)
	}
}
