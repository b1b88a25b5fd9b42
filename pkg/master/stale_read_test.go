package master_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/pkg/master/mastertest"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
)

// Stale reads are not silent: with two masters stopped, the survivor still
// answers jobs list and jobs show from its replica, and says that the
// answer may be stale (no known leader). A read on a healthy cluster's
// follower carries no warning.
func TestReadsOnAMasterWithoutLeaderSayTheyMayBeStale(t *testing.T) {
	c := mastertest.New(t, nil)
	c.Setup(c.Leader())
	c.Admit(c.Leader(), "s", 1)
	f := c.Follower()
	list := func() *adminapi.TListJobsResponse {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var resp *adminapi.TListJobsResponse
		if err := c.Client(f).Call(ctx, func(ctx context.Context, a *adminapi.LanceMasterServiceClient) (err error) {
			resp, err = a.ListJobs(ctx, &adminapi.TListJobsRequest{})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return resp
	}
	eventually(t, 10*time.Second, "the follower to list the job", func() bool { return len(list().GetJobs()) == 1 })
	if w := list().GetStaleWarning(); w != "" {
		t.Fatalf("a follower hearing its leader warned: %q", w)
	}
	for i := range c.Masters {
		if i != f {
			c.Kill(i)
		}
	}
	eventually(t, 30*time.Second, "the survivor to say its answer may be stale", func() bool {
		resp := list()
		return len(resp.GetJobs()) == 1 && strings.Contains(resp.GetStaleWarning(), "knows no leader")
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var v *adminapi.TJobView
	if err := c.Client(f).Call(ctx, func(ctx context.Context, a *adminapi.LanceMasterServiceClient) (err error) {
		v, err = a.ShowJob(ctx, list().GetJobs()[0].JobID, false)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(v.GetStaleWarning(), "may be stale") {
		t.Fatalf("show warning = %q", v.GetStaleWarning())
	}
}
