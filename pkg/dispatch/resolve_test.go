package dispatch

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/options"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// resolving makes a RUNNING job RESOLVING as a termination report without a
// result would (P CHILD_REAPED, finished_without_result), readable from
// afterMs; edit, if given, changes the proof before it is journaled.
func (e *env) resolving(id int64, afterMs int64, edit ...func(*journal.TProof)) *job.Record {
	e.t.Helper()
	r := e.job(id)
	p := recordIdentity(r).proof(r.BackendID, job.ProofChildReaped)
	p.FinishedWithoutResult_, p.Message, p.ResolveAfterMs = boolPtr(true), strPtr("killed by the memory limit"), &afterMs
	for _, f := range edit {
		f(p)
	}
	resp := e.propose(raftfsm.CmdRecordProofBatch, &journal.TRecordProofBatch{NowMs: e.nowMs(), Proofs: []*journal.TProof{p}})
	if resp.Items[0].Code != journal.TApplyCode_OK {
		e.t.Fatalf("P finished for job %d: %v %s", id, resp.Items[0].Code, resp.Items[0].GetMessage())
	}
	return e.wantState(id, job.Resolving)
}

// resolveAnswer answers every resolve request with outcome and evidence.
func resolveAnswer(outcome wire.TLanceResolveOutcome, evidence, uuid string) func(context.Context, string, *wire.TResolveJobRequest) (*wire.TResolveJobResponse, error) {
	return func(context.Context, string, *wire.TResolveJobRequest) (*wire.TResolveJobResponse, error) {
		resp := &wire.TResolveJobResponse{Status: &wire.TStatus{StatusCode: wire.TStatusCode_OK}, Outcome: &outcome, Evidence: &evidence}
		if uuid != "" {
			resp.IndexUUID = &uuid
		}
		return resp, nil
	}
}

// resolveEnv: one backend, one job RESOLVING, readable now.
func resolveEnv(t *testing.T) (*env, *job.Record) {
	e := newEnv(t)
	b1 := e.addBackend("b1:9060", 1)
	id := e.admit(1)[0]
	e.markRunning(id, b1, 1, e.nowMs()+3_600_000, 3)
	r := e.resolving(id, e.nowMs())
	e.heartbeat()
	return e, r
}

// What the dataset proves is applied with the reason that says so.
func TestResolveOutcomes(t *testing.T) {
	cases := []struct {
		outcome wire.TLanceResolveOutcome
		state   job.MutationState
		code    job.ResultCode
		reason  job.CompletionReason
		msg     string
		refresh job.RefreshState
	}{
		{wire.TLanceResolveOutcome_COMMITTED, job.Committed, job.NativeOK, job.ReasonResolvedFromDataset,
			"v8 lists the index with uuid u-1", job.RefreshRequired},
		{wire.TLanceResolveOutcome_NOT_COMMITTED, job.NotCommitted, job.NoTrustedResult, job.ReasonResolvedFromDataset,
			"v8..v9 contiguous, none lists the index", job.RefreshNotRequired},
		{wire.TLanceResolveOutcome_UNKNOWN, job.Unknown, job.NoTrustedResult, job.ReasonNone,
			"no proof from the dataset: v8 pruned", job.RefreshNotRequired},
	}
	for _, tc := range cases {
		t.Run(tc.outcome.String(), func(t *testing.T) {
			e, r := resolveEnv(t)
			evidence := strings.TrimPrefix(tc.msg, msgNoDatasetProof)
			e.be.setResolve(resolveAnswer(tc.outcome, evidence, "11111111-1111-4111-8111-111111111111"))
			e.round()
			got := e.wantState(r.JobID, tc.state)
			if got.Result.Code != tc.code || got.Result.Reason != tc.reason || got.Result.Message != tc.msg || got.RefreshState != tc.refresh {
				t.Fatalf("result %s %s %q refresh %s", got.Result.Code, got.Result.Reason, got.Result.Message, got.RefreshState)
			}
			if tc.state == job.Committed && got.IndexUUID != "11111111-1111-4111-8111-111111111111" {
				t.Fatalf("index uuid %q", got.IndexUUID)
			}
			calls := e.be.resolved()
			if len(calls) != 1 {
				t.Fatalf("%d resolve calls", len(calls))
			}
			req := calls[0].req
			if req.DatasetURI != r.Locator || req.StorageOptions["aws_secret_access_key"] != canarySecret ||
				req.MutationType != wire.TLanceIndexMutationType_CREATE || req.IndexName != r.DisplayIndexName ||
				req.AdmittedDatasetVersion != 7 || req.GetTimeoutMs() <= 0 || !req.IsSetTrustExclusiveWriter() || req.JobID != r.JobID {
				t.Fatalf("resolve request %+v", req)
			}
			e.round()
			if len(e.be.resolved()) != 1 {
				t.Fatal("a resolved job was resolved again")
			}
		})
	}
}

