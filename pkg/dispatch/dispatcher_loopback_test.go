package dispatch

import (
	"context"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/rpc"
	"github.com/lancemaster/lancemaster/pkg/rpc/rpctest"
)

// Real Thrift over loopback: heartbeats, one dispatch per job carrying the
// term and the storage secret, never resent, and reconcile.
func TestLoopbackDispatchOnce(t *testing.T) {
	fake := rpctest.NewFakeBackend(t)
	cfg := rpc.DefaultConfig()
	cfg.ConnectTimeout, cfg.SocketTimeout = 2*time.Second, 5*time.Second
	e := newEnvWithClient(t, rpc.NewThriftBackendClient(cfg), func(d *Deps) { d.SendTimeout = 5 * time.Second })
	e.addBackend(fake.Addr(), 0)
	e.heartbeat()
	hb := fake.Heartbeats()
	if len(hb) != 1 || hb[0].GetLeaderTerm() != testTerm || len(hb[0].MasterAddresses) != 2 {
		t.Fatalf("heartbeats %+v", hb)
	}
	ids := e.admit(2)
	e.round()
	e.round()
	ds := fake.Dispatches()
	if len(ds) != 2 {
		t.Fatalf("%d dispatches, want 2", len(ds))
	}
	for _, d := range ds {
		if d.GetLeaderTerm() != testTerm || d.StorageOptions["aws_secret_access_key"] != canarySecret || d.BeProcessEpoch != fake.Epoch() {
			t.Fatalf("dispatch term %d epoch %d options carried %v", d.GetLeaderTerm(), d.BeProcessEpoch, d.StorageOptions["aws_secret_access_key"] == canarySecret)
		}
	}
	for inv, n := range fake.InvocationCounts() {
		if n != 1 {
			t.Fatalf("invocation %s received %d times", inv, n)
		}
	}
	first := e.wantState(ids[0], job.Running)
	e.wantState(ids[1], job.Running)

	// Reconcile over the wire: the first finished, the second is queued.
	code := wire.TLanceIndexJobResultCode_NATIVE_OK
	fake.SetInvocation(&wire.TInvocationStatus{InvocationID: first.InvocationID, State: wire.TLanceInvocationState_FINISHED,
		Result_: &wire.TLanceIndexJobReport{JobID: first.JobID, DispatchRevision: first.DispatchRevision,
			InvocationID: first.InvocationID, BeProcessEpoch: first.ProcessEpoch, ResultCode: &code,
			InvocationSecret: &first.InvocationSecret}})
	ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
	defer cancel()
	if err := e.d.ReconcileRunning(ctx); err != nil {
		t.Fatal(err)
	}
	e.wantState(ids[0], job.Committed)
	e.wantState(ids[1], job.Running)
	if fake.HighestLeaderTerm() != testTerm {
		t.Fatalf("the backend saw term %d", fake.HighestLeaderTerm())
	}
}

// A dispatch the fake backend drops after reading it: UNKNOWN, slot kept,
// never resent.
func TestLoopbackAmbiguousSend(t *testing.T) {
	fake := rpctest.NewFakeBackend(t)
	fake.SetSubmitHook(func(context.Context, *wire.TLanceIndexJobDispatch) (*wire.TStatus, error) {
		return nil, rpctest.ErrDropConnection
	})
	cfg := rpc.DefaultConfig()
	cfg.ConnectTimeout, cfg.SocketTimeout = 2*time.Second, 5*time.Second
	e := newEnvWithClient(t, rpc.NewThriftBackendClient(cfg), func(d *Deps) { d.SendTimeout = 5 * time.Second })
	b := e.addBackend(fake.Addr(), 0)
	e.heartbeat()
	id := e.admit(1)[0]
	e.round()
	e.round()
	if r := e.wantState(id, job.Unknown); !r.HoldsPossibleLiveSlot() || e.fsm.State().HeldSlots(b) != 1 {
		t.Fatal("an ambiguous send must keep the slot")
	}
	if n := len(fake.Dispatches()); n != 1 {
		t.Fatalf("%d dispatches, want exactly 1", n)
	}
}
