package report

import (
	"fmt"
	"strings"
	"testing"

	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/testkit"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
)

// deadlineSweep is the M2 the deadline sweep journals: NO_TRUSTED_RESULT.
func deadlineSweep(rec *job.Record) *journal.TCompleteBatch {
	code := journal.TResultCode(job.NoTrustedResult)
	return &journal.TCompleteBatch{NowMs: 2_000_000, Completions: []*journal.TCompletion{{
		JobID: rec.JobID, DispatchRevision: rec.DispatchRevision, InvocationID: rec.InvocationID,
		ProcessEpoch: rec.ProcessEpoch, Result_: &journal.TJobResult_{Code: &code}}}}
}

// assertNoSecret fails when the secret, or any 8-byte piece of it, shows in
// a log line (message or any field) or in a status the handler returned.
func assertNoSecret(t *testing.T, f *fixture) {
	t.Helper()
	texts := testkit.LogLines(f.logs)
	for _, st := range f.statuses {
		texts = append(texts, fmt.Sprint(st))
	}
	all := strings.Join(texts, "\n")
	for i := 0; i+8 <= len(testSecret); i++ {
		if piece := testSecret[i : i+8]; strings.Contains(all, piece) {
			t.Fatalf("the invocation secret (piece %q) leaked into a log line or status", piece)
		}
	}
	// Drops log ids, reason and code only: never a report's message text.
	if strings.Contains(all, "index built") {
		t.Fatal("a report's message text was logged or echoed")
	}
}

// Every path that logs, run with a debug-level observer: no line and no
// status carries the secret.
func TestSecretNeverLogged(t *testing.T) {
	f := newFixture(t)
	rec := f.running("t1")
	for _, edit := range []func(r *wireReport){
		func(r *wireReport) { r.InvocationSecret = nil },
		func(r *wireReport) { s := testSecret[:20]; r.InvocationSecret = &s },
		func(r *wireReport) { r.BeProcessEpoch++ },
		func(r *wireReport) { r.JobID = 12345 },
		func(r *wireReport) { r.ResultCode = nil },
	} {
		r := validReport(rec, job.NativeOK)
		edit(r)
		f.result(r)
	}
	f.result(validReport(rec, job.NativeOK))
	f.result(validReport(rec, job.NativeOK)) // duplicate
	f.result(validReport(rec, job.NativeIO)) // late
	if f.logs.Len() == 0 {
		t.Fatal("nothing was logged; the check would prove nothing")
	}
	assertNoSecret(t, f)
}

type wireReport = wire.TLanceIndexJobReport

// A drop line carries job_id, reason and code, nothing else; a flood of
// forged reports is counted exactly but logged sampled.
func TestDropLogsAreSparseAndSampled(t *testing.T) {
	f := newFixture(t)
	rec := f.running("t1")
	const n = 200
	for range n {
		r := validReport(rec, job.NativeOK)
		r.InvocationSecret = nil
		f.result(r)
	}
	wantCounts(t, f.h, map[string]int64{"unauthenticated": n})
	lines := f.logs.FilterMessageSnippet("report dropped").All()
	if len(lines) == 0 || len(lines) > dropLogFirst+1 {
		t.Fatalf("%d drop lines for %d drops; want sampled to about %d", len(lines), n, dropLogFirst)
	}
	for _, e := range lines {
		keys := make([]string, 0, len(e.Context))
		for _, fl := range e.Context {
			keys = append(keys, fl.Key)
		}
		if fmt.Sprint(keys) != "[job_id reason code]" {
			t.Fatalf("drop line fields = %v, want [job_id reason code]", keys)
		}
	}
	assertNoSecret(t, f)
}
