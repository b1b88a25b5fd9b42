package report

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

func TestValidResultCommits(t *testing.T) {
	f := newFixture(t)
	rec := f.running("t1")
	n := f.prop.count()

	wantStatus(t, f.result(validReport(rec, job.NativeOK)), wire.TStatusCode_OK)

	got := f.job(rec.JobID)
	if got.MutationState != job.Committed || got.RefreshState != job.RefreshRequired {
		t.Fatalf("state = %s/%s, want COMMITTED/REQUIRED", got.MutationState, got.RefreshState)
	}
	if got.Result.Code != job.NativeOK || got.Result.Message != "index built" {
		t.Fatalf("result = %+v", got.Result)
	}
	if !got.HoldsPossibleLiveSlot() {
		t.Fatal("a result released the slot; only a proof may")
	}
	if types := f.prop.TypesSince(n); !slices.Equal(types, []raftfsm.CommandType{raftfsm.CmdReportBatch}) {
		t.Fatalf("entries = %v, want one ReportBatch", types)
	}
	if its := f.prop.reportItemsSince(t, n); len(its) != 1 || its[0].Proof != nil || its[0].Completion == nil {
		t.Fatalf("report items = %v, want one result without a proof", its)
	}
	if f.waker.n.Load() == 0 {
		t.Fatal("an applied result did not wake the dispatcher")
	}
	wantCounts(t, f.h, map[string]int64{"applied_result": 1, "applied_proof": 0, "duplicate": 0})
	assertNoSecret(t, f)
}

func TestClassificationFollowsTheCode(t *testing.T) {
	f := newFixture(t)
	for i, tc := range []struct {
		code  job.ResultCode
		ema   bool
		state job.MutationState
		fresh job.RefreshState
	}{
		{job.PreInvocationStaleAdmission, false, job.NotCommitted, job.RefreshNotRequired},
		{job.PreInvocationCredentialExpired, true, job.NotCommitted, job.RefreshRequired},
		{job.NativeCommitConflict, false, job.NotCommitted, job.RefreshRequired},
		{job.NativeIO, false, job.Unknown, job.RefreshNotRequired},
	} {
		rec := f.running(fmt.Sprintf("c%d", i))
		r := validReport(rec, tc.code)
		r.ExternalMetadataAdvanced = thrift.BoolPtr(tc.ema)
		wantStatus(t, f.result(r), wire.TStatusCode_OK)
		if got := f.job(rec.JobID); got.MutationState != tc.state || got.RefreshState != tc.fresh {
			t.Errorf("%s ema=%v: %s/%s, want %s/%s", tc.code, tc.ema, got.MutationState, got.RefreshState, tc.state, tc.fresh)
		}
	}
}

