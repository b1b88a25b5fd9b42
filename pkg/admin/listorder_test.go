package admin

import (
	"context"
	"slices"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
)

// listIDs lists with r and returns the ids and both cursors.
func listIDs(t *testing.T, h *harness, r *adminapi.TListJobsRequest) (ids []int64, after, before *int64) {
	t.Helper()
	resp, err := h.srv.ListJobs(context.Background(), r)
	if err != nil {
		t.Fatalf("list %+v: %v", r, err)
	}
	for _, j := range resp.Jobs {
		ids = append(ids, j.JobID)
	}
	return ids, resp.NextAfterJobID, resp.NextBeforeJobID
}

func admitFour(t *testing.T, h *harness) {
	t.Helper()
	ctx := context.Background()
	for _, name := range []string{"a", "b", "c"} {
		if _, err := h.srv.CreateIndex(ctx, createReq("items", name, "vector", "IVF_PQ")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.srv.DropIndex(ctx, &adminapi.TDropIndexRequest{Catalog: "lake", Db: "db", Table: "items", IndexName: "id_idx"}); err != nil {
		t.Fatal(err)
	}
}

// Newest first with oldest_first false, paged with before_job_id; oldest
// first with oldest_first true, paged with after_job_id; and an older client,
// which never sets oldest_first, gets the id order and the paging it always
// had, first page included.
func TestListJobsOrderAndCursors(t *testing.T) {
	h := newHarness(t)
	admitFour(t, h)
	two := int32(2)
	newest := thrift.BoolPtr(false)
	ids, after, before := listIDs(t, h, &adminapi.TListJobsRequest{Limit: &two, OldestFirst: newest})
	if !slices.Equal(ids, []int64{4, 3}) || after != nil || before == nil || *before != 3 {
		t.Fatalf("newest first: %v after %v before %v, want [4 3] and next_before_job_id 3", ids, after, before)
	}
	ids, after, before = listIDs(t, h, &adminapi.TListJobsRequest{Limit: &two, OldestFirst: newest, BeforeJobID: before})
	if !slices.Equal(ids, []int64{2, 1}) || after != nil || before != nil {
		t.Fatalf("second page: %v after %v before %v, want [2 1] and no cursor", ids, after, before)
	}
	ids, after, _ = listIDs(t, h, &adminapi.TListJobsRequest{Limit: &two, OldestFirst: thrift.BoolPtr(true)})
	if !slices.Equal(ids, []int64{1, 2}) || after == nil || *after != 2 {
		t.Fatalf("oldest first: %v after %v, want [1 2] and next_after_job_id 2", ids, after)
	}
	// What an older CLI sends for its first page: nothing about the order.
	ids, after, before = listIDs(t, h, &adminapi.TListJobsRequest{Limit: &two})
	if !slices.Equal(ids, []int64{1, 2}) || after == nil || *after != 2 || before != nil {
		t.Fatalf("an older client's first page: %v after %v before %v, want [1 2] and next_after_job_id 2", ids, after, before)
	}
	// And for its second page: after_job_id only.
	ids, after, before = listIDs(t, h, &adminapi.TListJobsRequest{Limit: &two, AfterJobID: thrift.Int64Ptr(2)})
	if !slices.Equal(ids, []int64{3, 4}) || after != nil || before != nil {
		t.Fatalf("after_job_id alone: %v after %v before %v, want [3 4], last page", ids, after, before)
	}
	ids, _, _ = listIDs(t, h, &adminapi.TListJobsRequest{AfterJobID: thrift.Int64Ptr(0)})
	if !slices.Equal(ids, []int64{1, 2, 3, 4}) {
		t.Fatalf("after_job_id 0 alone: %v, want id order", ids)
	}
}

func TestListJobsTypeAndSinceFilters(t *testing.T) {
	h := newHarness(t)
	admitFour(t, h)
	now := h.srv.nowMs()
	newest := thrift.BoolPtr(false)
	for _, c := range []struct {
		req  *adminapi.TListJobsRequest
		want []int64
	}{
		{&adminapi.TListJobsRequest{OldestFirst: newest, MutationType: thrift.StringPtr("drop")}, []int64{4}},
		{&adminapi.TListJobsRequest{OldestFirst: newest, MutationType: thrift.StringPtr("CREATE")}, []int64{3, 2, 1}},
		{&adminapi.TListJobsRequest{OldestFirst: newest, MutationType: thrift.StringPtr("CREATE_OR_REPLACE")}, nil},
		{&adminapi.TListJobsRequest{OldestFirst: newest, IndexType: thrift.StringPtr("ivf_pq")}, []int64{3, 2, 1}},
		{&adminapi.TListJobsRequest{OldestFirst: newest, IndexType: thrift.StringPtr("BTREE")}, nil},
		{&adminapi.TListJobsRequest{OldestFirst: newest, SinceMs: thrift.Int64Ptr(now)}, []int64{4, 3, 2, 1}},
		{&adminapi.TListJobsRequest{OldestFirst: newest, SinceMs: thrift.Int64Ptr(now + 1)}, nil},
		{&adminapi.TListJobsRequest{SinceMs: thrift.Int64Ptr(now), IndexType: thrift.StringPtr("IVF_PQ"),
			OldestFirst: thrift.BoolPtr(true), AfterJobID: thrift.Int64Ptr(1)}, []int64{2, 3}},
	} {
		if ids, _, _ := listIDs(t, h, c.req); !slices.Equal(ids, c.want) {
			t.Errorf("%+v: %v, want %v", c.req, ids, c.want)
		}
	}
}

// Contradictory or malformed paging and filters are INVALID.
func TestListJobsRefusesBadCombinations(t *testing.T) {
	h := newHarness(t)
	admitFour(t, h)
	for name, r := range map[string]*adminapi.TListJobsRequest{
		"after and before":         {AfterJobID: thrift.Int64Ptr(1), BeforeJobID: thrift.Int64Ptr(3)},
		"after, newest first":      {AfterJobID: thrift.Int64Ptr(1), OldestFirst: thrift.BoolPtr(false)},
		"before, oldest first":     {BeforeJobID: thrift.Int64Ptr(3), OldestFirst: thrift.BoolPtr(true)},
		"before 0":                 {BeforeJobID: thrift.Int64Ptr(0)},
		"negative after":           {AfterJobID: thrift.Int64Ptr(-1)},
		"negative since":           {SinceMs: thrift.Int64Ptr(-5)},
		"unknown mutation type":    {MutationType: thrift.StringPtr("RENAME")},
		"unknown index type":       {IndexType: thrift.StringPtr("IVF_SQ")},
		"oversized mutation type":  {MutationType: thrift.StringPtr(string(make([]byte, 1<<12)))},
		"several states, with bad": {State: thrift.StringPtr("PENDING,NOPE")},
	} {
		if _, err := h.srv.ListJobs(context.Background(), r); errCode(t, err) != adminapi.TErrorCode_INVALID {
			t.Errorf("%s: %v, want INVALID", name, err)
		}
	}
}
