package main

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
)

// create-index --wait admits, then follows the job as `jobs watch` does and
// exits with its code; without --wait it only admits.
func TestCreateIndexWait(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		final string
		code  int
	}{{"COMMITTED", watchAllCommitted}, {"UNKNOWN", watchUnknown}} {
		s := newScripted(map[int64][]step{7: views(jv(7, 1, "RUNNING", "NOT_REQUIRED"), jv(7, 2, tc.final, "NOT_REQUIRED"))})
		s.admit = &adminapi.TAdmitResponse{JobID: thrift.Int64Ptr(7)}
		addr := serve(t, s)
		out, errOut, code := cli(t, addr, "jobs", "create-index", "lake.db.t", "i", "--column", "id", "--type", "BTREE", "--wait", "--timeout-total", "10s")
		if code != tc.code || !strings.Contains(errOut, "job 7 admitted; waiting for it") || !strings.Contains(out, tc.final) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q", tc.final, code, out, errOut)
		}
		if s.showCalls(7) < 2 {
			t.Errorf("%s: the job was polled %d times", tc.final, s.showCalls(7))
		}
	}
	s := newScripted(nil)
	s.admit = &adminapi.TAdmitResponse{JobID: thrift.Int64Ptr(8)}
	addr := serve(t, s)
	if out := mustOK(t)(cli(t, addr, "jobs", "drop-index", "lake.db.t", "i")); out != "job 8 admitted\n" || s.showCalls(8) != 0 {
		t.Errorf("without --wait: %q, %d polls", out, s.showCalls(8))
	}
}

// changingList answers ListJobs with the job RUNNING for the first calls,
// then COMMITTED: what `jobs list --watch` must print twice, and only twice.
type changingList struct {
	*fakeMaster
	mu    sync.Mutex
	calls int
}

func (c *changingList) ListJobs(_ context.Context, _ *adminapi.TListJobsRequest) (*adminapi.TListJobsResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	state := "RUNNING"
	if c.calls > 2 {
		state = "COMMITTED"
	}
	return &adminapi.TListJobsResponse{Jobs: []*adminapi.TJobView{jv(1, 1, state, "NOT_REQUIRED")}}, nil
}

func TestJobsListWatchPrintsOnChange(t *testing.T) {
	t.Parallel()
	f := &changingList{fakeMaster: &fakeMaster{}}
	addr := serve(t, f)
	out := mustOK(t)(cli(t, addr, "jobs", "list", "--watch", "--interval", "10ms", "--timeout-total", "500ms"))
	if strings.Count(out, "ID  CATALOG") != 2 || !strings.Contains(out, "RUNNING") || !strings.Contains(out, "COMMITTED") ||
		strings.Index(out, "RUNNING") > strings.Index(out, "COMMITTED") || !strings.Contains(out, "\n\nID") {
		t.Errorf("stdout:\n%s", out)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.calls < 4 {
		t.Errorf("%d polls", f.calls)
	}
}
