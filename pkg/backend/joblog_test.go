package backend

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/backend/frame"
	"github.com/lancemaster/lancemaster/pkg/backend/supervisor"
)

// jobLog asks the agent for id's log at term in cluster ("" = none).
func (h *harness) jobLog(id string, term int64, maxBytes int32) *wire.TJobLogResponse {
	h.t.Helper()
	req := &wire.TJobLogRequest{InvocationID: id, LeaderTerm: &term}
	if maxBytes != 0 {
		req.MaxBytes = &maxBytes
	}
	resp, err := h.client.JobLog(h.ctx(), h.a.Addr(), req)
	if err != nil {
		h.t.Fatalf("job log: %v", err)
	}
	return resp
}

// playStderr feeds lines to the build's stderr observer, as the supervisor does.
func playStderr(ctx context.Context, lines ...string) {
	fn := supervisor.StderrLines(ctx)
	for _, l := range lines {
		fn([]byte(l))
	}
}

func testdataLines(t *testing.T, name string) []string {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimRight(string(b), "\n"), "\n")
}

// The log of a running build is answered with its phase and elapsed time,
// and after the build finished, until the entry is forgotten; max_bytes
// bounds it (truncated), and an unknown invocation answers its state.
func TestJobLogWhileRunningAndFinished(t *testing.T) {
	h := newHarness(t, nil)
	played := make(chan struct{})
	h.runner.hold()
	h.runner.mu.Lock()
	h.runner.onStart = func(ctx context.Context) {
		playStderr(ctx, "worker starting", `lancemaster-progress {"phase":"building"}`,
			`[2026-12-01T22:33:22Z INFO  lance::index::vector::ivf] Start to train IVF model`, "line\x07with a bell")
		close(played)
	}
	h.runner.mu.Unlock()
	h.heartbeatCluster("c1", 1)
	h.submit(h.dispatch("inv", 1))
	<-played
	r := h.jobLog("inv", 1, 0)
	if r.Status.StatusCode != wire.TStatusCode_OK || r.GetState() != wire.TLanceInvocationState_RUNNING {
		t.Fatalf("running: %+v", r)
	}
	if !strings.HasPrefix(r.GetLog(), "worker starting\n") || !strings.Contains(r.GetLog(), "line with a bell\n") || r.GetTruncated() {
		t.Fatalf("running log %q truncated %v", r.GetLog(), r.GetTruncated())
	}
	if r.GetPhase() != "ivf_training" || !r.IsSetElapsedMs() || r.GetElapsedMs() < 0 {
		t.Fatalf("phase %q elapsed %v", r.GetPhase(), r.ElapsedMs)
	}
	if r := h.jobLog("inv", 1, 10); r.GetLog() != "th a bell\n" || !r.GetTruncated() {
		t.Fatalf("max_bytes 10: %q truncated %v", r.GetLog(), r.GetTruncated())
	}
	h.runner.release()
	h.waitState(1, "inv", wire.TLanceInvocationState_FINISHED)
	r = h.jobLog("inv", 1, 0)
	if r.GetState() != wire.TLanceInvocationState_FINISHED || !strings.HasPrefix(r.GetLog(), "worker starting\n") || r.IsSetPhase() {
		t.Fatalf("finished: %+v", r)
	}
	if r := h.jobLog("nope", 1, 0); r.Status.StatusCode != wire.TStatusCode_OK ||
		r.GetState() != wire.TLanceInvocationState_UNKNOWN_INVOCATION || r.IsSetLog() {
		t.Fatalf("unknown: %+v", r)
	}
	if r := h.jobLog("inv", 0, 0); r.Status.StatusCode != wire.TStatusCode_STALE_LEADER_TERM || r.IsSetLog() {
		t.Fatalf("stale term: %+v", r)
	}
	other := "other"
	resp, err := h.client.JobLog(h.ctx(), h.a.Addr(), &wire.TJobLogRequest{InvocationID: "inv", ClusterID: &other})
	if err != nil || resp.Status.StatusCode != wire.TStatusCode_OTHER_CLUSTER {
		t.Fatalf("other cluster: %+v %v", resp, err)
	}
	if resp, _ := h.client.JobLog(h.ctx(), h.a.Addr(), &wire.TJobLogRequest{InvocationID: ""}); resp.Status.StatusCode != wire.TStatusCode_INVALID_ARGUMENT {
		t.Fatalf("empty id: %+v", resp)
	}
}

// The ring keeps whole lines within its bound, and one answer is at most
// MaxJobLogBytes whatever max_bytes asks.
func TestJobLogIsBounded(t *testing.T) {
	l := newJobLog(newScrubber(nil))
	line := strings.Repeat("x", 999)
	for i := 0; i < 2*runningLogBytes/1000; i++ {
		l.add([]byte(line))
	}
	text, truncated := l.tail(MaxJobLogBytes)
	if !truncated || len(text) > MaxJobLogBytes || !strings.HasPrefix(text, line+"\n") {
		t.Fatalf("%d bytes, truncated %v", len(text), truncated)
	}
	l.shrink()
	if text, _ := l.tail(MaxJobLogBytes); len(text) > finishedLogBytes || !strings.HasPrefix(text, line+"\n") {
		t.Fatalf("finished: %d bytes", len(text))
	}
	h := newHarness(t, nil)
	h.ready(1)
	if r := h.jobLog("x", 1, 1<<30); r.Status.StatusCode != wire.TStatusCode_OK {
		t.Fatalf("huge max_bytes: %+v", r)
	}
}

