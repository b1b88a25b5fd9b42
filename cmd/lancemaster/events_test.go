package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
)

// ListEvents of the plain fake: no events.
func (f *fakeMaster) ListEvents(_ context.Context, r *adminapi.TListEventsRequest) (*adminapi.TListEventsResponse, error) {
	return &adminapi.TListEventsResponse{Events: []*adminapi.TAuditEvent{}}, f.record("ListEvents", r)
}

// eventsMaster answers listEvents with canned pages, by before_seq.
type eventsMaster struct {
	*fakeMaster
	pages map[int64]*adminapi.TListEventsResponse
}

func (m *eventsMaster) ListEvents(_ context.Context, r *adminapi.TListEventsRequest) (*adminapi.TListEventsResponse, error) {
	return m.pages[r.GetBeforeSeq()], m.record("ListEvents", r)
}

// threeHoursAgo is 3h before the CLI's clock in tests (testNow).
var threeHoursAgo = testNow.Add(-3 * time.Hour).UnixMilli()

func auditFixture() *eventsMaster {
	return &eventsMaster{fakeMaster: &fakeMaster{}, pages: map[int64]*adminapi.TListEventsResponse{
		0: {Events: []*adminapi.TAuditEvent{
			{Seq: 9, Index: 120, TimeMs: threeHoursAgo, Kind: "backend.drain", Subject: "2 (10.0.0.2:9060)",
				Actor: new("lancemaster operator"), Claimed: new("alice"), Verified: new(true), Summary: new("drained: false → true")},
			{Seq: 8, Index: 110, TimeMs: testNow.Add(-72 * time.Hour).UnixMilli(), Kind: "raft.add-voter", Subject: "m4", Actor: new("bob")},
		}, NextBeforeSeq: new(int64(8)), StaleWarning: new("no leader is known")},
		8: {Events: []*adminapi.TAuditEvent{{Seq: 7, Index: 100, TimeMs: 1_764_579_500_000, Kind: "option.set", Subject: "k"}}},
	}}
}

func TestEventsTable(t *testing.T) {
	t.Parallel()
	m := auditFixture()
	addr := serve(t, m)
	out, stderr, code := cli(t, addr, "events", "--kind", "backend.", "--subject", "10.0.0.2", "--actor", "alice", "--limit", "2", "--consistent")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	want := "" +
		"AGE  KIND            SUBJECT            ACTOR                            CHANGE\n" +
		"3h   backend.drain   2 (10.0.0.2:9060)  lancemaster operator (as alice)  drained: false → true\n" +
		"3d   raft.add-voter  m4                 bob                              -\n"
	if out != want {
		t.Fatalf("stdout =\n%s\nwant\n%s", out, want)
	}
	if !strings.Contains(stderr, "warning: no leader is known") || !strings.Contains(stderr, "--cursor 8") {
		t.Fatalf("stderr %q: want the stale warning and the next cursor", stderr)
	}
	r := m.onlyCall(t, "ListEvents").(*adminapi.TListEventsRequest)
	if r.GetKind() != "backend." || r.GetSubject() != "10.0.0.2" || r.GetActor() != "alice" || r.GetLimit() != 2 || !r.GetConsistent() || r.IsSetSinceMs() {
		t.Fatalf("request %v", r)
	}
}

func TestEventsVerboseJSONAndName(t *testing.T) {
	t.Parallel()
	addr := serve(t, auditFixture())
	out := mustOK(t)(cli(t, addr, "audit", "list", "--verbose", "--cursor", "8"))
	want := "" +
		"TIME                      INDEX  KIND        SUBJECT  ACTOR  VERIFIED  CHANGE\n" +
		"2025-12-01T08:58:20.000Z  100    option.set  k        -      no        -\n"
	if out != want {
		t.Fatalf("stdout =\n%s\nwant\n%s", out, want)
	}
	out = mustOK(t)(cli(t, addr, "-o", "json", "events"))
	var page struct {
		Events []map[string]any `json:"events"`
		Next   *string          `json:"next_cursor"`
	}
	if err := json.Unmarshal([]byte(out), &page); err != nil || len(page.Events) != 2 || page.Next == nil || *page.Next != "8" ||
		page.Events[0]["time_ms"] != float64(threeHoursAgo) || page.Events[0]["claimed"] != "alice" {
		t.Fatalf("json %s (%v)", out, err)
	}
	if out := mustOK(t)(cli(t, addr, "-o", "json", "events", "--cursor", "8")); !strings.Contains(out, `"next_cursor": ""`) {
		t.Fatalf("the last page's cursor: %s", out)
	}
	if out := mustOK(t)(cli(t, addr, "-o", "yaml", "events")); !strings.Contains(out, "next_cursor: \"8\"") || !strings.Contains(out, "kind: backend.drain") {
		t.Fatalf("-o yaml: %s", out)
	}
	if out := mustOK(t)(cli(t, addr, "-o", "name", "events")); out != "event/9\nevent/8\n" {
		t.Fatalf("-o name: %q", out)
	}
}

