package report

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

const testUUID = "0f8e2a4c-1b3d-4e5f-8a9b-0c1d2e3f4a5b"

// §13.5: a leader that has been deposed without noticing cannot confirm its
// leadership, and then never refuses a report for good: it answers
// NOT_LEADER (the backend retries elsewhere) and writes nothing.
func TestUnconfirmedLeaderNeverRefusesForGood(t *testing.T) {
	var verifies atomic.Int64
	deposed := errors.New("cluster: verify leadership: not the leader")
	f := newFixture(t, func(d *Deps) {
		d.VerifyLeader = func(context.Context, uint64) error { verifies.Add(1); return deposed }
	})
	rec := f.running("t1")
	before := f.snapshot()

	unknown := validReport(rec, job.NativeOK)
	unknown.JobID = 999
	forged := validReport(rec, job.NativeOK)
	forged.InvocationSecret = thrift.StringPtr("forged")
	stale := validReport(rec, job.NativeOK)
	stale.DispatchRevision++
	staleTerm := validTermination(rec, wire.TLanceIndexTerminationProof_CHILD_REAPED)
	staleTerm.InvocationID = "inv-other"
	forgedProgress := validProgress(rec)
	forgedProgress.InvocationSecret = nil

	for name, st := range map[string]*wire.TStatus{
		"unknown job":        f.result(unknown),
		"wrong secret":       f.result(forged),
		"stale identity":     f.result(stale),
		"stale termination":  f.termination(staleTerm),
		"unauthenticated pr": f.h.HandleProgress(context.Background(), forgedProgress),
	} {
		if st.StatusCode != wire.TStatusCode_NOT_LEADER {
			t.Errorf("%s: %v %q, want NOT_LEADER", name, st.StatusCode, st.ErrorMsgs)
		}
	}
	if verifies.Load() != 5 {
		t.Fatalf("VerifyLeader called %d times, want once per refusal (5)", verifies.Load())
	}
	if !bytes.Equal(before, f.snapshot()) {
		t.Fatal("state changed")
	}
	wantCounts(t, f.h, map[string]int64{"unconfirmed_leader": 5, "unknown_job": 0, "unauthenticated": 0, "stale_identity": 0})

	// A valid report needs no confirmation: the entry itself is the proof.
	n := verifies.Load()
	wantStatus(t, f.result(validReport(rec, job.NativeOK)), wire.TStatusCode_OK)
	if verifies.Load() != n {
		t.Fatal("VerifyLeader was called for a report that was applied")
	}
}

// Confirmed, the same refusals are given as before. The confirmation asked
// for is of the term this master leads in (read before the view the
// refusal was judged on): a confirmation of any other term proves nothing
// about that view.
func TestConfirmedLeaderRefuses(t *testing.T) {
	var terms []uint64
	f := newFixture(t, func(d *Deps) {
		d.VerifyLeader = func(_ context.Context, term uint64) error { terms = append(terms, term); return nil }
	})
	f.prop.SetTerm(7)
	rec := f.running("t1")
	forged := validReport(rec, job.NativeOK)
	forged.InvocationSecret = thrift.StringPtr("forged")
	wantStatus(t, f.result(forged), wire.TStatusCode_UNAUTHENTICATED)
	unknown := validReport(rec, job.NativeOK)
	unknown.JobID = 999
	wantStatus(t, f.result(unknown), wire.TStatusCode_STALE_REPORT)
	if len(terms) != 2 || terms[0] != 7 || terms[1] != 7 {
		t.Fatalf("confirmations asked for terms %v, want [7 7] (the term led in)", terms)
	}
}