// Forged, stale and malformed reports change nothing: not a byte of the
// replicated state, and no entry is written.
func TestForgedReportsChangeNothing(t *testing.T) {
	code := func(v int64) *wire.TLanceIndexJobResultCode { c := wire.TLanceIndexJobResultCode(v); return &c }
	cases := []struct {
		name   string
		edit   func(r *wire.TLanceIndexJobReport)
		status wire.TStatusCode
		reason string
	}{
		{"no secret", func(r *wire.TLanceIndexJobReport) { r.InvocationSecret = nil }, wire.TStatusCode_UNAUTHENTICATED, "unauthenticated"},
		{"empty secret", func(r *wire.TLanceIndexJobReport) { r.InvocationSecret = thrift.StringPtr("") }, wire.TStatusCode_UNAUTHENTICATED, "unauthenticated"},
		{"wrong secret", func(r *wire.TLanceIndexJobReport) { r.InvocationSecret = thrift.StringPtr("forged-secret") }, wire.TStatusCode_UNAUTHENTICATED, "unauthenticated"},
		{"secret prefix", func(r *wire.TLanceIndexJobReport) {
			r.InvocationSecret = thrift.StringPtr(testSecret[:len(testSecret)-1])
		}, wire.TStatusCode_UNAUTHENTICATED, "unauthenticated"},
		{"secret plus a byte", func(r *wire.TLanceIndexJobReport) { r.InvocationSecret = thrift.StringPtr(testSecret + "x") }, wire.TStatusCode_UNAUTHENTICATED, "unauthenticated"},
		{"wrong secret carrying a proof", func(r *wire.TLanceIndexJobReport) {
			r.InvocationSecret = thrift.StringPtr("forged-secret")
			r.TerminationProof = ptr(wire.TLanceIndexTerminationProof_CHILD_REAPED)
		}, wire.TStatusCode_UNAUTHENTICATED, "unauthenticated"},
		{"wrong epoch", func(r *wire.TLanceIndexJobReport) { r.BeProcessEpoch++ }, wire.TStatusCode_STALE_REPORT, "stale_identity"},
		{"stale dispatch revision", func(r *wire.TLanceIndexJobReport) { r.DispatchRevision-- }, wire.TStatusCode_STALE_REPORT, "stale_identity"},
		{"wrong invocation id", func(r *wire.TLanceIndexJobReport) { r.InvocationID += "-other" }, wire.TStatusCode_STALE_REPORT, "stale_identity"},
		{"stale identity carrying a proof", func(r *wire.TLanceIndexJobReport) {
			r.BeProcessEpoch++
			r.TerminationProof = ptr(wire.TLanceIndexTerminationProof_NEVER_LAUNCHED)
		}, wire.TStatusCode_STALE_REPORT, "stale_identity"},
		{"unknown job", func(r *wire.TLanceIndexJobReport) { r.JobID = 999 }, wire.TStatusCode_STALE_REPORT, "unknown_job"},
		{"oversized invocation id", func(r *wire.TLanceIndexJobReport) { r.InvocationID = strings.Repeat("i", 257) }, wire.TStatusCode_INVALID_ARGUMENT, "invalid_field"},
		{"no result code", func(r *wire.TLanceIndexJobReport) { r.ResultCode = nil }, wire.TStatusCode_INVALID_ARGUMENT, "malformed_code"},
		{"result code 0", func(r *wire.TLanceIndexJobReport) { r.ResultCode = code(0) }, wire.TStatusCode_INVALID_ARGUMENT, "malformed_code"},
		{"result code 13", func(r *wire.TLanceIndexJobReport) { r.ResultCode = code(13) }, wire.TStatusCode_INVALID_ARGUMENT, "malformed_code"},
		{"NO_TRUSTED_RESULT from the wire", func(r *wire.TLanceIndexJobReport) { r.ResultCode = code(int64(job.NoTrustedResult)) }, wire.TStatusCode_INVALID_ARGUMENT, "malformed_code"},
		{"negative result code", func(r *wire.TLanceIndexJobReport) { r.ResultCode = code(-5) }, wire.TStatusCode_INVALID_ARGUMENT, "malformed_code"},
		{"completion reason 0", func(r *wire.TLanceIndexJobReport) { r.CompletionReason = ptr(wire.TLanceIndexCompletionReason(0)) }, wire.TStatusCode_INVALID_ARGUMENT, "invalid_field"},
		{"completion reason 3", func(r *wire.TLanceIndexJobReport) { r.CompletionReason = ptr(wire.TLanceIndexCompletionReason(3)) }, wire.TStatusCode_INVALID_ARGUMENT, "invalid_field"},
		{"message 1025 B", func(r *wire.TLanceIndexJobReport) {
			r.SanitizedMessage = thrift.StringPtr(strings.Repeat("m", job.MaxMessageBytes+1))
		}, wire.TStatusCode_INVALID_ARGUMENT, "oversized_message"},
		{"message not UTF-8", func(r *wire.TLanceIndexJobReport) { r.SanitizedMessage = thrift.StringPtr("ok \xff\xfe") }, wire.TStatusCode_INVALID_ARGUMENT, "invalid_field"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			rec := f.running("t1")
			before, n := f.snapshot(), f.prop.count()
			r := validReport(rec, job.NativeOK)
			tc.edit(r)
			st := f.result(r)
			wantStatus(t, st, tc.status)
			if !bytes.Equal(before, f.snapshot()) {
				t.Fatal("the replicated state changed")
			}
			if got := f.prop.count(); got != n {
				t.Fatalf("%d entries written, want none", got-n)
			}
			if f.waker.n.Load() != 0 {
				t.Fatal("a dropped report woke the dispatcher")
			}
			wantCounts(t, f.h, map[string]int64{tc.reason: 1, "applied_result": 0, "applied_proof": 0})
			assertNoSecret(t, f)
			if strings.Contains(strings.Join(st.ErrorMsgs, " "), "forged-secret") {
				t.Fatal("the status echoes the report's secret")
			}
		})
	}
}