// --since takes an RFC 3339 time or a duration before now; bad values
// are refused by the CLI (exit 2) without a call.
func TestEventsSince(t *testing.T) {
	t.Parallel()
	m := auditFixture()
	addr := serve(t, m)
	mustOK(t)(cli(t, addr, "events", "--since", "2025-12-01T09:00:00Z"))
	if r := m.onlyCall(t, "ListEvents").(*adminapi.TListEventsRequest); r.GetSinceMs() != 1_764_579_600_000 {
		t.Fatalf("since_ms = %d", r.GetSinceMs())
	}
	mustOK(t)(cli(t, addr, "events", "--since", "90m"))
	calls := m.recordedCalls()
	if got, want := calls[len(calls)-1].req.(*adminapi.TListEventsRequest).GetSinceMs(), testNow.Add(-90*time.Minute).UnixMilli(); got != want {
		t.Fatalf("--since 90m sent %d, want %d (90m before the CLI's clock)", got, want)
	}
	for _, bad := range [][]string{{"--since", "yesterday"}, {"--since", "-5m"}, {"--limit", "0"}, {"--cursor", "x"}} {
		if _, stderr, code := cli(t, addr, append([]string{"events"}, bad...)...); code != exitUsage || stderr == "" {
			t.Errorf("%v: exit %d, stderr %q", bad, code, stderr)
		}
	}
	if n := len(m.recordedCalls()); n != 2 {
		t.Fatalf("%d calls; bad flags must not reach the master", n)
	}
}

// config list says who changed each option and when.
func TestConfigListChangedBy(t *testing.T) {
	t.Parallel()
	f := &fakeMaster{options: []*adminapi.TOption{
		{Key: "enable_lance_index_mutation", Value: "true", DefaultValue: "true", IsDefault: true},
		{Key: "lance_index_job_dispatcher_paused", Value: "true", DefaultValue: "false",
			ChangedBy: new("lancemaster operator"), ChangedByClaimed: new("alice"), ChangedTimeMs: new(threeHoursAgo)},
		{Key: "lance_index_job_max_dispatch_per_round", Value: "4", DefaultValue: "16"},
	}}
	addr := serve(t, f)
	out := mustOK(t)(cli(t, addr, "config", "list"))
	want := "" +
		"KEY                                     VALUE  DEFAULT  CHANGED  CHANGED BY\n" +
		"enable_lance_index_mutation             true   true              \n" +
		"lance_index_job_dispatcher_paused       true   false    3h       lancemaster operator (as alice)\n" +
		"lance_index_job_max_dispatch_per_round  4      16       *        \n"
	if out != want {
		t.Fatalf("stdout =\n%q\nwant\n%q", out, want)
	}
	out = mustOK(t)(cli(t, addr, "-o", "json", "config", "list"))
	if !strings.Contains(out, `"changed_by": "lancemaster operator"`) || !strings.Contains(out, `"changed_time_ms"`) {
		t.Fatalf("json %s", out)
	}
}

// --kind completes the event kinds.
func TestEventsKindCompletion(t *testing.T) {
	t.Parallel()
	out := mustOK(t)(runCLI(t, nil, "__complete", "events", "--kind", "backend.d"))
	if !strings.Contains(out, "backend.drain") || strings.Contains(out, "backend.add") {
		t.Fatalf("completion %q", out)
	}
}
