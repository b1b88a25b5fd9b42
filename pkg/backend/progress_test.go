package backend

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/backend/frame"
	"github.com/lancemaster/lancemaster/pkg/backend/outbox"
	"github.com/lancemaster/lancemaster/pkg/backend/supervisor"
)

const testUUID = "0b5d6f9e-3c1a-4e2b-9f7d-1a2b3c4d5e6f"

// The agent reads both announcement forms from a build's stderr (the
// parsing itself is frame.ParseProgressLine's, tested there).
func TestBothAnnouncementFormsAreRead(t *testing.T) {
	for name, line := range map[string]string{
		"builder": `lancemaster-progress {"index_uuid":"` + testUUID + `","phase":"train"}`,
		"lance":   `[2026-12-01T20:00:00Z DEBUG lance::index::vector] build_vector_index; name="vec_idx" uuid=` + testUUID + ` column="vector"`,
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, nil)
			h.runner.setScript(func(ctx context.Context, req *frame.Request) Outcome {
				supervisor.StderrLines(ctx)([]byte(line))
				return Outcome{Proof: ProofChildReaped, Failure: "exit status 1", ExitCode: 1, PID: 3}
			})
			h.ready(1)
			h.submit(h.dispatch("inv", 1))
			st := h.waitState(1, "inv", wire.TLanceInvocationState_FINISHED)
			if st.GetIndexUUID() != testUUID || !st.GetNoResult_() || st.GetSanitizedMessage() != "exited with status 1 without a result" {
				t.Fatalf("query %+v", st)
			}
		})
	}
}

// The worker's announcement is stored durably before the build ends: an
// agent killed with -9 mid-build (its outbox file copied at that moment)
// leaves a progress entry that the next process delivers with the old
// epoch. Query answers the uuid while the build runs.
func TestProgressSurvivesAKilledAgent(t *testing.T) {
	cfg := testConfig(t)
	cfg.Masters, cfg.ShutdownTimeout = []string{closedAddr(t)}, 50*time.Millisecond
	h1 := startHarness(t, cfg, newFakeRunner(), nil)
	announced := make(chan struct{})
	h1.runner.setScript(func(ctx context.Context, req *frame.Request) Outcome {
		lines := supervisor.StderrLines(ctx)
		lines([]byte("some other line"))
		lines([]byte(`lancemaster-progress {"index_uuid":"` + testUUID + `","phase":"train"}`))
		lines([]byte(`lancemaster-progress {"index_uuid":"11111111-2222-3333-4444-555555555555"}`)) // a second uuid: ignored
		close(announced)
		<-ctx.Done()
		return Outcome{Proof: ProofChildReaped, Failure: "canceled", ExitCode: -1}
	})
	h1.ready(1)
	h1.submit(h1.dispatch("inv", 1))
	<-announced
	if st := h1.state(1, "inv"); st.State != wire.TLanceInvocationState_RUNNING || st.GetIndexUUID() != testUUID {
		t.Fatalf("query while running: %+v", st)
	}
	if ids := outboxKindIDs(t, h1.a, outbox.KindProgress); len(ids) != 1 || ids[0] != "inv" {
		t.Fatalf("progress entries %v", ids)
	}
	if h1.logs.FilterMessageSnippet("second index uuid").Len() != 1 {
		t.Error("the conflicting uuid was not logged")
	}
	// kill -9: what is on disk now is all that survives.
	dir2 := t.TempDir()
	copyFile(t, h1.a.OutboxPath(), filepath.Join(dir2, OutboxFile))
	oldEpoch := h1.a.Epoch()

	m := newFakeMaster(t)
	cfg2 := testConfig(t)
	cfg2.DataDir, cfg2.Masters = dir2, []string{m.Addr()}
	h2 := startHarness(t, cfg2, newFakeRunner(), nil)
	eventually(t, func() bool {
		return len(m.progressReports()) == 1 && len(outboxKindIDs(t, h2.a, outbox.KindProgress)) == 0
	},
		"the progress report was not delivered after the restart")
	p := m.progressReports()[0]
	if p.GetIndexUUID() != testUUID || p.GetPhase() != "train" || p.BeProcessEpoch != oldEpoch || p.GetInvocationSecret() != testSecret ||
		p.InvocationID != "inv" || p.JobID != 11 || p.DispatchRevision != 2 {
		t.Fatalf("progress %+v", p)
	}
	if !h2.heartbeat(1).GetOutboxDelivered() {
		t.Fatal("outbox_delivered false after the start's entries were delivered")
	}
}