// A job a snapshot restore held: for a CREATE, the dataset not listing the
// index with this invocation's uuid says nothing of another invocation of
// the job, which the restore could not rule out, so NOT_COMMITTED becomes
// UNKNOWN. A REPLACE's (or DROP's) evidence, the admitted index in every
// later version, covers any build: it stays NOT_COMMITTED.
func TestResolveHeldJobs(t *testing.T) {
	for _, tc := range []struct {
		name   string
		env    func(*testing.T) (*env, *job.Record)
		state  job.MutationState
		reason job.CompletionReason
		msg    string // in the result's message
	}{
		{"CREATE", resolveEnv, job.Unknown, job.ReasonNone, "another invocation"},
		{"REPLACE", resolvingReplace, job.NotCommitted, job.ReasonResolvedFromDataset, "none lists the index"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, r := tc.env(t)
			if n := e.restoreHeld(); n != 1 {
				t.Fatalf("%d jobs held", n)
			}
			e.be.setResolve(resolveAnswer(wire.TLanceResolveOutcome_NOT_COMMITTED, "v8..v9 contiguous, none lists the index", ""))
			e.round()
			got := e.wantState(r.JobID, tc.state)
			if got.Result.Reason != tc.reason || !strings.Contains(got.Result.Message, tc.msg) {
				t.Fatalf("held %s resolved: %s %q", tc.name, got.Result.Reason, got.Result.Message)
			}
		})
	}
}

// Nothing from the backend proves nothing: the job waits and is retried;
// past the execute deadline after resolve_after it is given up as UNKNOWN.
func TestResolveWaitsThenGivesUp(t *testing.T) {
	e, r := resolveEnv(t)
	answers := []func(context.Context, string, *wire.TResolveJobRequest) (*wire.TResolveJobResponse, error){
		func(context.Context, string, *wire.TResolveJobRequest) (*wire.TResolveJobResponse, error) {
			return &wire.TResolveJobResponse{Status: &wire.TStatus{StatusCode: wire.TStatusCode_NOT_IMPLEMENTED_ERROR}}, nil
		},
		func(_ context.Context, a string, _ *wire.TResolveJobRequest) (*wire.TResolveJobResponse, error) {
			return nil, bytesLeftErr(a)
		},
		func(context.Context, string, *wire.TResolveJobRequest) (*wire.TResolveJobResponse, error) {
			return &wire.TResolveJobResponse{Status: &wire.TStatus{StatusCode: wire.TStatusCode_OK}}, nil // no outcome
		},
	}
	mark := e.prop.count()
	for i, a := range answers {
		e.be.setResolve(a)
		e.round()
		if n := len(e.be.resolved()); n != i+1 {
			t.Fatalf("%d resolve calls after %d rounds", n, i+1)
		}
		e.wantState(r.JobID, job.Resolving)
	}
	if got := e.prop.TypesSince(mark); len(got) != 0 {
		t.Fatalf("answers that prove nothing journaled %v", got)
	}
	// No dispatchable backend: it waits too.
	e.be.setEpoch("b1:9060", 0)
	e.clock.Advance(4 * DefaultHeartbeatInterval)
	e.heartbeat()
	e.round()
	if n := len(e.be.resolved()); n != len(answers) {
		t.Fatal("a backend that is not alive was asked")
	}
	e.clock.Advance(time.Duration(options.Resolve(nil).ExecuteDeadlineSecond) * time.Second)
	e.round()
	got := e.wantState(r.JobID, job.Unknown)
	if got.Result.Code != job.NoTrustedResult || got.Result.Message != msgNoBackendRead {
		t.Fatalf("result %s %q", got.Result.Code, got.Result.Message)
	}
}

