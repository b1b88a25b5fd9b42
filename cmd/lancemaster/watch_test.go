package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
)

// step is one scripted ShowJob answer: a view or an error.
type step struct {
	view *adminapi.TJobView
	err  error
}

// scriptedMaster is a fakeMaster whose ShowJob walks a script per job: the
// n-th call for a job gets its n-th step, and the last step repeats. A job
// without a script does not exist. The views change with the calls, not
// with the clock, so every test is deterministic.
type scriptedMaster struct {
	*fakeMaster
	mu      sync.Mutex
	scripts map[int64][]step
	next    map[int64]int
}

func newScripted(scripts map[int64][]step) *scriptedMaster {
	return &scriptedMaster{fakeMaster: &fakeMaster{}, scripts: scripts, next: map[int64]int{}}
}

func (s *scriptedMaster) ShowJob(_ context.Context, id int64, consistent bool) (*adminapi.TJobView, error) {
	_ = s.record("ShowJob", [2]any{id, consistent})
	s.mu.Lock()
	defer s.mu.Unlock()
	sc := s.scripts[id]
	if len(sc) == 0 {
		return nil, &adminapi.TAdminError{Code: adminapi.TErrorCode_NOT_FOUND, Message: "job " + formatInt(id) + " does not exist"}
	}
	i := min(s.next[id], len(sc)-1)
	s.next[id]++
	return sc[i].view, sc[i].err
}

// showCalls counts the ShowJob calls the master received for id.
func (s *scriptedMaster) showCalls(id int64) int {
	n := 0
	for _, c := range s.recordedCalls() {
		if c.method == "ShowJob" && c.req.([2]any)[0] == id {
			n++
		}
	}
	return n
}

// jv is a view of job id at revision rev; a terminal one carries a result.
func jv(id, rev int64, state, refresh string) *adminapi.TJobView {
	v := &adminapi.TJobView{
		JobID: id, Rev: thrift.Int64Ptr(rev), IndexName: thrift.StringPtr("idx" + formatInt(id)),
		MutationType: thrift.StringPtr("CREATE"), MutationState: thrift.StringPtr(state),
		RefreshState: thrift.StringPtr(refresh), UpdateTimeMs: thrift.Int64Ptr(1700000000000 + rev*1000),
	}
	if state != "PENDING" && state != "CANCELLED" {
		v.BackendID = thrift.Int64Ptr(3)
	}
	switch state {
	case "COMMITTED":
		v.ResultCode, v.CompletionReason = thrift.StringPtr("NATIVE_OK"), thrift.StringPtr("NONE")
	case "NOT_COMMITTED":
		v.ResultCode, v.CompletionReason = thrift.StringPtr("NATIVE_COMMIT_CONFLICT"), thrift.StringPtr("NONE")
	case "UNKNOWN":
		v.ResultCode, v.CompletionReason = thrift.StringPtr("NO_TRUSTED_RESULT"), thrift.StringPtr("NONE")
	}
	return v
}

func views(vs ...*adminapi.TJobView) []step {
	out := make([]step, len(vs))
	for i, v := range vs {
		out[i] = step{view: v}
	}
	return out
}

// watch runs `jobs watch` against addr with a 10ms interval. A watch that
// never ends (a bug) fails its test after 10s with exit 4; a later
// --timeout-total in args overrides that.
func watch(t *testing.T, addr string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return cli(t, addr, append([]string{"jobs", "watch", "--interval", "10ms", "--timeout-total", "10s"}, args...)...)
}

