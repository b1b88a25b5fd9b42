package main

import (
	"bytes"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
)

// What each jobs list flag puts in the request.
func TestJobsListFlagsMakeTheRequest(t *testing.T) {
	t.Parallel()
	f := &fakeMaster{}
	addr := serve(t, f)
	since := testNow.Add(-2 * time.Hour).UnixMilli()
	for _, c := range []struct {
		args []string
		want *adminapi.TListJobsRequest
	}{
		{[]string{}, &adminapi.TListJobsRequest{OldestFirst: thrift.BoolPtr(false)}},
		{[]string{"--reverse"}, &adminapi.TListJobsRequest{OldestFirst: thrift.BoolPtr(true)}},
		{[]string{"--cursor", "40"}, &adminapi.TListJobsRequest{OldestFirst: thrift.BoolPtr(false), BeforeJobID: thrift.Int64Ptr(40)}},
		{[]string{"--reverse", "--cursor", "40"}, &adminapi.TListJobsRequest{OldestFirst: thrift.BoolPtr(true), AfterJobID: thrift.Int64Ptr(40)}},
		{[]string{"--after", "7"}, &adminapi.TListJobsRequest{OldestFirst: thrift.BoolPtr(true), AfterJobID: thrift.Int64Ptr(7)}},
		{[]string{"--since", "2h"}, &adminapi.TListJobsRequest{OldestFirst: thrift.BoolPtr(false), SinceMs: &since}},
		{[]string{"--since", "2026-12-01T09:00:00Z"}, &adminapi.TListJobsRequest{OldestFirst: thrift.BoolPtr(false),
			SinceMs: thrift.Int64Ptr(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC).UnixMilli())}},
		{[]string{"--type", "drop", "--index-type", "ivf_pq"}, &adminapi.TListJobsRequest{OldestFirst: thrift.BoolPtr(false),
			MutationType: thrift.StringPtr("DROP"), IndexType: thrift.StringPtr("IVF_PQ")}},
		{[]string{"--state", "pending,running,refresh:failed"}, &adminapi.TListJobsRequest{OldestFirst: thrift.BoolPtr(false),
			State: thrift.StringPtr("PENDING,RUNNING,REFRESH:FAILED")}},
	} {
		f.mu.Lock()
		f.calls = nil
		f.mu.Unlock()
		mustOK(t)(cli(t, addr, append([]string{"jobs", "list"}, c.args...)...))
		if got := f.onlyCall(t, "ListJobs").(*adminapi.TListJobsRequest); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%v: request %s, want %s", c.args, got, c.want)
		}
	}
}

// -o json and -o yaml carry the next page's cursor; -o name is one line a
// job, as before; --reverse's hint says --reverse.
func TestJobsListCursorInEveryOutput(t *testing.T) {
	t.Parallel()
	f := &fakeMaster{pages: map[int64]*adminapi.TListJobsResponse{
		0: {Jobs: testJobs(), NextBeforeJobID: thrift.Int64Ptr(1), NextAfterJobID: thrift.Int64Ptr(2)},
	}}
	addr := serve(t, f)
	out := mustOK(t)(cli(t, addr, "-o", "json", "jobs", "list", "--limit", "2"))
	if !strings.HasPrefix(out, "{\n  \"jobs\": [\n") || !strings.HasSuffix(out, "  ],\n  \"next_cursor\": \"1\"\n}\n") {
		t.Errorf("-o json:\n%s", out)
	}
	out = mustOK(t)(cli(t, addr, "-o", "yaml", "jobs", "list", "--reverse", "--limit", "2"))
	if !strings.HasPrefix(out, "jobs:\n") || !strings.HasSuffix(out, "next_cursor: \"2\"\n") {
		t.Errorf("-o yaml:\n%s", out)
	}
	if out := mustOK(t)(cli(t, addr, "-o", "name", "jobs", "list")); out != "job/1\njob/2\n" {
		t.Errorf("-o name: %q", out)
	}
	_, errOut, _ := cli(t, addr, "jobs", "list", "--reverse")
	if errOut != "more jobs match: use --all, or --reverse --cursor 2 for the next page\n" {
		t.Errorf("--reverse hint: %q", errOut)
	}
	if _, errOut, _ := cli(t, addr, "-o", "json", "jobs", "list"); errOut != "" {
		t.Errorf("-o json printed a hint on stderr: %q", errOut)
	}
}