// Time alone gives nothing up: a job already past its give-up time when it
// is first seen (a clock jump, a long outage of the masters) is read from
// the dataset first; only failed tries and the time together end it UNKNOWN.
func TestResolveTriesBeforeGivingUp(t *testing.T) {
	e, r := resolveEnv(t)
	e.clock.Advance(2 * time.Duration(options.Resolve(nil).ExecuteDeadlineSecond) * time.Second)
	e.heartbeat()
	e.be.setResolve(func(context.Context, string, *wire.TResolveJobRequest) (*wire.TResolveJobResponse, error) {
		out := wire.TLanceResolveOutcome_NOT_COMMITTED
		ev := "none lists it"
		return &wire.TResolveJobResponse{Status: &wire.TStatus{StatusCode: wire.TStatusCode_OK}, Outcome: &out, Evidence: &ev}, nil
	})
	e.round()
	e.d.Wait()
	got := e.wantState(r.JobID, job.NotCommitted)
	if got.Result.Reason != job.ReasonResolvedFromDataset {
		t.Fatalf("result %s %s %q", got.Result.Code, got.Result.Reason, got.Result.Message)
	}
}

// A job is not read before its resolve_after_ms; a local dataset needs the
// local-file assertion and one registered backend.
func TestResolveWaitsForGraceAndLocalGate(t *testing.T) {
	e := newEnv(t)
	b1 := e.addBackend("b1:9060", 1)
	id := e.admit(1)[0]
	e.markRunning(id, b1, 1, e.nowMs()+3_600_000, 3)
	e.resolving(id, e.nowMs()+30_000)
	local := e.createCatalog("local", "/data/lake")
	lid := e.admitIn(local, "/data/lake", "items")
	e.markRunning(lid, b1, 1, e.nowMs()+3_600_000, 3)
	e.resolving(lid, e.nowMs())
	e.heartbeat()
	e.be.setResolve(resolveAnswer(wire.TLanceResolveOutcome_NOT_COMMITTED, "none lists it", ""))
	e.round()
	if n := len(e.be.resolved()); n != 0 {
		t.Fatalf("%d resolve calls: before the grace, and a local dataset without the assertion", n)
	}
	e.setOption(options.OptEnableLocalFileMutation, "true")
	e.round()
	if c := e.be.resolved(); len(c) != 1 || c[0].req.JobID != lid {
		t.Fatalf("resolve calls %v: the asserted local dataset is read at once", c)
	}
	e.clock.Advance(30 * time.Second)
	e.heartbeat() // still alive
	e.round()
	e.wantState(id, job.NotCommitted)
	e.wantState(lid, job.NotCommitted)
}

// RESOLVING jobs are not the deadline sweep's.
func TestDeadlineSweepLeavesResolving(t *testing.T) {
	e := newEnv(t)
	b1 := e.addBackend("b1:9060", 1)
	id := e.admit(1)[0]
	e.markRunning(id, b1, 1, e.nowMs()-1, 3) // past its deadline
	e.resolving(id, e.nowMs()+3_600_000)
	mark := e.prop.count()
	e.round()
	if got := e.prop.TypesSince(mark); len(got) != 0 || len(e.be.queried()) != 0 {
		t.Fatalf("journaled %v, queried %d", got, len(e.be.queried()))
	}
	e.wantState(id, job.Resolving)
}

// The epoch path (§13.3): a new process that delivered its outbox ends the
// old process's RUNNING jobs at once: RESOLVING, then read from the dataset.
func TestEpochGoneOutboxDeliveredResolves(t *testing.T) {
	e := newEnv(t)
	b1 := e.addBackend("b1:9060", 1)
	ids := e.admit(2)
	e.markRunning(ids[0], b1, 1, e.nowMs()+3_600_000, 3)
	e.markRunning(ids[1], b1, 1, e.nowMs()+3_600_000, 3)
	e.be.setResolve(resolveAnswer(wire.TLanceResolveOutcome_COMMITTED, "v8 lists it with uuid u-9", "99999999-9999-4999-8999-999999999999"))

	// A new process that has not delivered its outbox yet: only the slot.
	e.be.setEpoch("b1:9060", 2)
	e.heartbeat()
	e.round()
	for _, id := range ids {
		if r := e.wantState(id, job.Running); r.HoldsPossibleLiveSlot() || r.TerminationProof != job.ProofProcessEpochGone {
			t.Fatalf("job %d: slot %v proof %s", id, r.HoldsPossibleLiveSlot(), r.TerminationProof)
		}
	}
	// A round later, still undelivered: their results may be in the outbox,
	// so the jobs, their slots released, stay RUNNING.
	e.heartbeat()
	e.round()
	for _, id := range ids {
		e.wantState(id, job.Running)
	}
	// Delivered: both move to RESOLVING in one entry, readable after the grace.
	grace := time.Duration(options.Resolve(nil).ResolveGraceSecond) * time.Second
	e.be.setHeartbeat("b1:9060", func(r *wire.THeartbeatResponse) { r.OutboxDelivered = boolPtr(true) })
	e.heartbeat()
	mark := e.prop.count()
	e.round()
	wantTypes(t, e.prop.TypesSince(mark), raftfsm.CmdRecordProofBatch)
	for _, id := range ids {
		r := e.wantState(id, job.Resolving)
		if !strings.Contains(r.TerminationMessage, "epoch 1 → 2") || r.ResolveAfterMs != e.nowMs()+grace.Milliseconds() {
			t.Fatalf("job %d: message %q resolve after %d", id, r.TerminationMessage, r.ResolveAfterMs)
		}
	}
	e.clock.Advance(grace)
	e.heartbeat() // still alive
	e.round()
	for _, id := range ids {
		if r := e.wantState(id, job.Committed); r.Result.Reason != job.ReasonResolvedFromDataset || r.IndexUUID != "99999999-9999-4999-8999-999999999999" {
			t.Fatalf("job %d: reason %s uuid %q", id, r.Result.Reason, r.IndexUUID)
		}
	}
}