func TestWatchExitCodes(t *testing.T) {
	t.Parallel()
	committed := views(jv(1, 1, "RUNNING", "NOT_REQUIRED"), jv(1, 2, "COMMITTED", "REQUIRED"), jv(1, 4, "COMMITTED", "DONE"))
	cases := []struct {
		name    string
		scripts map[int64][]step
		code    int
		stderr  string
	}{
		{"all committed", map[int64][]step{
			1: committed,
			2: views(jv(2, 4, "COMMITTED", "NOT_REQUIRED")),
		}, watchAllCommitted, ""},
		{"one not committed", map[int64][]step{
			1: committed,
			2: views(jv(2, 1, "RUNNING", "NOT_REQUIRED"), jv(2, 2, "NOT_COMMITTED", "NOT_REQUIRED")),
		}, watchNotCommitted, "watch: 1 of 2 jobs did not commit: 2 NOT_COMMITTED\n"},
		{"one unknown", map[int64][]step{
			1: committed,
			2: views(jv(2, 2, "NOT_COMMITTED", "DONE")),
			3: views(jv(3, 1, "RUNNING", "NOT_REQUIRED"), jv(3, 2, "UNKNOWN", "NOT_REQUIRED")),
		}, watchUnknown, "watch: 1 of 3 jobs did not commit: 2 NOT_COMMITTED\n" +
			"watch: 1 of 3 jobs ended UNKNOWN (the index may or may not have changed): 3\n"},
		{"force-released unknown", map[int64][]step{
			1: views(func() *adminapi.TJobView {
				v := jv(1, 3, "UNKNOWN", "REQUIRED")
				v.ForceReleased = thrift.BoolPtr(true)
				return v
			}()),
		}, watchUnknown, "watch: 1 of 1 jobs ended UNKNOWN (the index may or may not have changed): 1\n"},
		{"cancelled", map[int64][]step{
			1: committed,
			2: views(jv(2, 0, "PENDING", "NOT_REQUIRED"), jv(2, 1, "CANCELLED", "NOT_REQUIRED")),
		}, watchNotCommitted, "watch: 1 of 2 jobs did not commit: 2 CANCELLED\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newScripted(tc.scripts)
			addr := serve(t, s)
			args := []string{}
			for id := int64(1); id <= int64(len(tc.scripts)); id++ {
				args = append(args, formatInt(id))
			}
			out, errOut, code := watch(t, addr, args...)
			if code != tc.code || errOut != tc.stderr {
				t.Errorf("exit %d, stderr %q; want exit %d, stderr %q\nstdout:\n%s", code, errOut, tc.code, tc.stderr, out)
			}
		})
	}
}

// TestWatchWaitsForTheRefresh follows a job through every state, prints a
// table only when it changed, and stops polling a job once it is done.
func TestWatchWaitsForTheRefresh(t *testing.T) {
	t.Parallel()
	s := newScripted(map[int64][]step{
		7: views(
			jv(7, 0, "PENDING", "NOT_REQUIRED"),
			jv(7, 0, "PENDING", "NOT_REQUIRED"),
			jv(7, 1, "RUNNING", "NOT_REQUIRED"),
			jv(7, 2, "COMMITTED", "REQUIRED"),
			jv(7, 2, "COMMITTED", "REQUIRED"),
			jv(7, 3, "COMMITTED", "RUNNING"),
			jv(7, 4, "COMMITTED", "DONE"),
			jv(7, 5, "COMMITTED", "DONE"), // never asked for
		),
		8: views(jv(8, 4, "COMMITTED", "DONE")),
	})
	addr := serve(t, s)

	out, errOut, code := watch(t, addr, "7", "8", "7")
	if code != exitOK || errOut != "" {
		t.Fatalf("exit %d, stderr %q\nstdout:\n%s", code, errOut, out)
	}
	if n := s.showCalls(7); n != 7 {
		t.Errorf("job 7 asked %d times, want 7 (exactly until DONE)", n)
	}
	if n := s.showCalls(8); n != 1 {
		t.Errorf("job 8 asked %d times, want 1 (done at once)", n)
	}
	if calls := s.recordedCalls(); len(calls) != 8 {
		t.Errorf("%d calls, want 8", len(calls))
	}
	want := "" +
		"ID  INDEX  MUTATION  STATE      REFRESH       RESULT     BACKEND  UPDATED\n" +
		"7   idx7   CREATE    PENDING    NOT_REQUIRED  -          -        2023-11-14T22:13:20Z\n" +
		"8   idx8   CREATE    COMMITTED  DONE          NATIVE_OK  3        2023-11-14T22:13:24Z\n" +
		"\n" +
		"ID  INDEX  MUTATION  STATE      REFRESH       RESULT     BACKEND  UPDATED\n" +
		"7   idx7   CREATE    RUNNING    NOT_REQUIRED  -          3        2023-11-14T22:13:21Z\n" +
		"8   idx8   CREATE    COMMITTED  DONE          NATIVE_OK  3        2023-11-14T22:13:24Z\n" +
		"\n" +
		"ID  INDEX  MUTATION  STATE      REFRESH   RESULT     BACKEND  UPDATED\n" +
		"7   idx7   CREATE    COMMITTED  REQUIRED  NATIVE_OK  3        2023-11-14T22:13:22Z\n" +
		"8   idx8   CREATE    COMMITTED  DONE      NATIVE_OK  3        2023-11-14T22:13:24Z\n" +
		"\n" +
		"ID  INDEX  MUTATION  STATE      REFRESH  RESULT     BACKEND  UPDATED\n" +
		"7   idx7   CREATE    COMMITTED  RUNNING  NATIVE_OK  3        2023-11-14T22:13:23Z\n" +
		"8   idx8   CREATE    COMMITTED  DONE     NATIVE_OK  3        2023-11-14T22:13:24Z\n" +
		"\n" +
		"ID  INDEX  MUTATION  STATE      REFRESH  RESULT     BACKEND  UPDATED\n" +
		"7   idx7   CREATE    COMMITTED  DONE     NATIVE_OK  3        2023-11-14T22:13:24Z\n" +
		"8   idx8   CREATE    COMMITTED  DONE     NATIVE_OK  3        2023-11-14T22:13:24Z\n"
	if out != want {
		t.Errorf("stdout =\n%s\nwant (one table per change)\n%s", out, want)
	}
}

