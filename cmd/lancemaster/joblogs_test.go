package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
)

// jobs logs prints the log on stdout (control characters but newlines and
// tabs made spaces) and where it came from on stderr; --max-bytes is sent.
func TestJobsLogs(t *testing.T) {
	t.Parallel()
	f := &fakeMaster{logs: &adminapi.TJobLogs{Log: "line 1\n\tline\x1b[31m 2\n", Source: "backend",
		Truncated: thrift.BoolPtr(true), Phase: thrift.StringPtr("shuffling"), ElapsedMs: thrift.Int64Ptr(83_400)}}
	addr := serve(t, f)
	out, errOut, code := cli(t, addr, "jobs", "logs", "42", "--max-bytes", "8192")
	if code != exitOK || out != "line 1\n\tline [31m 2\n" {
		t.Fatalf("exit %d stdout %q stderr %q", code, out, errOut)
	}
	if errOut != "job 42: log from backend; older lines not shown; phase shuffling after 1m23s\n" {
		t.Errorf("stderr %q", errOut)
	}
	if got := f.onlyCall(t, "JobLogs").([2]any); got != [2]any{int64(42), int32(8192)} {
		t.Errorf("request %v", got)
	}
}

func TestJobsLogsFromTheJournalAndJSON(t *testing.T) {
	t.Parallel()
	f := &fakeMaster{logs: &adminapi.TJobLogs{Log: "tail\n", Source: "journal",
		Note: thrift.StringPtr("backend 3 could not be reached; showing the last part the journal keeps (at most 4096 bytes)")}}
	addr := serve(t, f)
	out, errOut, code := cli(t, addr, "jobs", "logs", "7")
	if code != exitOK || out != "tail\n" || !strings.Contains(errOut, "log from journal; backend 3 could not be reached") {
		t.Fatalf("exit %d stdout %q stderr %q", code, out, errOut)
	}
	out = mustOK(t)(cli(t, addr, "-o", "json", "jobs", "logs", "7"))
	var got map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil || got["source"] != "journal" || got["log"] != "tail\n" {
		t.Fatalf("json %v %v", got, err)
	}
}

func TestJobsLogsUsageErrorsSendNothing(t *testing.T) {
	t.Parallel()
	f := &fakeMaster{}
	addr := serve(t, f)
	for _, args := range [][]string{{"jobs", "logs", "0"}, {"jobs", "logs", "1", "--max-bytes", "-1"},
		{"jobs", "logs", "1", "--max-bytes", "262145"}, {"jobs", "logs"}} {
		if _, _, code := cli(t, addr, args...); code != exitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, exitUsage)
		}
	}
	if calls := f.recordedCalls(); len(calls) != 0 {
		t.Errorf("calls %v", calls)
	}
}

// jobs show prints the build fields: times, durations, the peak memory and
// the leftover index directory.
func TestJobsShowBuildFields(t *testing.T) {
	t.Parallel()
	view := &adminapi.TJobView{JobID: 9, LeftoverIndexUUID: thrift.StringPtr("0b5d6f9e-3c1a-4e2b-9f7d-1a2b3c4d5e6f"),
		DispatchTimeMs: thrift.Int64Ptr(1700000000000), StartTimeMs: thrift.Int64Ptr(1700000000100),
		FinishTimeMs: thrift.Int64Ptr(1700000001600), WallMs: thrift.Int64Ptr(1400), PeakMemoryBytes: thrift.Int64Ptr(300 << 20),
		PeakMemorySource: thrift.StringPtr("cgroup"), BuildElapsedMs: thrift.Int64Ptr(0), ProgressTimeMs: thrift.Int64Ptr(1700000000900)}
	addr := serve(t, &fakeMaster{job: view})
	out := mustOK(t)(cli(t, addr, "jobs", "show", "9"))
	want := "" +
		"job_id:              9\n" +
		"leftover_index_uuid: left behind index directory 0b5d6f9e-3c1a-4e2b-9f7d-1a2b3c4d5e6f\n" +
		"dispatch_time:       2023-11-14T22:13:20.000Z\n" +
		"start_time:          2023-11-14T22:13:20.100Z\n" +
		"finish_time:         2023-11-14T22:13:21.600Z\n" +
		"wall:                1.4s\n" +
		"peak_memory:         300.0 MiB (314572800 bytes)\n" +
		"peak_memory_source:  cgroup\n" +
		"build_elapsed:       0s\n" +
		"progress_time:       2023-11-14T22:13:20.900Z\n"
	if out != want {
		t.Errorf("stdout =\n%s\nwant\n%s", out, want)
	}
}

// jobs watch shows a running build's phase and its elapsed time.
func TestWatchShowsThePhase(t *testing.T) {
	t.Parallel()
	running := jv(1, 1, "RUNNING", "NOT_REQUIRED")
	running.BuildPhase, running.BuildElapsedMs = thrift.StringPtr("merging"), thrift.Int64Ptr(2500)
	s := newScripted(map[int64][]step{1: views(running, jv(1, 2, "COMMITTED", "DONE"))})
	addr := serve(t, s)
	out, _, code := watch(t, addr, "1")
	if code != exitOK || !strings.Contains(out, "RUNNING (merging at 2.5s)") {
		t.Fatalf("exit %d stdout:\n%s", code, out)
	}
}