// A job that was never dispatched has no secret, so nothing authenticates
// against it, not even an empty secret.
func TestReportForPendingJobIsUnauthenticated(t *testing.T) {
	f := newFixture(t)
	id := f.admit("t1")
	before := f.snapshot()
	for _, s := range []*string{nil, thrift.StringPtr(""), thrift.StringPtr(testSecret)} {
		c := wire.TLanceIndexJobResultCode_NATIVE_OK
		wantStatus(t, f.result(&wire.TLanceIndexJobReport{JobID: id, ResultCode: &c, InvocationSecret: s}),
			wire.TStatusCode_UNAUTHENTICATED)
		wantStatus(t, f.termination(&wire.TLanceIndexJobTerminationReport{JobID: id,
			Proof: wire.TLanceIndexTerminationProof_CHILD_REAPED, InvocationSecret: s}), wire.TStatusCode_UNAUTHENTICATED)
	}
	if !bytes.Equal(before, f.snapshot()) {
		t.Fatal("the replicated state changed")
	}
	wantCounts(t, f.h, map[string]int64{"unauthenticated": 6})
}

// The proof is applied on its own first: a result that is dropped does not
// keep a provably gone worker's slot held.
func TestProofAppliedEvenWhenResultDropped(t *testing.T) {
	for _, tc := range []struct {
		name   string
		edit   func(r *wire.TLanceIndexJobReport)
		reason string
	}{
		{"unknown code", func(r *wire.TLanceIndexJobReport) { c := wire.TLanceIndexJobResultCode(13); r.ResultCode = &c }, "malformed_code"},
		{"no code", func(r *wire.TLanceIndexJobReport) { r.ResultCode = nil }, "malformed_code"},
		{"oversized message", func(r *wire.TLanceIndexJobReport) {
			r.SanitizedMessage = thrift.StringPtr(strings.Repeat("m", job.MaxMessageBytes+1))
		}, "oversized_message"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			rec := f.running("t1")
			n := f.prop.count()
			r := validReport(rec, job.NativeOK)
			r.TerminationProof = ptr(wire.TLanceIndexTerminationProof_CHILD_REAPED)
			tc.edit(r)
			wantStatus(t, f.result(r), wire.TStatusCode_INVALID_ARGUMENT)
			got := f.job(rec.JobID)
			if got.MutationState != job.Running {
				t.Fatalf("state = %s, want RUNNING (the result is dropped)", got.MutationState)
			}
			if got.HoldsPossibleLiveSlot() || got.TerminationProof != job.ProofChildReaped {
				t.Fatalf("slot plo=%v proof=%s, want released by CHILD_REAPED", got.PossibleLiveOwned, got.TerminationProof)
			}
			if its := f.prop.reportItemsSince(t, n); f.prop.count() != n+1 || len(its) != 1 || its[0].Proof == nil || its[0].Completion != nil {
				t.Fatalf("report items = %v, want one entry with a proof and no result", its)
			}
			wantCounts(t, f.h, map[string]int64{"applied_proof": 1, tc.reason: 1, "applied_result": 0})
		})
	}
}