// TestWatchNeverGoesBack: a view older than the one shown (a lagging
// master) is ignored.
func TestWatchNeverGoesBack(t *testing.T) {
	t.Parallel()
	s := newScripted(map[int64][]step{
		1: views(jv(1, 2, "COMMITTED", "REQUIRED"), jv(1, 1, "RUNNING", "NOT_REQUIRED"), jv(1, 4, "COMMITTED", "DONE")),
	})
	out := mustOK(t)(watch(t, serve(t, s), "1"))
	if strings.Contains(out, "RUNNING") || strings.Count(out, "ID  INDEX") != 2 {
		t.Errorf("stdout =\n%s", out)
	}
}

// dropProxy forwards loopback connections to target, except that it closes
// the connections whose 1-based numbers are in drop as soon as they arrive.
// The CLI dials afresh for every call, so connection n is call n.
func dropProxy(t *testing.T, target string, drop ...int) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	dropped := map[int]bool{}
	for _, n := range drop {
		dropped[n] = true
	}
	go func() {
		for n := 1; ; n++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if dropped[n] {
				c.Close()
				continue
			}
			go func() {
				defer c.Close()
				up, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer up.Close()
				go func() {
					_, _ = io.Copy(up, c)
					_ = up.(*net.TCPConn).CloseWrite()
				}()
				_, _ = io.Copy(c, up)
			}()
		}
	}()
	return ln.Addr().String()
}

func TestWatchSurvivesTransientFailures(t *testing.T) {
	t.Parallel()
	unavailable := &adminapi.TAdminError{Code: adminapi.TErrorCode_UNAVAILABLE, Message: "no leader"}
	s := newScripted(map[int64][]step{
		1: {
			{view: jv(1, 1, "RUNNING", "NOT_REQUIRED")},
			// call 2 never arrives: the proxy drops its connection
			{err: unavailable},
			{view: jv(1, 2, "COMMITTED", "REQUIRED")},
			{err: unavailable},
			{view: jv(1, 4, "COMMITTED", "DONE")},
		},
		2: views(jv(2, 2, "COMMITTED", "NOT_REQUIRED")),
	})
	// Calls: tick 1 asks 1 (call 1) and 2 (call 2, dropped: the tick ends);
	// tick 2 asks 1 (call 3, UNAVAILABLE: the tick ends); tick 3 asks 1 and 2;
	// tick 4 asks 1 (UNAVAILABLE); tick 5 asks 1 (DONE).
	addr := dropProxy(t, serve(t, s), 2)

	out, errOut, code := watch(t, addr, "1", "2")
	if code != exitOK {
		t.Fatalf("exit %d, stderr %q\nstdout:\n%s", code, errOut, out)
	}
	lines := strings.Split(strings.TrimSuffix(errOut, "\n"), "\n")
	if len(lines) != 4 ||
		!strings.HasPrefix(lines[0], "watch: job 2: UNAVAILABLE: ") || !strings.Contains(lines[0], addr) ||
		!strings.HasSuffix(lines[0], "; retrying every 10ms") ||
		lines[1] != "watch: the master answers again" ||
		lines[2] != "watch: job 1: UNAVAILABLE: no leader; retrying every 10ms" ||
		lines[3] != "watch: the master answers again" {
		t.Errorf("stderr =\n%s", errOut)
	}
	if a, b := s.showCalls(1), s.showCalls(2); a != 5 || b != 1 {
		t.Errorf("ShowJob calls: job 1 %d, job 2 %d; want 5 and 1", a, b)
	}
	if strings.Count(out, "ID  INDEX") != 3 || !strings.Contains(out, "COMMITTED  DONE") {
		t.Errorf("stdout =\n%s", out)
	}
}

