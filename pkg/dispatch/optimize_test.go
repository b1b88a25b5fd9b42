package dispatch

import (
	"strings"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/options"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// admitOptimize admits an OPTIMIZE of db.<table> on the default catalog.
func (e *env) admitOptimize(table string) int64 {
	e.t.Helper()
	loc, err := job.DatasetLocator(testRoot, "db", table)
	if err != nil {
		e.t.Fatal(err)
	}
	r := job.NewOptimize(e.catalogID, "db", table, loc, "policy:optimize")
	r.AdmittedDatasetVersion = 7
	resp := e.propose(raftfsm.CmdAdmit, &journal.TAdmitCommand{NowMs: e.nowMs(), Job: raftfsm.RecordToThrift(r)})
	if resp.Code != journal.TApplyCode_OK {
		e.t.Fatalf("admit OPTIMIZE: %v %s", resp.Code, resp.GetMessage())
	}
	return resp.GetID()
}

// The dispatch of an OPTIMIZE carries mutation_type OPTIMIZE and empty
// index fields, never the fence name.
func TestOptimizeDispatchCarriesNoIndexFields(t *testing.T) {
	e := newEnv(t)
	e.addBackend("b1:9060", 1)
	id := e.admitOptimize("t1")
	e.heartbeat()
	e.round()
	e.wantState(id, job.Running)
	sent := e.be.submitted()
	if len(sent) != 1 {
		t.Fatalf("%d sends", len(sent))
	}
	d := sent[0].d
	if d.MutationType != wire.TLanceIndexMutationType_OPTIMIZE || d.IndexName != "" || d.ColumnName != "" || d.IndexType != "" ||
		d.PropertiesJSON != nil || d.IfExists != nil || d.IfNotExists != nil || d.AdmittedDatasetVersion != 7 {
		t.Fatalf("dispatch %+v", d)
	}
	if strings.Contains(d.String(), job.OptimizeFenceName) {
		t.Fatal("the dispatch carries the fence name")
	}
}

// crashBackend makes b1:9060 a new process (epoch) that delivered its
// outbox without a result for the jobs of the old one.
func (e *env) crashBackend(epoch int64) {
	e.be.setEpoch("b1:9060", epoch)
	e.be.setHeartbeat("b1:9060", func(r *wire.THeartbeatResponse) { r.OutboxDelivered = boolPtr(true) })
	e.heartbeat()
}

// The fault matrix of a crashed OPTIMIZE on the epoch path: the worker's
// process is gone and the new one delivered its outbox. The OPTIMIZE is
// back to PENDING by that proof (its slot released in the same entry) and
// is dispatched again with a fresh invocation; once its attempts are used
// up it ends UNKNOWN NO_TRUSTED_RESULT, never RESOLVING.
func TestCrashedOptimizeIsDispatchedAgainThenEndsUnknown(t *testing.T) {
	e := newEnv(t)
	e.setOption(options.OptMaxDispatchAttempts, "3")
	b1 := e.addBackend("b1:9060", 1)
	id := e.admitOptimize("t1")
	e.heartbeat()
	e.round()
	first := e.wantState(id, job.Running)

	e.crashBackend(2)
	mark := e.prop.count()
	e.round()
	types := e.prop.TypesSince(mark)
	if len(types) < 1 || types[0] != raftfsm.CmdRecordProofBatch {
		t.Fatalf("entries %v", types)
	}
	proof := decodeEntry(t, e.prop.since(mark)[0], &journal.TRecordProofBatch{}).Proofs[0]
	if !proof.GetFinishedWithoutResult_() || !proof.GetReturnToPending() || proof.ResolveAfterMs != nil {
		t.Fatalf("proof %+v", proof)
	}
	// The same round dispatched it again, with a fresh invocation at the new epoch.
	second := e.wantState(id, job.Running)
	if second.DispatchAttempts != 1 || second.InvocationID == first.InvocationID || second.ProcessEpoch != 2 ||
		second.BackendID != b1 || !second.HoldsPossibleLiveSlot() || e.fsm.State().HeldSlots(b1) != 1 {
		t.Fatalf("second dispatch: %+v", second)
	}
	if n := len(e.be.submitted()); n != 2 {
		t.Fatalf("%d sends, want 2", n)
	}

	e.crashBackend(3)
	e.round()
	third := e.wantState(id, job.Running)
	if third.DispatchAttempts != 2 || third.ProcessEpoch != 3 {
		t.Fatalf("third dispatch: %+v", third)
	}

	e.crashBackend(4)
	e.round()
	got := e.wantState(id, job.Unknown)
	if got.Result.Code != job.NoTrustedResult || got.HoldsPossibleLiveSlot() || !got.Unresolved() || got.DispatchAttempts != 2 {
		t.Fatalf("attempts used up: %+v", got)
	}
	if n := len(e.be.submitted()); n != 3 {
		t.Fatalf("%d sends, want 3 (bounded by lance_index_job_max_dispatch_attempts)", n)
	}
	if len(e.fsm.State().ResolvingDue(1<<62, 0)) != 0 || len(e.be.resolved()) != 0 {
		t.Fatal("an OPTIMIZE was resolved from the dataset")
	}
}

// Reconcile: FINISHED without a result, with a termination proof, is the
// same proof of a dead worker.
func TestReconcileFinishedOptimizeWithoutResultReturnsToPending(t *testing.T) {
	e := newEnv(t)
	b1 := e.addBackend("b1:9060", 1)
	r := e.markRunning(e.admitOptimize("t1"), b1, 1, e.nowMs()+3_600_000, 3)
	reaped := wire.TLanceIndexTerminationProof_CHILD_REAPED
	e.be.setQuery(queryAnswer(map[string]*wire.TInvocationStatus{r.InvocationID: {InvocationID: r.InvocationID,
		State: wire.TLanceInvocationState_FINISHED, NoResult_: thrift.BoolPtr(true), TerminationProof: &reaped,
		SanitizedMessage: thrift.StringPtr("killed by the memory limit")}}))
	if err := e.d.ReconcileRunning(e.ctx); err != nil {
		t.Fatal(err)
	}
	got := e.wantState(r.JobID, job.Pending)
	if got.DispatchAttempts != 1 || got.HoldsPossibleLiveSlot() || !strings.Contains(got.TerminationMessage, "memory limit") {
		t.Fatalf("after reconcile: %+v", got)
	}
}

// Reconcile relays a stored NATIVE_OK report's result of an OPTIMIZE.
func TestReconcileRelaysOptimizeResult(t *testing.T) {
	e := newEnv(t)
	b1 := e.addBackend("b1:9060", 1)
	r := e.markRunning(e.admitOptimize("t1"), b1, 1, e.nowMs()+3_600_000, 3)
	st := finished(r, wire.TLanceIndexJobResultCode_NATIVE_OK, nil)
	st.Result_.DatasetVersion = thrift.Int64Ptr(9)
	st.Result_.OptimizedIndexes = []*wire.TOptimizedIndex{{Name: "vec",
		Before: &wire.TIndexCounts{UnindexedRows: thrift.Int64Ptr(5)}, After: &wire.TIndexCounts{UnindexedRows: thrift.Int64Ptr(0)}}}
	e.be.setQuery(queryAnswer(map[string]*wire.TInvocationStatus{r.InvocationID: st}))
	if err := e.d.ReconcileRunning(e.ctx); err != nil {
		t.Fatal(err)
	}
	got := e.wantState(r.JobID, job.Committed)
	if ixs := job.DecodeOptimized(got.OptimizedIndexes); got.ResultDatasetVersion != 9 || len(ixs) != 1 || ixs[0].Before.UnindexedRows != 5 {
		t.Fatalf("result v%d %q", got.ResultDatasetVersion, got.OptimizedIndexes)
	}
}

// A deadline without proof still proves nothing: UNKNOWN, slot kept, not
// PENDING.
func TestOptimizeDeadlineProvesNothing(t *testing.T) {
	e := newEnv(t)
	b1 := e.addBackend("b1:9060", 1)
	id := e.markRunning(e.admitOptimize("t1"), b1, 1, e.nowMs()-1, 3).JobID
	e.heartbeat()
	e.round()
	got := e.wantState(id, job.Unknown)
	if !got.HoldsPossibleLiveSlot() || got.DispatchAttempts != 0 {
		t.Fatalf("after the deadline: %+v", got)
	}
}

// The refresh a COMMITTED OPTIMIZE owes says OPTIMIZE, with no index name.
func TestOptimizeRefreshRequestSaysOptimize(t *testing.T) {
	f := rfNew(t)
	cat := f.catalog("lake", raftfsm.RefreshWebhook, "https://hook.example/r")
	loc, err := job.DatasetLocator(rfRoot, "db", "t1")
	if err != nil {
		t.Fatal(err)
	}
	id := f.apply(raftfsm.CmdAdmit, &journal.TAdmitCommand{NowMs: f.nowMs(),
		Job: raftfsm.RecordToThrift(job.NewOptimize(cat, "db", "t1", loc, "alice"))}).GetID()
	f.finish(job.NativeOK, false, id)
	rec := &rfRefresher{}
	rfStep(t, f.driver(rec, nil))
	calls := rec.called()
	if len(calls) != 1 || calls[0].MutationType != "OPTIMIZE" || calls[0].IndexName != "" || calls[0].Outcome != "COMMITTED" {
		t.Fatalf("refresh requests %+v", calls)
	}
}