func TestProofThenResultInOrder(t *testing.T) {
	f := newFixture(t)
	rec := f.running("t1")
	n := f.prop.count()
	r := validReport(rec, job.NativeOK)
	r.TerminationProof = ptr(wire.TLanceIndexTerminationProof_NEVER_LAUNCHED)
	wantStatus(t, f.result(r), wire.TStatusCode_OK)
	// One entry; its item carries the proof (applied first) and the result.
	if types := f.prop.TypesSince(n); !slices.Equal(types, []raftfsm.CommandType{raftfsm.CmdReportBatch}) {
		t.Fatalf("entries = %v, want one ReportBatch", types)
	}
	its := f.prop.reportItemsSince(t, n)
	if len(its) != 1 || its[0].Proof == nil || its[0].Completion == nil ||
		its[0].Proof.Proof != journal.TTerminationProof_NEVER_LAUNCHED || its[0].Completion.JobID != rec.JobID {
		t.Fatalf("report items = %v, want one with the proof and the result", its)
	}
	got := f.job(rec.JobID)
	if got.MutationState != job.Committed || got.TerminationProof != job.ProofNeverLaunched || got.PossibleLiveOwned {
		t.Fatalf("got %s proof=%s plo=%v", got.MutationState, got.TerminationProof, got.PossibleLiveOwned)
	}
	wantCounts(t, f.h, map[string]int64{"applied_proof": 1, "applied_result": 1})

	// Proof NONE is "no proof": the result alone applies.
	rec2 := f.running("t2")
	n = f.prop.count()
	r = validReport(rec2, job.NativeOK)
	r.TerminationProof = ptr(wire.TLanceIndexTerminationProof_NONE)
	wantStatus(t, f.result(r), wire.TStatusCode_OK)
	if types := f.prop.TypesSince(n); !slices.Equal(types, []raftfsm.CommandType{raftfsm.CmdReportBatch}) {
		t.Fatalf("entries = %v, want one ReportBatch", types)
	}
	if its := f.prop.reportItemsSince(t, n); len(its) != 1 || its[0].Proof != nil || its[0].Completion == nil {
		t.Fatalf("report items = %v, want one result without a proof", its)
	}
}

// A proof value no backend may send is dropped; the result still applies
// and the answer says something was dropped.
func TestMasterOnlyProofFromTheWireIsDropped(t *testing.T) {
	f := newFixture(t)
	rec := f.running("t1")
	r := validReport(rec, job.NativeOK)
	r.TerminationProof = ptr(wire.TLanceIndexTerminationProof(4)) // PROCESS_EPOCH_GONE is the master's
	wantStatus(t, f.result(r), wire.TStatusCode_INVALID_ARGUMENT)
	got := f.job(rec.JobID)
	if got.MutationState != job.Committed || !got.HoldsPossibleLiveSlot() {
		t.Fatalf("got %s holds=%v, want COMMITTED with the slot held", got.MutationState, got.HoldsPossibleLiveSlot())
	}
	wantCounts(t, f.h, map[string]int64{"invalid_field": 1, "applied_result": 1, "applied_proof": 0})
}