func TestWatchNotFoundIsFatal(t *testing.T) {
	t.Parallel()
	for name, scripts := range map[string]map[int64][]step{
		"at once": {1: views(jv(1, 1, "RUNNING", "NOT_REQUIRED"))},
		"later": {
			1: views(jv(1, 1, "RUNNING", "NOT_REQUIRED")),
			2: {{view: jv(2, 1, "RUNNING", "NOT_REQUIRED")}, {err: &adminapi.TAdminError{
				Code: adminapi.TErrorCode_NOT_FOUND, Message: "job 2 does not exist"}}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newScripted(scripts)
			out, errOut, code := watch(t, serve(t, s), "1", "2")
			if code != exitError || errOut != "Error: NOT_FOUND: job 2 does not exist\n" {
				t.Errorf("exit %d, stderr %q\nstdout:\n%s", code, errOut, out)
			}
		})
	}
}

func TestWatchUsageErrorsSendNothing(t *testing.T) {
	t.Parallel()
	s := newScripted(map[int64][]step{1: views(jv(1, 4, "COMMITTED", "DONE"))})
	addr := serve(t, s)
	for name, args := range map[string][]string{
		"no id":                  {"jobs", "watch"},
		"id not a number":        {"jobs", "watch", "x"},
		"id zero":                {"jobs", "watch", "0"},
		"negative id":            {"jobs", "watch", "-3"},
		"one bad id of two":      {"jobs", "watch", "1", "1.5"},
		"zero interval":          {"jobs", "watch", "1", "--interval", "0s"},
		"negative interval":      {"jobs", "watch", "1", "--interval", "-1s"},
		"malformed interval":     {"jobs", "watch", "1", "--interval", "soon"},
		"negative timeout-total": {"jobs", "watch", "1", "--timeout-total", "-1s"},
		"bad output":             {"-o", "xml", "jobs", "watch", "1"},
	} {
		out, errOut, code := cli(t, addr, args...)
		if code != exitUsage || out != "" || !strings.HasPrefix(errOut, "Error: ") ||
			!strings.Contains(errOut, "'lancemaster jobs watch --help' for usage.") {
			t.Errorf("%s: exit %d, stdout %q, stderr %q", name, code, out, errOut)
		}
	}
	if calls := s.recordedCalls(); len(calls) != 0 {
		t.Errorf("usage errors sent %d requests: %+v", len(calls), calls)
	}
}

func TestWatchJSON(t *testing.T) {
	t.Parallel()
	s := newScripted(map[int64][]step{
		1: views(jv(1, 1, "RUNNING", "NOT_REQUIRED"), jv(1, 2, "COMMITTED", "REQUIRED"), jv(1, 4, "COMMITTED", "DONE")),
		2: views(jv(2, 1, "RUNNING", "NOT_REQUIRED"), jv(2, 2, "NOT_COMMITTED", "NOT_REQUIRED")),
	})
	out, errOut, code := watch(t, serve(t, s), "-o", "json", "--consistent", "2", "1")
	if code != watchNotCommitted || errOut != "watch: 1 of 2 jobs did not commit: 2 NOT_COMMITTED\n" {
		t.Fatalf("exit %d, stderr %q\nstdout:\n%s", code, errOut, out)
	}
	var got []map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("stdout is not one JSON array: %v\n%s", err, out)
	}
	if len(got) != 2 || got[0]["job_id"] != 2.0 || got[0]["mutation_state"] != "NOT_COMMITTED" ||
		got[1]["job_id"] != 1.0 || got[1]["refresh_state"] != "DONE" || got[1]["rev"] != 4.0 {
		t.Errorf("json = %v", got)
	}
	for _, c := range s.recordedCalls() {
		if c.req.([2]any)[1] != true {
			t.Errorf("call %v is not a consistent read", c.req)
		}
	}
}

