package backend

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/backend/frame"
	"github.com/lancemaster/lancemaster/pkg/backend/supervisor"
	"github.com/lancemaster/lancemaster/pkg/rpc"
)

func TestWorkerCause(t *testing.T) {
	for _, tc := range []struct {
		out  Outcome
		want string
	}{
		{Outcome{OOMKilled: true, Signal: "SIGKILL", ExitCode: -1, Failure: "oom-killed", PID: 7}, "killed by the memory limit (cgroup oom_kill)"},
		{Outcome{Signal: "SIGKILL", ExitCode: -1, Failure: "signal SIGKILL", PID: 7}, "exited with signal 9 (SIGKILL)"},
		{Outcome{Signal: "SIGSEGV", ExitCode: -1, Failure: "signal SIGSEGV", PID: 7}, "exited with signal 11 (SIGSEGV)"},
		{Outcome{ExitCode: 3, Failure: "exit status 3", PID: 7}, "exited with status 3 without a result"},
		{Outcome{Failure: "deadline", Signal: "SIGTERM", ExitCode: -1, PID: 7}, "killed at the deadline"},
		{Outcome{Failure: "deadline; worker did not exit after SIGKILL", ExitCode: -1, PID: 7}, "killed at the deadline; worker did not exit after SIGKILL"},
		{Outcome{Failure: "canceled", Signal: "SIGTERM", ExitCode: -1, PID: 7}, "killed: the backend shut down"},
		{Outcome{Failure: "malformed result frame", PID: 7}, "exited with status 0 without a result (malformed result frame)"},
		{Outcome{Failure: "no result frame", PID: 7}, "exited with status 0 without a result (no result frame)"},
		{Outcome{ExitCode: -1}, "ended without a result"},
	} {
		if got := workerCause(tc.out); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.out, got, tc.want)
		}
	}
}

// A worker OOM-killed by its cgroup: the termination report carries the
// cause and no_result, so the master ends the job now instead of at its
// deadline; query answers the same.
func TestOOMKilledWorkerReportsItsCause(t *testing.T) {
	m := newFakeMaster(t)
	h := newHarness(t, func(c *Config) { c.Masters = []string{m.Addr()} })
	h.runner.setScript(func(context.Context, *frame.Request) Outcome {
		return Outcome{Proof: ProofChildReaped, OOMKilled: true, Signal: "SIGKILL", ExitCode: -1, Failure: "oom-killed", PID: 9}
	})
	h.ready(1)
	h.submit(h.dispatch("inv", 1))
	eventually(t, func() bool { return m.callCount() == 1 }, "no report")
	results, terms := m.received()
	if len(results) != 0 || len(terms) != 1 {
		t.Fatalf("results %d terminations %d", len(results), len(terms))
	}
	const cause = "killed by the memory limit (cgroup oom_kill)"
	if tr := terms[0]; !tr.GetNoResult_() || tr.GetSanitizedMessage() != cause || tr.Proof != wire.TLanceIndexTerminationProof_CHILD_REAPED {
		t.Fatalf("termination %+v", tr)
	}
	st := h.state(1, "inv")
	if st.State != wire.TLanceInvocationState_FINISHED || !st.GetNoResult_() || st.GetSanitizedMessage() != cause ||
		st.GetTerminationProof() != wire.TLanceIndexTerminationProof_CHILD_REAPED {
		t.Fatalf("query %+v", st)
	}
}

// A trusted NATIVE_OK carries no no_result, and the index uuid and dataset
// version the builder verified (report fields 12, 13).
func TestTrustedResultCarriesTheVerifiedIndex(t *testing.T) {
	m := newFakeMaster(t)
	h := newHarness(t, func(c *Config) { c.Masters = []string{m.Addr()} })
	h.runner.setScript(func(context.Context, *frame.Request) Outcome {
		return Outcome{Proof: ProofChildReaped, Result: &frame.Result{Protocol: 1, Mode: frame.ModeBuild, ResultCode: "NATIVE_OK",
			NewDatasetVersion: 9, DatasetVersion: 9, IndexUUID: testUUID}}
	})
	h.ready(1)
	h.submit(h.dispatch("inv", 1))
	st := h.waitState(1, "inv", wire.TLanceInvocationState_FINISHED)
	if st.NoResult_ != nil || st.SanitizedMessage != nil || st.Result_.GetDatasetVersion() != 9 || st.Result_.GetIndexUUID() != testUUID ||
		st.GetIndexUUID() != testUUID {
		t.Fatalf("query %+v / %+v", st, st.Result_)
	}
	eventually(t, func() bool { return m.callCount() == 1 }, "no report")
	results, _ := m.received()
	if r := results[0]; r.GetIndexUUID() != testUUID || r.GetDatasetVersion() != 9 {
		t.Fatalf("report %+v", r)
	}
}

