package admin

import (
	"context"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
)

// --state takes several states at once: mutation states match any of them,
// and a refresh state beside them must match too.
func TestListJobsSeveralStates(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	for _, name := range []string{"a", "b", "c"} {
		if _, err := h.srv.CreateIndex(ctx, createReq("items", name, "vector", "IVF_PQ")); err != nil {
			t.Fatal(err)
		}
	}
	driveToUnknown(t, h, 2)
	if _, err := h.srv.CancelJob(ctx, &adminapi.TCancelRequest{JobID: 3}); err != nil {
		t.Fatal(err)
	}
	ids := func(state string) []int64 {
		t.Helper()
		resp, err := h.srv.ListJobs(ctx, &adminapi.TListJobsRequest{State: thrift.StringPtr(state)})
		if err != nil {
			t.Fatalf("--state %s: %v", state, err)
		}
		var out []int64
		for _, j := range resp.Jobs {
			out = append(out, j.JobID)
		}
		return out
	}
	for state, want := range map[string][]int64{
		"UNKNOWN,CANCELLED":                    {2, 3},
		"pending, unknown":                     {1, 2},
		"UNKNOWN,CANCELLED,refresh:DONE":       nil,
		"PENDING,UNKNOWN,refresh:NOT_REQUIRED": {1, 2},
		"PENDING":                              {1},
	} {
		got := ids(state)
		if len(got) != len(want) {
			t.Errorf("--state %s: %v, want %v", state, got, want)
			continue
		}
		for i := range got {
			if got[i] != want[i] {
				t.Errorf("--state %s: %v, want %v", state, got, want)
			}
		}
	}
	if _, err := h.srv.ListJobs(ctx, &adminapi.TListJobsRequest{State: thrift.StringPtr("UNKNOWN,BOGUS")}); errCode(t, err) != adminapi.TErrorCode_INVALID {
		t.Errorf("a bad state in a list: %v", err)
	}
}