// §13.5: reports are never forwarded as raw commands. The handler proposes
// leader-only (cluster.LeaderOnly; pkg/cluster tests that such a proposal
// is never forwarded), and a node that lost leadership between its check
// and the propose answers NOT_LEADER, so the backend retries.
func TestReportProposalsAreLeaderOnly(t *testing.T) {
	f := newFixture(t)
	rec := f.running("t1")
	rec2 := f.running("t2")
	wantStatus(t, f.result(validReport(rec, job.NativeOK)), wire.TStatusCode_OK)
	wantStatus(t, f.h.HandleProgress(context.Background(), validProgress(rec2)), wire.TStatusCode_OK)
	wantStatus(t, f.termination(validTermination(rec2, wire.TLanceIndexTerminationProof_CHILD_REAPED)), wire.TStatusCode_OK)
	if n := f.prop.notLeaderOnly.Load(); n != 0 {
		t.Fatalf("%d report proposals were not leader-only (they could be forwarded)", n)
	}

	rec3 := f.running("t3")
	f.prop.mu.Lock()
	f.prop.err = fmt.Errorf("cluster: apply on m1: %w", raftfsm.ErrNotLeader)
	f.prop.mu.Unlock()
	wantStatus(t, f.result(validReport(rec3, job.NativeOK)), wire.TStatusCode_NOT_LEADER)
	if f.job(rec3.JobID).MutationState != job.Running {
		t.Fatal("the report was applied")
	}
}

// §13.3: a termination report that says the worker ended without a result
// moves the job to RESOLVING in the proof's entry, with the cause, the
// announced uuid and the time its dataset may be read.
func TestTerminationWithoutResultResolves(t *testing.T) {
	f := newFixture(t)
	rec := f.running("t1")
	n := f.prop.count()
	tr := validTermination(rec, wire.TLanceIndexTerminationProof_CHILD_REAPED)
	tr.NoResult_ = thrift.BoolPtr(true)
	tr.SanitizedMessage = thrift.StringPtr("killed by the memory limit")
	tr.IndexUUID = thrift.StringPtr(strings.ToUpper(testUUID))
	wantStatus(t, f.termination(tr), wire.TStatusCode_OK)

	items := f.prop.reportItemsSince(t, n)
	if len(items) != 1 || items[0].Proof == nil {
		t.Fatalf("journaled %+v, want one proof item", items)
	}
	p := items[0].Proof
	if !p.GetFinishedWithoutResult_() || p.GetMessage() != "killed by the memory limit" || p.GetIndexUUID() != testUUID {
		t.Fatalf("proof = %+v", p)
	}
	// The fixture's dataset is on an object store: the default grace (30 s).
	if p.GetResolveAfterMs() != f.now+30_000 {
		t.Fatalf("resolve_after_ms = %d, want now + 30 s (%d)", p.GetResolveAfterMs(), f.now+30_000)
	}
	got := f.job(rec.JobID)
	if got.MutationState != job.Resolving || got.TerminationMessage != "killed by the memory limit" ||
		got.IndexUUID != testUUID || got.TerminationProof != job.ProofChildReaped || got.HoldsPossibleLiveSlot() {
		t.Fatalf("job = %s %q %q %s", got.MutationState, got.TerminationMessage, got.IndexUUID, got.TerminationProof)
	}

	// The same report again: acknowledged, nothing written.
	n = f.prop.count()
	wantStatus(t, f.termination(tr), wire.TStatusCode_OK)
	if f.prop.count() != n {
		t.Fatal("a duplicate termination was journaled")
	}

	// A result that follows still applies (M2 from RESOLVING).
	wantStatus(t, f.result(validReport(rec, job.NativeOK)), wire.TStatusCode_OK)
	if got := f.job(rec.JobID); got.MutationState != job.Committed {
		t.Fatalf("result from RESOLVING: %s", got.MutationState)
	}
}

// A slot already released (the epoch sweep) does not stop the move to
// RESOLVING; a termination without no_result does not move the job.
func TestTerminationWithoutResultAfterTheSlotWasReleased(t *testing.T) {
	f := newFixture(t)
	rec := f.running("t1")
	f.apply(raftfsm.CmdRecordProofBatch, &journal.TRecordProofBatch{NowMs: f.now, Proofs: []*journal.TProof{{
		JobID: rec.JobID, DispatchRevision: rec.DispatchRevision, InvocationID: rec.InvocationID,
		ProcessEpoch: rec.ProcessEpoch, BackendID: rec.BackendID, Proof: journal.TTerminationProof_PROCESS_EPOCH_GONE}}})

	plain := validTermination(rec, wire.TLanceIndexTerminationProof_CHILD_REAPED)
	n := f.prop.count()
	wantStatus(t, f.termination(plain), wire.TStatusCode_OK)
	if f.prop.count() != n || f.job(rec.JobID).MutationState != job.Running {
		t.Fatal("a plain duplicate proof was journaled or moved the job")
	}

	tr := validTermination(rec, wire.TLanceIndexTerminationProof_CHILD_REAPED)
	tr.NoResult_ = thrift.BoolPtr(true)
	wantStatus(t, f.termination(tr), wire.TStatusCode_OK)
	if got := f.job(rec.JobID); got.MutationState != job.Resolving || got.TerminationProof != job.ProofProcessEpochGone {
		t.Fatalf("job = %s %s, want RESOLVING with the sweep's proof kept", got.MutationState, got.TerminationProof)
	}
}