func TestHumanAge(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		-time.Minute: "0s", 0: "0s", 59 * time.Second: "59s", 119 * time.Second: "119s", 2 * time.Minute: "2m",
		3*time.Minute + 7*time.Second: "3m7s", 10 * time.Minute: "10m", 179 * time.Minute: "179m",
		2*time.Hour + 5*time.Minute: "125m", 3*time.Hour + 25*time.Minute: "3h25m", 5 * time.Hour: "5h",
		30 * time.Hour: "30h", 4 * 24 * time.Hour: "4d", 4*24*time.Hour + 3*time.Hour: "4d3h", 40 * 24 * time.Hour: "40d",
		3 * 365 * 24 * time.Hour: "3y", (3*365 + 10) * 24 * time.Hour: "3y10d", 9 * 365 * 24 * time.Hour: "9y",
	} {
		if got := humanAge(d); got != want {
			t.Errorf("humanAge(%s) = %q, want %q", d, got, want)
		}
	}
}

// Ages move with the clock alone: jobs list --watch prints the list again
// when a job changed, not when its AGE did.
func TestJobsListWatchIgnoresMovingAges(t *testing.T) {
	t.Parallel()
	f := &changingList{fakeMaster: &fakeMaster{}}
	addr := serve(t, f)
	var mu sync.Mutex
	clock := testNow
	tick := func() time.Time { // a minute per reading
		mu.Lock()
		defer mu.Unlock()
		clock = clock.Add(time.Minute)
		return clock
	}
	var out, errb bytes.Buffer
	code := executeAt(t.Context(), tick, []string{"--address", addr, "jobs", "list", "--watch", "--interval", "10ms", "--timeout-total", "500ms"},
		&out, &errb, func(string) string { return "" })
	if code != exitOK || strings.Count(out.String(), "ID  CATALOG") != 2 {
		t.Errorf("exit %d, stdout:\n%s\nstderr %s", code, out.String(), errb.String())
	}
}

// A master older than newest-first listing ignores the new fields: it
// answers in id order with next_after_job_id and unfiltered jobs. The CLI
// says so, follows its order, and applies --type (and --since,
// --index-type) itself.
func TestJobsListAgainstAnOlderMaster(t *testing.T) {
	t.Parallel()
	jobs := testJobs() // 1 CREATE, 2 DROP
	third := *jobs[0]
	third.JobID = 3
	f := &fakeMaster{pages: map[int64]*adminapi.TListJobsResponse{
		0: {Jobs: jobs, NextAfterJobID: thrift.Int64Ptr(2)},
		2: {Jobs: []*adminapi.TJobView{&third}},
	}}
	addr := serve(t, f)
	out, errOut, code := cli(t, addr, "-o", "name", "jobs", "list", "--all", "--type", "create")
	if code != exitOK || out != "job/1\njob/3\n" || !strings.Contains(errOut, "warning: the master lists in id order (oldest first)") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	calls := f.recordedCalls()
	if len(calls) != 2 {
		t.Fatalf("calls %+v", calls)
	}
	if r := calls[1].req.(*adminapi.TListJobsRequest); r.GetAfterJobID() != 2 || r.IsSetBeforeJobID() || !r.GetOldestFirst() {
		t.Errorf("second page request %s", r)
	}
	out = mustOK(t)(cli(t, addr, "-o", "name", "jobs", "list", "--since", "2023-11-14T19:26:40Z"))
	if out != "job/1\n" {
		t.Errorf("--since against an older master: %q", out)
	}
}

// LANCEMASTER_VERBOSE mirrors --verbose; a value that is not a boolean is a
// usage error.
func TestVerboseEnvironmentVariable(t *testing.T) {
	t.Parallel()
	addr := serve(t, &fakeMaster{pages: map[int64]*adminapi.TListJobsResponse{0: {Jobs: testJobs()}}})
	out := mustOK(t)(runCLI(t, map[string]string{envAddress: addr, envVerbose: "true"}, "jobs", "list"))
	if !strings.Contains(out, "2023-11-14T22:13:20.000Z") || strings.Contains(out, "3h25m") {
		t.Errorf("%s=true:\n%s", envVerbose, out)
	}
	if out := mustOK(t)(runCLI(t, map[string]string{envAddress: addr, envVerbose: "true"}, "--verbose=false", "jobs", "list")); !strings.Contains(out, "3h25m") {
		t.Errorf("--verbose=false beats the environment:\n%s", out)
	}
	if _, errOut, code := runCLI(t, map[string]string{envAddress: addr, envVerbose: "loud"}, "jobs", "list"); code != exitUsage ||
		!strings.Contains(errOut, envVerbose) {
		t.Errorf("a bad %s: exit %d, stderr %q", envVerbose, code, errOut)
	}
}
