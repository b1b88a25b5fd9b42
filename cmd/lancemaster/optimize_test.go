package main

import (
	"reflect"
	"strings"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/gen-go/wire"
)

func TestJobsOptimizeSendsTheDataset(t *testing.T) {
	t.Parallel()
	f := &fakeMaster{admit: &adminapi.TAdmitResponse{JobID: thrift.Int64Ptr(11)}}
	addr := serve(t, f)
	if out := mustOK(t)(cli(t, addr, "--as", "bob", "jobs", "optimize", "lake.sales.items")); out != "job 11 admitted\n" {
		t.Errorf("stdout = %q", out)
	}
	got := f.onlyCall(t, "OptimizeDataset").(*adminapi.TOptimizeRequest)
	want := &adminapi.TOptimizeRequest{Catalog: "lake", Db: "sales", Table: "items", Creator: thrift.StringPtr("bob")}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("request = %s\nwant      %s", got, want)
	}
	for _, args := range [][]string{{"jobs", "optimize"}, {"jobs", "optimize", "lake.items"}, {"jobs", "optimize", "a.b.c", "extra"}} {
		if _, _, code := cli(t, addr, args...); code == 0 {
			t.Errorf("%v: exit 0", args)
		}
	}
	if n := len(f.recordedCalls()); n != 1 {
		t.Errorf("%d calls after usage errors", n)
	}
}

func optimizeView() *adminapi.TJobView {
	return &adminapi.TJobView{JobID: 5, Catalog: thrift.StringPtr("lake"), Db: thrift.StringPtr("sales"), Table: thrift.StringPtr("items"),
		MutationType: thrift.StringPtr("OPTIMIZE"), MutationState: thrift.StringPtr("COMMITTED"), RefreshState: thrift.StringPtr("REQUIRED"),
		ResultDatasetVersion: thrift.Int64Ptr(12),
		OptimizedIndexes: []*wire.TOptimizedIndex{{Name: "emb_idx",
			Before: &wire.TIndexCounts{IndexUUID: thrift.StringPtr("u-1"), IndexedRows: thrift.Int64Ptr(90), UnindexedRows: thrift.Int64Ptr(10), Segments: thrift.Int32Ptr(3)},
			After:  &wire.TIndexCounts{IndexUUID: thrift.StringPtr("u-2"), IndexedRows: thrift.Int64Ptr(100), UnindexedRows: thrift.Int64Ptr(0), Segments: thrift.Int32Ptr(1)}},
			{Name: "gone", Before: &wire.TIndexCounts{IndexedRows: thrift.Int64Ptr(4)}}}}
}

func TestJobsListShowsOptimizeWithoutAnIndex(t *testing.T) {
	t.Parallel()
	f := &fakeMaster{pages: map[int64]*adminapi.TListJobsResponse{0: {Jobs: []*adminapi.TJobView{optimizeView()}}}}
	addr := serve(t, f)
	out := mustOK(t)(cli(t, addr, "jobs", "list"))
	want := "" +
		"ID  CATALOG  DB.TABLE     INDEX  TYPE  MUTATION  STATE      REFRESH   BACKEND  AGE  UPDATED\n" +
		"5   lake     sales.items  -      -     OPTIMIZE  COMMITTED  REQUIRED  -        -    -\n"
	if out != want {
		t.Errorf("stdout =\n%s\nwant\n%s", out, want)
	}
}

func TestJobsShowPrintsOptimizeBeforeAndAfter(t *testing.T) {
	t.Parallel()
	addr := serve(t, &fakeMaster{job: optimizeView()})
	out := mustOK(t)(cli(t, addr, "jobs", "show", "5"))
	for _, line := range []string{
		"optimized_index emb_idx: indexed=90 unindexed=10 segments=3 uuid=u-1 → indexed=100 unindexed=0 segments=1 uuid=u-2\n",
		"optimized_index gone:    indexed=4 unindexed=0 segments=0 → -\n",
		"result_dataset_version:  12\n",
		"mutation_type:           OPTIMIZE\n",
	} {
		if !strings.Contains(out, line) {
			t.Errorf("stdout lacks %q:\n%s", line, out)
		}
	}
	if strings.Contains(out, "0x") || strings.Contains(out, "index_name") {
		t.Errorf("stdout prints a pointer or an index name:\n%s", out)
	}
}