// A local dataset needs no grace: its outcome may be read at once.
func TestTerminationOnALocalDatasetResolvesNow(t *testing.T) {
	f := newFixture(t)
	rec := f.runningOn("local", "/data/lake", "t1")
	tr := validTermination(rec, wire.TLanceIndexTerminationProof_NEVER_LAUNCHED)
	tr.NoResult_ = thrift.BoolPtr(true)
	wantStatus(t, f.termination(tr), wire.TStatusCode_OK)
	if got := f.job(rec.JobID); got.MutationState != job.Resolving || got.ResolveAfterMs != f.now {
		t.Fatalf("job = %s resolve_after %d, want RESOLVING at %d", got.MutationState, got.ResolveAfterMs, f.now)
	}
}

// A malformed message or uuid is dropped; the proof and the move to
// RESOLVING are not.
func TestTerminationDropsMalformedEvidence(t *testing.T) {
	for name, tc := range map[string]struct {
		msg, uuid string
		reason    string
	}{
		"oversized message": {msg: strings.Repeat("x", job.MaxMessageBytes+1), uuid: testUUID, reason: "oversized_message"},
		"non-UTF-8 message": {msg: "bad \xff byte", uuid: testUUID, reason: "invalid_field"},
		"not a uuid":        {msg: "crashed", uuid: "../../etc/passwd", reason: "invalid_field"},
		"uuid too long":     {msg: "crashed", uuid: testUUID + "0", reason: "invalid_field"},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			rec := f.running("t1")
			tr := validTermination(rec, wire.TLanceIndexTerminationProof_CHILD_REAPED)
			tr.NoResult_ = thrift.BoolPtr(true)
			tr.SanitizedMessage, tr.IndexUUID = thrift.StringPtr(tc.msg), thrift.StringPtr(tc.uuid)
			wantStatus(t, f.termination(tr), wire.TStatusCode_INVALID_ARGUMENT)
			got := f.job(rec.JobID)
			if got.MutationState != job.Resolving || got.HoldsPossibleLiveSlot() {
				t.Fatalf("job = %s (slot %v), want RESOLVING without a slot", got.MutationState, got.HoldsPossibleLiveSlot())
			}
			if got.TerminationMessage == tc.msg && tc.reason == "oversized_message" || got.IndexUUID == tc.uuid && tc.uuid != testUUID {
				t.Fatalf("the malformed field was journaled: %q %q", got.TerminationMessage, got.IndexUUID)
			}
			wantCounts(t, f.h, map[string]int64{tc.reason: 1, "applied_proof": 1})
		})
	}
}