// Once the invocation's report is delivered, its progress entry is
// dropped even if no master took it (the report says more).
func TestProgressDroppedOnceTheReportIsDelivered(t *testing.T) {
	m := newFakeMaster(t)
	m.progressAnswer = wire.TStatusCode_SERVICE_UNAVAILABLE
	h := newHarness(t, func(c *Config) { c.Masters = []string{m.Addr()} })
	h.runner.setScript(func(ctx context.Context, req *frame.Request) Outcome {
		supervisor.StderrLines(ctx)([]byte(`lancemaster-progress {"index_uuid":"` + testUUID + `"}`))
		return Outcome{Proof: ProofChildReaped, Result: &frame.Result{Protocol: 1, Mode: frame.ModeBuild, ResultCode: "NATIVE_OK"}}
	})
	h.ready(1)
	h.submit(h.dispatch("inv", 1))
	eventually(t, func() bool {
		results, _ := m.received()
		return len(results) == 1 && len(outboxKindIDs(t, h.a, outbox.KindProgress)) == 0 && len(outboxIDs(t, h.a)) == 0
	}, "the progress entry outlived the delivered report")
	h.a.dlv.mu.Lock()
	defer h.a.dlv.mu.Unlock()
	if len(h.a.dlv.loops) != 0 {
		t.Fatalf("%d delivery loops left", len(h.a.dlv.loops))
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}

// A newer announcement replaces the older one, in the outbox and in the
// delivery loop: the master ends up with the latest, and the entry goes
// once that one is delivered.
func TestNewerProgressReplacesTheOlder(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Masters = []string{closedAddr(t)} })
	announced := make(chan struct{})
	h.runner.hold()
	h.runner.setScript(func(ctx context.Context, req *frame.Request) Outcome {
		return Outcome{Proof: ProofChildReaped, Result: &frame.Result{Protocol: 1, Mode: frame.ModeBuild, ResultCode: "NATIVE_OK"}}
	})
	// The script runs after the hold; announce from a wrapper around Run.
	h.runner.mu.Lock()
	h.runner.onStart = func(ctx context.Context) {
		lines := supervisor.StderrLines(ctx)
		lines([]byte(`lancemaster-progress {"index_uuid":"` + testUUID + `","phase":"train"}`))
		lines([]byte(`lancemaster-progress {"phase":"write"}`))
		close(announced)
	}
	h.runner.mu.Unlock()
	h.ready(1)
	h.submit(h.dispatch("inv", 1))
	<-announced
	pending, _, err := h.a.outbox.Pending()
	if err != nil || len(pending) != 1 || pending[0].Kind != outbox.KindProgress || pending[0].Progress.GetPhase() != "write" ||
		pending[0].Progress.GetIndexUUID() != testUUID {
		t.Fatalf("outbox %+v, %v", pending, err)
	}
	m := newFakeMaster(t)
	h.heartbeat(1, m.Addr())
	eventually(t, func() bool {
		p := m.progressReports()
		return len(p) > 0 && p[len(p)-1].GetPhase() == "write" && len(outboxKindIDs(t, h.a, outbox.KindProgress)) == 0
	}, "the latest progress was not delivered")
	if p := m.progressReports(); p[len(p)-1].GetIndexUUID() != testUUID {
		t.Fatalf("the latest progress lost the uuid: %+v", p[len(p)-1])
	}
	h.runner.release()
	eventually(t, func() bool { results, _ := m.received(); return len(results) == 1 }, "no result")
}
