package dispatch

import (
	"errors"
	"strings"
	"testing"

	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// reconcileEnv has one backend at epoch 1 and one job RUNNING there,
// dispatched by the leader of term 3, deadline ahead.
func reconcileEnv(t *testing.T) (*env, *job.Record) {
	e := newEnv(t)
	b1 := e.addBackend("b1:9060", 1)
	id := e.admit(1)[0]
	return e, e.markRunning(id, b1, 1, e.nowMs()+3_600_000, 3)
}

func TestReconcileFinishedCommits(t *testing.T) {
	e, r := reconcileEnv(t)
	reaped := wire.TLanceIndexTerminationProof_CHILD_REAPED
	e.be.setQuery(queryAnswer(map[string]*wire.TInvocationStatus{
		r.InvocationID: finished(r, wire.TLanceIndexJobResultCode_NATIVE_OK, &reaped)}))
	mark := e.prop.count()
	if err := e.d.ReconcileRunning(e.ctx); err != nil {
		t.Fatal(err)
	}
	// The proof is applied on its own, first; then the result.
	wantTypes(t, e.prop.TypesSince(mark), raftfsm.CmdRecordProofBatch, raftfsm.CmdCompleteBatch)
	got := e.wantState(r.JobID, job.Committed)
	if got.RefreshState != job.RefreshRequired || got.Result.Message != "built" {
		t.Fatalf("refresh %s message %q", got.RefreshState, got.Result.Message)
	}
	if got.HoldsPossibleLiveSlot() || got.TerminationProof != job.ProofChildReaped {
		t.Fatalf("slot %v proof %s", got.HoldsPossibleLiveSlot(), got.TerminationProof)
	}
	q := e.be.queried()
	if len(q) != 1 || q[0].LeaderTerm != testTerm || q[0].BeProcessEpoch != 1 || q[0].InvocationIds[0] != r.InvocationID {
		t.Fatalf("query %+v: must carry the current term and the job's epoch", q)
	}
}

// UNKNOWN_INVOCATION asked after the term fence, at the job's epoch, proves
// an older leader's dispatch was never accepted: M2″ back to PENDING, slot
// released with NOT_ENQUEUED (§13.2).
func TestReconcileUnknownInvocationReturnsToPending(t *testing.T) {
	e, r := reconcileEnv(t)
	e.be.setQuery(queryAnswer(nil))
	if err := e.d.ReconcileRunning(e.ctx); err != nil {
		t.Fatal(err)
	}
	got := e.wantState(r.JobID, job.Pending)
	if got.HoldsPossibleLiveSlot() || got.TerminationProof != job.ProofNotEnqueued || got.DispatchAttempts != 1 {
		t.Fatalf("slot %v proof %s attempts %d", got.HoldsPossibleLiveSlot(), got.TerminationProof, got.DispatchAttempts)
	}
}

// Answers that prove nothing leave the job RUNNING and journal nothing.
func TestReconcileWaits(t *testing.T) {
	badCode := wire.TLanceIndexJobResultCode(99)
	cases := map[string]func(r *job.Record) func(string, *wire.TQueryInvocationsRequest) (*wire.TQueryInvocationsResponse, error){
		"RUNNING": func(r *job.Record) func(string, *wire.TQueryInvocationsRequest) (*wire.TQueryInvocationsResponse, error) {
			return queryAnswer(map[string]*wire.TInvocationStatus{r.InvocationID: {InvocationID: r.InvocationID, State: wire.TLanceInvocationState_RUNNING}})
		},
		"QUEUED": func(r *job.Record) func(string, *wire.TQueryInvocationsRequest) (*wire.TQueryInvocationsResponse, error) {
			return queryAnswer(map[string]*wire.TInvocationStatus{r.InvocationID: {InvocationID: r.InvocationID, State: wire.TLanceInvocationState_QUEUED}})
		},
		"error": func(*job.Record) func(string, *wire.TQueryInvocationsRequest) (*wire.TQueryInvocationsResponse, error) {
			return func(a string, _ *wire.TQueryInvocationsRequest) (*wire.TQueryInvocationsResponse, error) {
				return nil, bytesLeftErr(a)
			}
		},
		"STALE_EPOCH": func(*job.Record) func(string, *wire.TQueryInvocationsRequest) (*wire.TQueryInvocationsResponse, error) {
			return func(string, *wire.TQueryInvocationsRequest) (*wire.TQueryInvocationsResponse, error) {
				return &wire.TQueryInvocationsResponse{Status: &wire.TStatus{StatusCode: wire.TStatusCode_STALE_EPOCH}}, nil
			}
		},
		"no answer for the id": func(*job.Record) func(string, *wire.TQueryInvocationsRequest) (*wire.TQueryInvocationsResponse, error) {
			return func(string, *wire.TQueryInvocationsRequest) (*wire.TQueryInvocationsResponse, error) {
				return &wire.TQueryInvocationsResponse{Status: &wire.TStatus{StatusCode: wire.TStatusCode_OK}}, nil
			}
		},
		"FINISHED with a code outside 1..12": func(r *job.Record) func(string, *wire.TQueryInvocationsRequest) (*wire.TQueryInvocationsResponse, error) {
			return queryAnswer(map[string]*wire.TInvocationStatus{r.InvocationID: finished(r, badCode, nil)})
		},
		"FINISHED naming another dispatch": func(r *job.Record) func(string, *wire.TQueryInvocationsRequest) (*wire.TQueryInvocationsResponse, error) {
			st := finished(r, wire.TLanceIndexJobResultCode_NATIVE_OK, nil)
			st.Result_.DispatchRevision++
			return queryAnswer(map[string]*wire.TInvocationStatus{r.InvocationID: st})
		},
		"FINISHED with a wrong secret": func(r *job.Record) func(string, *wire.TQueryInvocationsRequest) (*wire.TQueryInvocationsResponse, error) {
			st := finished(r, wire.TLanceIndexJobResultCode_NATIVE_OK, nil)
			st.Result_.InvocationSecret = strPtr("forged")
			return queryAnswer(map[string]*wire.TInvocationStatus{r.InvocationID: st})
		},
		"FINISHED without a secret": func(r *job.Record) func(string, *wire.TQueryInvocationsRequest) (*wire.TQueryInvocationsResponse, error) {
			st := finished(r, wire.TLanceIndexJobResultCode_NATIVE_OK, nil)
			st.Result_.InvocationSecret = nil
			return queryAnswer(map[string]*wire.TInvocationStatus{r.InvocationID: st})
		},
		"FINISHED with the leader's completion reason": func(r *job.Record) func(string, *wire.TQueryInvocationsRequest) (*wire.TQueryInvocationsResponse, error) {
			st := finished(r, wire.TLanceIndexJobResultCode_NATIVE_OK, nil)
			reason := wire.TLanceIndexCompletionReason(3) // RESOLVED_FROM_DATASET is the leader's only
			st.Result_.CompletionReason = &reason
			return queryAnswer(map[string]*wire.TInvocationStatus{r.InvocationID: st})
		},
		"FINISHED with an oversized message": func(r *job.Record) func(string, *wire.TQueryInvocationsRequest) (*wire.TQueryInvocationsResponse, error) {
			st := finished(r, wire.TLanceIndexJobResultCode_NATIVE_OK, nil)
			st.Result_.SanitizedMessage = strPtr(strings.Repeat("x", job.MaxMessageBytes+1))
			return queryAnswer(map[string]*wire.TInvocationStatus{r.InvocationID: st})
		},
		"FINISHED with a message that is not UTF-8": func(r *job.Record) func(string, *wire.TQueryInvocationsRequest) (*wire.TQueryInvocationsResponse, error) {
			st := finished(r, wire.TLanceIndexJobResultCode_NATIVE_OK, nil)
			st.Result_.SanitizedMessage = strPtr("bad \xff byte")
			return queryAnswer(map[string]*wire.TInvocationStatus{r.InvocationID: st})
		},
		"FINISHED without a result and without a proof": func(r *job.Record) func(string, *wire.TQueryInvocationsRequest) (*wire.TQueryInvocationsResponse, error) {
			return queryAnswer(map[string]*wire.TInvocationStatus{r.InvocationID: {InvocationID: r.InvocationID,
				State: wire.TLanceInvocationState_FINISHED, NoResult_: boolPtr(true), SanitizedMessage: strPtr("crashed")}})
		},
		"FORGOTTEN": func(r *job.Record) func(string, *wire.TQueryInvocationsRequest) (*wire.TQueryInvocationsResponse, error) {
			return queryAnswer(map[string]*wire.TInvocationStatus{r.InvocationID: {InvocationID: r.InvocationID, State: wire.TLanceInvocationState_FORGOTTEN}})
		},
	}
	for name, answer := range cases {
		t.Run(name, func(t *testing.T) {
			e, r := reconcileEnv(t)
			e.be.setQuery(answer(r))
			mark := e.prop.count()
			if err := e.d.ReconcileRunning(e.ctx); err != nil {
				t.Fatal(err)
			}
			if got := e.prop.TypesSince(mark); len(got) != 0 {
				t.Fatalf("journaled %v", got)
			}
			if got := e.wantState(r.JobID, job.Running); !got.HoldsPossibleLiveSlot() {
				t.Fatal("slot released")
			}
			if len(e.be.queried()) != 1 {
				t.Fatal("not queried")
			}
		})
	}
}

// A dispatch this leader handed to Submit in this term may still be on the
// wire: UNKNOWN_INVOCATION proves nothing for it. One it never sent does.
func TestReconcileOwnTermDispatch(t *testing.T) {
	var skip bool
	e := newEnv(t, func(d *Deps) {
		d.Hooks.BeforeSend = func(int64) error {
			if skip {
				return errors.New("aborted")
			}
			return nil
		}
	})
	e.addBackend("b1:9060", 1)
	sent := e.admit(1)[0]
	e.heartbeat()
	e.round()
	skip = true
	unsent := e.admit(1)[0]
	e.round()
	e.wantState(sent, job.Running)
	e.wantState(unsent, job.Running)
	if len(e.be.submitted()) != 1 {
		t.Fatal("setup: want exactly one send")
	}
	e.be.setQuery(queryAnswer(nil))
	if err := e.d.ReconcileRunning(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.wantState(sent, job.Running)
	if r := e.wantState(unsent, job.Pending); r.TerminationProof != job.ProofNotEnqueued {
		t.Fatalf("proof %s", r.TerminationProof)
	}
}

// Reconcile leaves expired jobs to the deadline sweep.
func TestReconcileSkipsExpired(t *testing.T) {
	e := newEnv(t)
	b1 := e.addBackend("b1:9060", 1)
	id := e.admit(1)[0]
	e.markRunning(id, b1, 1, e.nowMs()-1, 3)
	if err := e.d.ReconcileRunning(e.ctx); err != nil {
		t.Fatal(err)
	}
	if len(e.be.queried()) != 0 {
		t.Fatal("an expired job was reconciled outside the deadline sweep")
	}
}