// End to end through the real supervisor: a worker announces its index on
// stderr, then is killed by SIGKILL. The master gets the progress report
// (the uuid), then a termination report with the cause, no_result and the
// uuid; query answers them too.
func TestKilledWorkerThroughTheSupervisor(t *testing.T) {
	const uuid = "0b5d6f9e-3c1a-4e2b-9f7d-1a2b3c4d5e6f"
	sup, err := supervisor.New(supervisor.Config{
		Command: []string{"/bin/sh", "-c", `echo 'lancemaster-progress {"index_uuid":"0b5d6f9e-3c1a-4e2b-9f7d-1a2b3c4d5e6f","phase":"train"}' >&2; ` +
			`echo 'noise uuid=11111111-2222-3333-4444-555555555555' >&2; kill -9 $$`},
		Env: []string{"PATH=/usr/bin:/bin"}, Isolation: supervisor.IsolationBestEffort, CgroupParent: t.TempDir(),
		KillGrace: 200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	m := newFakeMaster(t)
	cfg := testConfig(t)
	cfg.Masters = []string{m.Addr()}
	core, logs := observer.New(zap.DebugLevel)
	cfg.Logger = zap.New(core)
	a, err := New(cfg, sup)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	h := &harness{t: t, a: a, logs: logs, client: rpc.NewThriftBackendClient(rpc.DefaultConfig()), cfg: cfg}
	h.ready(1)
	if got := h.submit(h.dispatch("inv", 1)); got != wire.TStatusCode_OK {
		t.Fatal(got)
	}
	eventually(t, func() bool { _, terms := m.received(); return len(terms) == 1 }, "no termination report")
	_, terms := m.received()
	tr := terms[0]
	if !tr.GetNoResult_() || tr.GetSanitizedMessage() != "exited with signal 9 (SIGKILL)" || tr.GetIndexUUID() != uuid ||
		tr.Proof != wire.TLanceIndexTerminationProof_CHILD_REAPED || tr.GetInvocationSecret() != testSecret {
		t.Fatalf("termination %+v", tr)
	}
	st := h.state(1, "inv")
	if !st.GetNoResult_() || st.GetIndexUUID() != uuid || !strings.Contains(st.GetSanitizedMessage(), "signal 9") {
		t.Fatalf("query %+v", st)
	}
	// The progress report went before (or was dropped once the termination
	// report was delivered: it says more); either way none is left.
	eventually(t, func() bool {
		a.dlv.mu.Lock()
		loops := len(a.dlv.loops)
		a.dlv.mu.Unlock()
		n, _ := a.outbox.Len()
		return loops == 0 && n == 0
	}, "deliveries or outbox entries left")
	for _, p := range m.progressReports() {
		if p.GetIndexUUID() != uuid || p.GetInvocationSecret() != testSecret || p.BeProcessEpoch != a.Epoch() {
			t.Fatalf("progress %+v", p)
		}
	}
}

// A worker the kernel OOM-kills inside its cgroup (memory.events oom_kill),
// through the real supervisor: the termination report says so, with
// no_result. Skipped where this host gives no cgroup memory limit.
func TestOOMKilledWorkerThroughTheSupervisor(t *testing.T) {
	sup, err := supervisor.New(supervisor.Config{
		Command: []string{"/bin/sh", "-c", `x=$(head -c 400000000 /dev/zero | tr '\0' a); echo "$x" | wc -c`},
		Env:     []string{"PATH=/usr/bin:/bin"}, Isolation: supervisor.IsolationRequired, MemoryLimitBytes: 48 << 20,
		KillGrace: 200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !sup.Verified() || sup.Mode() == supervisor.ModeProcessGroup {
		t.Skipf("no cgroup memory limit on this host: %s", sup.Reason())
	}
	m := newFakeMaster(t)
	cfg := testConfig(t)
	cfg.Masters = []string{m.Addr()}
	a, err := New(cfg, sup)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	h := &harness{t: t, a: a, client: rpc.NewThriftBackendClient(rpc.DefaultConfig()), cfg: cfg}
	h.ready(1)
	h.submit(h.dispatch("inv", 1))
	eventually(t, func() bool { _, terms := m.received(); return len(terms) == 1 }, "no termination report")
	_, terms := m.received()
	if tr := terms[0]; !tr.GetNoResult_() || tr.GetSanitizedMessage() != "killed by the memory limit (cgroup oom_kill)" ||
		tr.Proof != wire.TLanceIndexTerminationProof_CHILD_REAPED {
		t.Fatalf("termination %+v", tr)
	}
}