// A restart and a delivered outbox heard at once: one item per job.
func TestEpochGoneAndDeliveredInOneEntry(t *testing.T) {
	e := newEnv(t)
	b1 := e.addBackend("b1:9060", 1)
	id := e.admit(1)[0]
	e.markRunning(id, b1, 1, e.nowMs()+3_600_000, 3)
	e.be.setEpoch("b1:9060", 2)
	e.be.setHeartbeat("b1:9060", func(r *wire.THeartbeatResponse) { r.OutboxDelivered = boolPtr(true) })
	e.heartbeat()
	mark := e.prop.count()
	e.round()
	wantTypes(t, e.prop.TypesSince(mark), raftfsm.CmdRecordProofBatch)
	if p := decodeEntry(t, e.prop.since(mark)[0], journal.NewTRecordProofBatch()); len(p.Proofs) != 1 || !p.Proofs[0].GetFinishedWithoutResult_() {
		t.Fatalf("proofs %+v", p.Proofs)
	}
	if r := e.wantState(id, job.Resolving); r.HoldsPossibleLiveSlot() || r.TerminationProof != job.ProofProcessEpochGone {
		t.Fatalf("slot %v proof %s", r.HoldsPossibleLiveSlot(), r.TerminationProof)
	}
}

// Reconcile: FINISHED without a result, with a wire proof → RESOLVING with
// the cause.
func TestReconcileNoResultResolves(t *testing.T) {
	e, r := reconcileEnv(t)
	reaped := wire.TLanceIndexTerminationProof_CHILD_REAPED
	e.be.setQuery(queryAnswer(map[string]*wire.TInvocationStatus{r.InvocationID: {InvocationID: r.InvocationID,
		State: wire.TLanceInvocationState_FINISHED, NoResult_: boolPtr(true), TerminationProof: &reaped,
		SanitizedMessage: strPtr("killed by the memory limit"), IndexUUID: strPtr("33333333-3333-4333-8333-333333333333")}}))
	if err := e.d.ReconcileRunning(e.ctx); err != nil {
		t.Fatal(err)
	}
	got := e.wantState(r.JobID, job.Resolving)
	if got.HoldsPossibleLiveSlot() || got.TerminationProof != job.ProofChildReaped ||
		!strings.Contains(got.TerminationMessage, "killed by the memory limit") || got.IndexUUID != "33333333-3333-4333-8333-333333333333" {
		t.Fatalf("slot %v proof %s message %q uuid %q", got.HoldsPossibleLiveSlot(), got.TerminationProof, got.TerminationMessage, got.IndexUUID)
	}
}

// A resolve that proves nothing is retried on the next dispatchable
// backend in turn.
func TestResolveRotatesBackends(t *testing.T) {
	e := newEnv(t)
	b1 := e.addBackend("b1:9060", 1)
	e.addBackend("b2:9060", 1)
	id := e.admit(1)[0]
	e.markRunning(id, b1, 1, e.nowMs()+3_600_000, 3)
	e.resolving(id, e.nowMs())
	e.heartbeat()
	e.be.setResolve(func(_ context.Context, a string, _ *wire.TResolveJobRequest) (*wire.TResolveJobResponse, error) {
		return nil, notSentErr(a)
	})
	e.round()
	e.round()
	calls := e.be.resolved()
	if len(calls) != 2 || calls[0].addr == calls[1].addr {
		t.Fatalf("resolve calls %v: a retry goes to the next backend", calls)
	}
	e.wantState(id, job.Resolving)
}