// Lance's own stage lines, as Lance 8 prints them under frame.LanceLogEnv
// (captured from real IVF_PQ and IVF_HNSW_SQ builds), become phases; each
// change is one stored progress report carrying the elapsed time, never
// one per line.
func TestLanceStageLinesBecomePhases(t *testing.T) {
	for file, want := range map[string][]string{
		// The builder's own "building", then Lance's build_vector_index line (the uuid).
		"stderr-ivf_pq.txt":      {"building", "building", "ivf_training", "quantizer_training", "shuffling", "merging", "committing", "verifying"},
		"stderr-ivf_hnsw_sq.txt": {"building", "ivf_training", "quantizer_training", "shuffling", "merging", "committing"},
	} {
		t.Run(file, func(t *testing.T) {
			lines := testdataLines(t, file)
			h := newHarness(t, nil)
			h.runner.setScript(func(ctx context.Context, req *frame.Request) Outcome {
				playStderr(ctx, lines...)
				return Outcome{Proof: ProofChildReaped, Result: &frame.Result{Protocol: 1, Mode: frame.ModeBuild, ResultCode: "NATIVE_OK"}}
			})
			h.ready(1)
			h.submit(h.dispatch("inv", 1))
			h.waitState(1, "inv", wire.TLanceInvocationState_FINISHED)
			var got []string
			for _, e := range h.logs.FilterMessage("the worker announced its index").All() {
				got = append(got, e.ContextMap()["phase"].(string))
			}
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Fatalf("phases %v, want %v (from %d lines)", got, want, len(lines))
			}
			if st := h.state(1, "inv"); !frame.IsUUID(st.GetIndexUUID()) {
				t.Fatalf("the uuid of Lance's line was not read: %+v", st)
			}
		})
	}
}

// Each progress report carries the time since the worker started.
func TestProgressCarriesElapsed(t *testing.T) {
	m := newFakeMaster(t)
	now := time.Now() // a frozen clock: the build takes no time
	h := newHarness(t, func(c *Config) { c.Masters, c.Clock = []string{m.Addr()}, func() time.Time { return now } })
	h.runner.setScript(func(ctx context.Context, req *frame.Request) Outcome {
		playStderr(ctx, `lancemaster-progress {"phase":"building"}`)
		return Outcome{Proof: ProofChildReaped, Result: &frame.Result{Protocol: 1, Mode: frame.ModeBuild, ResultCode: "NATIVE_OK"}}
	})
	h.ready(1)
	h.submit(h.dispatch("inv", 1))
	eventually(t, func() bool { return len(m.progressReports()) > 0 }, "no progress report")
	if p := m.progressReports()[0]; p.GetPhase() != "building" || !p.IsSetElapsedMs() || p.GetElapsedMs() != 0 {
		t.Fatalf("progress %+v", p)
	}
}

// A report carries what the supervisor measured (resources), the newest
// 4 KiB of the redacted log (log_tail) and, for a build that did not
// commit, the index directory it left behind; a termination report carries
// the resources and the log tail too.
func TestReportsCarryResourcesLogTailAndLeftover(t *testing.T) {
	m := newFakeMaster(t)
	h := newHarness(t, func(c *Config) { c.Masters = []string{m.Addr()} })
	start := time.UnixMilli(1_790_000_000_000)
	long := strings.Repeat("y", 1000)
	h.runner.setScript(func(ctx context.Context, req *frame.Request) Outcome {
		playStderr(ctx, "first line", long, long, long, long, long, "last line")
		out := Outcome{Proof: ProofChildReaped, StartTime: start, FinishTime: start.Add(1500 * time.Millisecond),
			Duration: 1400 * time.Millisecond, PeakMemoryBytes: 300 << 20, PeakMemorySource: supervisor.PeakFromCgroup}
		if req.InvocationID == "crash" {
			out.Failure, out.ExitCode = "exit status 1", 1
			return out
		}
		out.Result = &frame.Result{Protocol: 1, Mode: frame.ModeBuild, ResultCode: "NATIVE_INTERNAL", LeftoverIndexUUID: testUUID}
		return out
	})
	h.ready(1)
	h.submit(h.dispatch("fail", 1))
	h.submit(h.dispatch("crash", 1))
	eventually(t, func() bool { r, term := m.received(); return len(r) == 1 && len(term) == 1 }, "reports not delivered")
	results, terms := m.received()
	want := func(what string, r *wire.TBuildResources, tail string) {
		t.Helper()
		if r.GetStartTimeMs() != start.UnixMilli() || r.GetFinishTimeMs() != start.UnixMilli()+1500 || r.GetWallMs() != 1400 ||
			r.GetPeakMemoryBytes() != 300<<20 || r.GetPeakMemorySource() != "cgroup" {
			t.Errorf("%s resources %+v", what, r)
		}
		if len(tail) > MaxLogTailBytes || !strings.HasSuffix(tail, "last line\n") || strings.Contains(tail, "first line") ||
			!strings.HasPrefix(tail, long) {
			t.Errorf("%s log tail: %d bytes %.40q…", what, len(tail), tail)
		}
	}
	want("result", results[0].Resources, results[0].GetLogTail())
	want("termination", terms[0].Resources, terms[0].GetLogTail())
	if results[0].GetLeftoverIndexUUID() != testUUID {
		t.Errorf("leftover %q", results[0].GetLeftoverIndexUUID())
	}
}

// A worker that never started has no resources.
func TestNoResourcesWithoutAWorker(t *testing.T) {
	if r := resourcesOf(Outcome{Proof: ProofNeverLaunched}); r != nil {
		t.Fatalf("%+v", r)
	}
	if r := resourcesOf(Outcome{StartTime: time.Now(), PeakMemoryBytes: 5}); r.PeakMemoryBytes != nil || r.FinishTimeMs != nil {
		t.Fatalf("a peak without a source, or a finish never seen, was reported: %+v", r)
	}
}