func TestTerminationReport(t *testing.T) {
	f := newFixture(t)
	rec := f.running("t1")
	before, n := f.snapshot(), f.prop.count()

	forged := validTermination(rec, wire.TLanceIndexTerminationProof_CHILD_REAPED)
	forged.InvocationSecret = thrift.StringPtr("forged-secret")
	wantStatus(t, f.termination(forged), wire.TStatusCode_UNAUTHENTICATED)
	noSecret := validTermination(rec, wire.TLanceIndexTerminationProof_CHILD_REAPED)
	noSecret.InvocationSecret = nil
	wantStatus(t, f.termination(noSecret), wire.TStatusCode_UNAUTHENTICATED)
	stale := validTermination(rec, wire.TLanceIndexTerminationProof_CHILD_REAPED)
	stale.BeProcessEpoch++
	wantStatus(t, f.termination(stale), wire.TStatusCode_STALE_REPORT)
	for _, p := range []wire.TLanceIndexTerminationProof{wire.TLanceIndexTerminationProof_NONE, 0, 4, 5} {
		wantStatus(t, f.termination(validTermination(rec, p)), wire.TStatusCode_INVALID_ARGUMENT)
	}
	if !bytes.Equal(before, f.snapshot()) || f.prop.count() != n {
		t.Fatal("a refused termination report changed the state")
	}

	wantStatus(t, f.termination(validTermination(rec, wire.TLanceIndexTerminationProof_CHILD_REAPED)), wire.TStatusCode_OK)
	got := f.job(rec.JobID)
	if got.TerminationProof != job.ProofChildReaped || got.PossibleLiveOwned || got.MutationState != job.Running {
		t.Fatalf("got proof=%s plo=%v %s, want CHILD_REAPED, released, still RUNNING", got.TerminationProof, got.PossibleLiveOwned, got.MutationState)
	}
	if f.waker.n.Load() == 0 {
		t.Fatal("an applied proof did not wake the dispatcher")
	}

	// A retry, or another proof for the same dispatch: acknowledged, nothing written.
	n, before = f.prop.count(), f.snapshot()
	wantStatus(t, f.termination(validTermination(rec, wire.TLanceIndexTerminationProof_CHILD_REAPED)), wire.TStatusCode_OK)
	wantStatus(t, f.termination(validTermination(rec, wire.TLanceIndexTerminationProof_NEVER_LAUNCHED)), wire.TStatusCode_OK)
	if f.prop.count() != n || !bytes.Equal(before, f.snapshot()) {
		t.Fatal("a duplicate proof wrote an entry")
	}
	wantCounts(t, f.h, map[string]int64{"unauthenticated": 2, "stale_identity": 1, "invalid_field": 4,
		"applied_proof": 1, "duplicate": 2})
	assertNoSecret(t, f)
}

// Backends retry until a master accepts: a second copy answers OK and
// writes nothing, so the outbox stops.
func TestDuplicateReportAnswersOKAndWritesNothing(t *testing.T) {
	f := newFixture(t)
	rec := f.running("t1")
	r := validReport(rec, job.NativeOK)
	r.TerminationProof = ptr(wire.TLanceIndexTerminationProof_CHILD_REAPED)
	wantStatus(t, f.result(r), wire.TStatusCode_OK)
	before, n, wakes := f.snapshot(), f.prop.count(), f.waker.n.Load()

	for range 3 {
		wantStatus(t, f.result(r), wire.TStatusCode_OK)
	}
	if f.prop.count() != n || !bytes.Equal(before, f.snapshot()) {
		t.Fatal("a duplicate report wrote an entry")
	}
	if f.waker.n.Load() != wakes {
		t.Fatal("a duplicate woke the dispatcher")
	}
	wantCounts(t, f.h, map[string]int64{"applied_result": 1, "applied_proof": 1, "duplicate": 6})
}

// A result arriving after the job got another outcome (here the deadline
// sweep's NO_TRUSTED_RESULT) is acknowledged, never applied: UNKNOWN never
// turns into a known outcome.
func TestLateResultIsAcknowledgedNotApplied(t *testing.T) {
	f := newFixture(t)
	rec := f.running("t1")
	f.apply(raftfsm.CmdCompleteBatch, deadlineSweep(rec))
	before, n := f.snapshot(), f.prop.count()

	wantStatus(t, f.result(validReport(rec, job.NativeOK)), wire.TStatusCode_OK)
	if f.prop.count() != n || !bytes.Equal(before, f.snapshot()) {
		t.Fatal("a late result changed the state")
	}
	if got := f.job(rec.JobID); got.MutationState != job.Unknown {
		t.Fatalf("state = %s, want UNKNOWN", got.MutationState)
	}
	wantCounts(t, f.h, map[string]int64{"late_result": 1, "applied_result": 0})
	if len(f.logs.FilterMessageSnippet("another outcome").All()) != 1 {
		t.Fatal("a late result was not logged")
	}
}