// A deadline passing while the job's backend runs a new process that has
// not delivered its outbox yet proves nothing: that outbox may hold the
// result (a fault schedule saw NATIVE_OK held there while the job turned
// UNKNOWN). The job waits; once the outbox is delivered the epoch path
// decides it.
func TestDeadlineWaitsForTheNewProcessOutbox(t *testing.T) {
	e := newEnv(t)
	b1 := e.addBackend("b1:9060", 1)
	id := e.admit(1)[0]
	e.markRunning(id, b1, 1, e.nowMs()+1000, 3)
	e.be.setEpoch("b1:9060", 2)
	e.be.setHeartbeat("b1:9060", func(r *wire.THeartbeatResponse) { r.OutboxDelivered = boolPtr(false) })
	e.clock.Advance(time.Hour)
	e.heartbeat()
	e.round()
	e.d.Wait()
	e.wantState(id, job.Running)
	e.be.setHeartbeat("b1:9060", func(r *wire.THeartbeatResponse) { r.OutboxDelivered = boolPtr(true) })
	e.heartbeat()
	e.round()
	e.d.Wait()
	e.wantState(id, job.Resolving)
}

// A uuid of another shape is dropped, as on the report path; the proof and
// the move to RESOLVING still go in (the FSM refuses a whole item whose
// uuid is oversized).
func TestReconcileDropsAMalformedUUID(t *testing.T) {
	e, r := reconcileEnv(t)
	reaped := wire.TLanceIndexTerminationProof_CHILD_REAPED
	e.be.setQuery(queryAnswer(map[string]*wire.TInvocationStatus{r.InvocationID: {InvocationID: r.InvocationID,
		State: wire.TLanceInvocationState_FINISHED, NoResult_: boolPtr(true), TerminationProof: &reaped,
		IndexUUID: strPtr(strings.Repeat("u", 100))}}))
	if err := e.d.ReconcileRunning(e.ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.wantState(r.JobID, job.Resolving); got.IndexUUID != "" {
		t.Fatalf("uuid %q journaled", got.IndexUUID)
	}
}

// The deadline sweep's own query may be the first this term to meet the
// backend's new process (a new leader, no heartbeat heard yet): STALE_EPOCH.
// The worker's process is gone and the new one's outbox may still hold the
// result, so the deadline proves nothing: the job waits, and the epoch path
// decides once a heartbeat tells the epoch. (Fault seed 34210.)
// Once the backend is heard at an epoch that is not higher, STALE_EPOCH
// proves nothing either, and the sweep gives up as before.
func TestDeadlineSweepWaitsWhenItsQueryMeetsANewProcess(t *testing.T) {
	stale := func(string, *wire.TQueryInvocationsRequest) (*wire.TQueryInvocationsResponse, error) {
		return &wire.TQueryInvocationsResponse{Status: &wire.TStatus{StatusCode: wire.TStatusCode_STALE_EPOCH}}, nil
	}
	t.Run("not heard this term: waits for the epoch path", func(t *testing.T) {
		e := newEnv(t)
		b1 := e.addBackend("b1:9060", 1)
		id := e.admit(1)[0]
		e.markRunning(id, b1, 1, e.nowMs()+1000, 3)
		e.be.setQuery(stale)
		e.clock.Advance(time.Hour)
		e.round()
		e.d.Wait()
		e.wantState(id, job.Running)
		if len(e.be.queried()) == 0 {
			t.Fatal("the sweep did not ask the backend")
		}
		e.be.setEpoch("b1:9060", 2)
		e.be.setHeartbeat("b1:9060", func(r *wire.THeartbeatResponse) { r.OutboxDelivered = boolPtr(true) })
		e.heartbeat()
		e.round()
		e.d.Wait()
		e.wantState(id, job.Resolving)
	})
	t.Run("heard this term at a lower epoch: gives up", func(t *testing.T) {
		e := newEnv(t)
		b1 := e.addBackend("b1:9060", 1)
		id := e.admit(1)[0]
		e.markRunning(id, b1, 5, e.nowMs()+1000, 3)
		e.be.setEpoch("b1:9060", 4)
		e.be.setQuery(stale)
		e.heartbeat()
		e.clock.Advance(time.Hour)
		e.round()
		e.d.Wait()
		e.wantState(id, job.Unknown)
	})
}