func TestWatchTimeoutTotal(t *testing.T) {
	t.Parallel()
	s := newScripted(map[int64][]step{
		1: views(jv(1, 4, "COMMITTED", "DONE")),
		2: views(jv(2, 1, "RUNNING", "NOT_REQUIRED")),
	})
	out, errOut, code := watch(t, serve(t, s), "--timeout-total", "200ms", "1", "2")
	if code != watchTimedOut {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	if errOut != "Error: watch timed out after 200ms: 1 of 2 jobs not terminal and refreshed (2 RUNNING/NOT_REQUIRED)\n" {
		t.Errorf("stderr = %q", errOut)
	}
	if strings.Count(out, "ID  INDEX") != 1 || !strings.Contains(out, "2   idx2   CREATE    RUNNING") {
		t.Errorf("stdout =\n%s", out)
	}
	if s.showCalls(2) < 2 {
		t.Errorf("job 2 asked %d times, want it polled until the timeout", s.showCalls(2))
	}

	// -o json: the current views, once.
	out, _, code = watch(t, serve(t, s), "-o", "json", "--timeout-total", "100ms", "2")
	var got []map[string]any
	if err := json.Unmarshal([]byte(out), &got); code != watchTimedOut || err != nil || len(got) != 1 || got[0]["mutation_state"] != "RUNNING" {
		t.Errorf("exit %d, stdout %s", code, out)
	}
}

// TestWatchTimeoutTotalInterruptsACall: --timeout-total ends a call in
// flight, well before its own --timeout.
func TestWatchTimeoutTotalInterruptsACall(t *testing.T) {
	t.Parallel()
	s := newScripted(map[int64][]step{1: views(jv(1, 1, "RUNNING", "NOT_REQUIRED"))})
	s.block = make(chan struct{})
	addr := serve(t, s)
	t.Cleanup(func() { close(s.block) }) // runs before the server stops

	start := time.Now()
	out, errOut, code := watch(t, addr, "--timeout", "20s", "--timeout-total", "100ms", "1")
	if elapsed := time.Since(start); elapsed > 10*time.Second {
		t.Errorf("the watch took %s: the call was not interrupted", elapsed)
	}
	if code != watchTimedOut ||
		errOut != "Error: watch timed out after 100ms: 1 of 1 jobs not terminal and refreshed (1 not seen)\n" {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
	if !strings.Contains(out, "1   -      -") {
		t.Errorf("stdout =\n%s", out)
	}
}

func TestWatchNoMasterAtTheStart(t *testing.T) {
	t.Parallel()
	dead := deadAddress(t)
	out, errOut, code := watch(t, dead, "1")
	if code != exitUnreachable || out != "" ||
		!strings.HasPrefix(errOut, "Error: UNAVAILABLE: no master reachable (tried "+dead+")") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// terminal is a stdout that says it is a terminal.
type terminal struct{ bytes.Buffer }

func (*terminal) IsTerminal() bool { return true }

func TestWatchOnATerminalRedrawsInPlace(t *testing.T) {
	t.Parallel()
	s := newScripted(map[int64][]step{
		1: views(jv(1, 1, "RUNNING", "NOT_REQUIRED"), jv(1, 1, "RUNNING", "NOT_REQUIRED"), jv(1, 4, "COMMITTED", "DONE")),
	})
	addr := serve(t, s)
	var out terminal
	var errOut bytes.Buffer
	code := execute(t.Context(), []string{"--address", addr, "jobs", "watch", "--interval", "10ms", "1"},
		&out, &errOut, func(string) string { return "" })
	if code != exitOK || errOut.Len() != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
	// Three blocks of three lines (header, job, status): the second and
	// third move up over the previous one and clear it.
	blocks := strings.Split(out.String(), "\r\x1b[3A\x1b[J")
	if len(blocks) != 3 {
		t.Fatalf("%d blocks, want 3:\n%q", len(blocks), out.String())
	}
	for i, b := range blocks {
		if !strings.HasPrefix(b, "\x1b[?7lID  INDEX") || !strings.HasSuffix(b, "\n\x1b[?7h") || strings.Count(b, "\n") != 3 {
			t.Errorf("block %d = %q", i, b)
		}
	}
	if !strings.Contains(blocks[1], "RUNNING") || !strings.Contains(blocks[1], "0 of 1 jobs terminal and refreshed; polling every 10ms") {
		t.Errorf("block 1 = %q", blocks[1])
	}
	if !strings.Contains(blocks[2], "COMMITTED  DONE") || !strings.HasSuffix(blocks[2], "all 1 jobs terminal and refreshed\n\x1b[?7h") {
		t.Errorf("last block = %q", blocks[2])
	}
}