// The FSM's guard is the last word: a result racing another completion
// (here a stale local read is simulated by completing between the read and
// the proposal) is acknowledged once the guard refuses it.
func TestCASLossIsAcknowledged(t *testing.T) {
	f := newFixture(t)
	rec := f.running("t1")
	res := parsedResult{code: job.NativeOK}
	id := identity{rec.JobID, rec.DispatchRevision, rec.InvocationID, rec.ProcessEpoch}
	f.apply(raftfsm.CmdCompleteBatch, deadlineSweep(rec)) // rec (RUNNING) is now stale
	if _, st := f.h.journal(context.Background(), rec, id, job.ProofNone, nil, buildInfo{}, &res); st.StatusCode != wire.TStatusCode_OK {
		t.Fatalf("status %v", st)
	}
	wantCounts(t, f.h, map[string]int64{"late_result": 1, "applied_result": 0})
}

func TestJournalFailuresAskForARetry(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want wire.TStatusCode
	}{
		{raftfsm.ErrNotLeader, wire.TStatusCode_NOT_LEADER},
		{fmt.Errorf("cluster: %w", raftfsm.ErrNoLeader), wire.TStatusCode_NOT_LEADER},
		{errors.New("cluster: fate unknown: timeout"), wire.TStatusCode_SERVICE_UNAVAILABLE},
	} {
		f := newFixture(t)
		rec := f.running("t1")
		before := f.snapshot()
		f.prop.err = tc.err
		wantStatus(t, f.result(validReport(rec, job.NativeOK)), tc.want)
		wantStatus(t, f.termination(validTermination(rec, wire.TLanceIndexTerminationProof_CHILD_REAPED)), tc.want)
		if !bytes.Equal(before, f.snapshot()) {
			t.Fatal("state changed")
		}
		wantCounts(t, f.h, map[string]int64{"unavailable": 2})
		f.prop.err = nil
		wantStatus(t, f.result(validReport(rec, job.NativeOK)), wire.TStatusCode_OK) // the retry lands
	}
}

// A new leader catches up once per term before it judges a report.
func TestCatchUpOncePerTerm(t *testing.T) {
	var calls int
	var fail error
	f := newFixture(t, func(d *Deps) {
		d.CatchUp = func(context.Context) error { calls++; return fail }
	})
	rec := f.running("t1")
	fail = raftfsm.ErrNotLeader
	wantStatus(t, f.result(validReport(rec, job.NativeOK)), wire.TStatusCode_NOT_LEADER)
	if got := f.job(rec.JobID); got.MutationState != job.Running {
		t.Fatal("a report was judged before the catch-up")
	}
	fail = nil
	wantStatus(t, f.result(validReport(rec, job.NativeOK)), wire.TStatusCode_OK)
	wantStatus(t, f.result(validReport(rec, job.NativeOK)), wire.TStatusCode_OK)
	if calls != 2 {
		t.Fatalf("catch-up ran %d times in one term, want 2 (one failed, one succeeded)", calls)
	}
	f.prop.SetTerm(4)
	wantStatus(t, f.result(validReport(rec, job.NativeOK)), wire.TStatusCode_OK)
	if calls != 3 {
		t.Fatalf("catch-up ran %d times, want once more in a new term", calls)
	}
}

func TestNilReports(t *testing.T) {
	f := newFixture(t)
	wantStatus(t, f.h.HandleResult(context.Background(), nil), wire.TStatusCode_INVALID_ARGUMENT)
	wantStatus(t, f.h.HandleTermination(context.Background(), nil), wire.TStatusCode_INVALID_ARGUMENT)
}

func TestCountsListEveryReason(t *testing.T) {
	f := newFixture(t)
	got := f.h.Counts()
	for _, name := range ReasonNames() {
		if _, ok := got[name]; !ok {
			t.Errorf("Counts lacks %q", name)
		}
	}
	if len(got) != len(ReasonNames()) || int(numReasons) != len(ReasonNames()) {
		t.Fatalf("Counts has %d reasons, want %d", len(got), numReasons)
	}
}
