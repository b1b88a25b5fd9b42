package backend

import (
	"testing"

	"github.com/lancemaster/lancemaster/gen-go/wire"
)

// A build finished while no master was reachable; the agent stops; a new
// agent on the same data dir (a new process epoch) delivers the stored
// report with the OLD epoch, the identity the master journaled.
func TestOutboxRestartDelivers(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t)
	cfg.DataDir = dir
	cfg.Masters = []string{closedAddr(t)}
	h1 := startHarness(t, cfg, newFakeRunner(), nil)
	h1.ready(1)
	h1.submit(h1.dispatch("inv", 1))
	h1.waitState(1, "inv", wire.TLanceInvocationState_FINISHED)
	oldEpoch := h1.a.Epoch()
	if err := h1.a.Close(); err != nil {
		t.Fatal(err)
	}

	m := newFakeMaster(t)
	cfg2 := testConfig(t)
	cfg2.DataDir = dir
	cfg2.Masters = []string{m.Addr()}
	h2 := startHarness(t, cfg2, newFakeRunner(), nil)
	if h2.a.Epoch() == oldEpoch {
		t.Fatal("the restarted agent kept the old epoch")
	}
	eventually(t, func() bool { return m.callCount() == 1 && len(outboxIDs(t, h2.a)) == 0 }, "the stored report was not delivered after the restart")
	results, _ := m.received()
	r := results[0]
	if r.BeProcessEpoch != oldEpoch || r.GetResultCode() != wire.TLanceIndexJobResultCode_NATIVE_OK ||
		r.GetInvocationSecret() != testSecret || r.InvocationID != "inv" || r.JobID != 11 {
		t.Fatalf("delivered after restart: %+v", r)
	}
	// The new process answers for its own epoch only.
	if resp := h2.query(1, oldEpoch, "inv"); resp.Status.StatusCode != wire.TStatusCode_STALE_EPOCH {
		t.Fatalf("query of the old epoch: %s, want STALE_EPOCH", resp.Status.StatusCode)
	}
	if h2.runner.runCount("inv") != 0 {
		t.Fatal("the restarted agent ran the build again")
	}
}