// §13.7: a NATIVE_OK result's verified uuid goes into the completion; a
// malformed one is dropped, the result is not. A completion reason outside
// the wire's (RESOLVED_FROM_DATASET is the leader's own) drops the result.
func TestResultIndexUUIDAndReason(t *testing.T) {
	f := newFixture(t)
	rec := f.running("t1")
	n := f.prop.count()
	r := validReport(rec, job.NativeOK)
	r.IndexUUID = thrift.StringPtr(testUUID)
	wantStatus(t, f.result(r), wire.TStatusCode_OK)
	items := f.prop.reportItemsSince(t, n)
	if len(items) != 1 || items[0].Completion.GetIndexUUID() != testUUID {
		t.Fatalf("journaled %+v, want the completion with the uuid", items)
	}
	if got := f.job(rec.JobID); got.IndexUUID != testUUID || got.MutationState != job.Committed {
		t.Fatalf("job = %s %q", got.MutationState, got.IndexUUID)
	}

	rec2 := f.running("t2")
	bad := validReport(rec2, job.NativeOK)
	bad.IndexUUID = thrift.StringPtr("not-a-uuid")
	wantStatus(t, f.result(bad), wire.TStatusCode_INVALID_ARGUMENT)
	if got := f.job(rec2.JobID); got.MutationState != job.Committed || got.IndexUUID != "" {
		t.Fatalf("job = %s %q, want COMMITTED without a uuid", got.MutationState, got.IndexUUID)
	}

	rec3 := f.running("t3")
	resolved := validReport(rec3, job.NativeOK)
	resolved.CompletionReason = ptr(wire.TLanceIndexCompletionReason(journal.TCompletionReason_RESOLVED_FROM_DATASET))
	wantStatus(t, f.result(resolved), wire.TStatusCode_INVALID_ARGUMENT)
	if got := f.job(rec3.JobID); got.MutationState != job.Running {
		t.Fatalf("a backend-sent RESOLVED_FROM_DATASET was applied: %s", got.MutationState)
	}
}

// Progress reports: authenticated, journaled as a progress item of a
// report batch; the uuid once, the phase replaced.
func TestProgressReports(t *testing.T) {
	f := newFixture(t)
	rec := f.running("t1")
	n := f.prop.count()
	wantStatus(t, f.h.HandleProgress(context.Background(), validProgress(rec)), wire.TStatusCode_OK)
	types := f.prop.TypesSince(n)
	items := f.prop.reportItemsSince(t, n)
	if len(types) != 1 || types[0] != raftfsm.CmdReportBatch || len(items) != 1 || items[0].Progress == nil ||
		items[0].Proof != nil || items[0].Completion != nil {
		t.Fatalf("journaled %v %+v, want one report batch with one progress item", types, items)
	}
	if got := f.job(rec.JobID); got.IndexUUID != testUUID || got.BuildPhase != "training" {
		t.Fatalf("job uuid %q phase %q", got.IndexUUID, got.BuildPhase)
	}

	// Nothing new: acknowledged without an entry.
	n = f.prop.count()
	wantStatus(t, f.h.HandleProgress(context.Background(), validProgress(rec)), wire.TStatusCode_OK)
	if f.prop.count() != n {
		t.Fatal("a duplicate progress report was journaled")
	}
	// A new phase replaces the old one.
	p := validProgress(rec)
	p.Phase = thrift.StringPtr("writing")
	wantStatus(t, f.h.HandleProgress(context.Background(), p), wire.TStatusCode_OK)
	if got := f.job(rec.JobID); got.BuildPhase != "writing" || got.IndexUUID != testUUID {
		t.Fatalf("job uuid %q phase %q", got.IndexUUID, got.BuildPhase)
	}
	// Another uuid is refused.
	other := validProgress(rec)
	other.IndexUUID = thrift.StringPtr("11111111-2222-3333-4444-555555555555")
	wantStatus(t, f.h.HandleProgress(context.Background(), other), wire.TStatusCode_INVALID_ARGUMENT)

	// Bounds: checked before anything is written.
	n = f.prop.count()
	long := validProgress(rec)
	long.Phase = thrift.StringPtr(strings.Repeat("p", 65))
	wantStatus(t, f.h.HandleProgress(context.Background(), long), wire.TStatusCode_INVALID_ARGUMENT)
	badUUID := validProgress(rec)
	badUUID.IndexUUID = thrift.StringPtr(strings.Repeat("a", 300))
	wantStatus(t, f.h.HandleProgress(context.Background(), badUUID), wire.TStatusCode_INVALID_ARGUMENT)
	forged := validProgress(rec)
	forged.InvocationSecret = thrift.StringPtr("forged")
	wantStatus(t, f.h.HandleProgress(context.Background(), forged), wire.TStatusCode_UNAUTHENTICATED)
	stale := validProgress(rec)
	stale.BeProcessEpoch++
	wantStatus(t, f.h.HandleProgress(context.Background(), stale), wire.TStatusCode_STALE_REPORT)
	if f.prop.count() != n {
		t.Fatal("a refused progress report was journaled")
	}

	// Once the job has left RUNNING the announcement is moot: acknowledged.
	wantStatus(t, f.result(validReport(rec, job.NativeOK)), wire.TStatusCode_OK)
	n = f.prop.count()
	late := validProgress(rec)
	late.Phase = thrift.StringPtr("done")
	wantStatus(t, f.h.HandleProgress(context.Background(), late), wire.TStatusCode_OK)
	if f.prop.count() != n {
		t.Fatal("progress for a finished job was journaled")
	}
	wantCounts(t, f.h, map[string]int64{"applied_progress": 2, "unauthenticated": 1, "stale_identity": 1})
	assertNoSecret(t, f)
}

// A follower forwards progress reports like the others.
func TestFollowerForwardsProgress(t *testing.T) {
	f := newFixture(t)
	rec := f.running("t1")
	fo := newFollower(f, knownLeader, nil)
	wantStatus(t, fo.h.HandleProgress(context.Background(), validProgress(rec)), wire.TStatusCode_OK)
	if got := f.job(rec.JobID); got.IndexUUID != testUUID {
		t.Fatalf("the leader did not apply the forwarded progress: %q", got.IndexUUID)
	}
	if fo.prop.count() != 0 || fmt.Sprint(fo.client.calls) != "[reportLanceIndexJobProgress]" {
		t.Fatalf("follower proposed %d, calls %v", fo.prop.count(), fo.client.calls)
	}
	wantCounts(t, fo.h, map[string]int64{"forwarded": 1})
	// Forwarding is one hop for progress too.
	p := validProgress(rec)
	p.Forwarded = thrift.BoolPtr(true)
	wantStatus(t, fo.h.HandleProgress(context.Background(), p), wire.TStatusCode_NOT_LEADER)
}

func validProgress(rec *job.Record) *wire.TLanceIndexJobProgressReport {
	return &wire.TLanceIndexJobProgressReport{JobID: rec.JobID, DispatchRevision: rec.DispatchRevision,
		InvocationID: rec.InvocationID, BeProcessEpoch: rec.ProcessEpoch,
		InvocationSecret: thrift.StringPtr(testSecret), IndexUUID: thrift.StringPtr(testUUID),
		Phase: thrift.StringPtr("training")}
}

// runningOn is running on a table of another catalog (created on first use).
func (f *fixture) runningOn(catalog, root, table string) *job.Record {
	f.t.Helper()
	cat, ok := f.fsm.State().Catalog(catalog)
	catID := int64(0)
	if ok {
		catID = cat.ID
	} else {
		catID = f.apply(raftfsm.CmdCreateCatalog, &journal.TCatalogCommand{NowMs: f.now,
			Catalog: &journal.TCatalogRecord{Name: catalog, RootURI: thrift.StringPtr(root)}}).GetID()
	}
	loc, err := job.DatasetLocator(root, "db", table)
	if err != nil {
		f.t.Fatal(err)
	}
	r := &job.Record{Creator: "alice", CatalogID: catID, DB: "db", Table: table,
		Provider: job.ProviderDirectory, Locator: loc, DisplayIndexName: "idx", NormalizedIndexName: "idx",
		MutationType: job.Create, IndexType: job.IndexBTree, Column: "id", PropertiesJSON: "{}",
		AdmittedDatasetVersion: 7,
		SchemaContract:         `{"v":1,"fields":[{"id":0,"name":"id","type":"int64","nullable":false}]}`}
	id := f.apply(raftfsm.CmdAdmit, &journal.TAdmitCommand{NowMs: f.now, Job: raftfsm.RecordToThrift(r)}).GetID()
	cur := f.job(id)
	f.apply(raftfsm.CmdMarkRunningBatch, &journal.TMarkRunningBatch{NowMs: f.now, Jobs: []*journal.TMarkRunning{{
		JobID: id, ExpectedRev: cur.Rev, BackendID: f.backendID, ProcessEpoch: testEpoch,
		InvocationID: fmt.Sprintf("inv-%d", id), InvocationSecret: testSecret, DeadlineMs: f.now + 3_600_000, LeaderTerm: 3}}})
	return f.job(id)
}
