package report

import (
	"testing"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/options"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// runningOptimize admits an OPTIMIZE of db.table and dispatches it.
func (f *fixture) runningOptimize(table string) *job.Record {
	f.t.Helper()
	loc, err := job.DatasetLocator(testRoot, "db", table)
	if err != nil {
		f.t.Fatal(err)
	}
	r := job.NewOptimize(f.catalogID, "db", table, loc, "alice")
	return f.dispatch(f.apply(raftfsm.CmdAdmit, &journal.TAdmitCommand{NowMs: f.now, Job: raftfsm.RecordToThrift(r)}).GetID())
}

func optimizedReport(rec *job.Record) *wire.TLanceIndexJobReport {
	r := validReport(rec, job.NativeOK)
	r.DatasetVersion = thrift.Int64Ptr(12)
	r.OptimizedIndexes = []*wire.TOptimizedIndex{{Name: "vec",
		Before: &wire.TIndexCounts{IndexUUID: thrift.StringPtr(testUUID), IndexedRows: thrift.Int64Ptr(90), UnindexedRows: thrift.Int64Ptr(10), Segments: thrift.Int32Ptr(3)},
		After:  &wire.TIndexCounts{IndexedRows: thrift.Int64Ptr(100), UnindexedRows: thrift.Int64Ptr(0), Segments: thrift.Int32Ptr(1)}}}
	return r
}

func TestOptimizeResultIsRelayed(t *testing.T) {
	f := newFixture(t)
	rec := f.runningOptimize("t1")
	wantStatus(t, f.result(optimizedReport(rec)), wire.TStatusCode_OK)
	got := f.job(rec.JobID)
	ixs := job.DecodeOptimized(got.OptimizedIndexes)
	if got.MutationState != job.Committed || got.ResultDatasetVersion != 12 || len(ixs) != 1 ||
		ixs[0].Before.UnindexedRows != 10 || ixs[0].Before.IndexUUID != testUUID || ixs[0].After.Segments != 1 {
		t.Fatalf("job = %s v%d %+v", got.MutationState, got.ResultDatasetVersion, ixs)
	}
}

func TestOptimizeResultOverBoundsDropsTheListNotTheResult(t *testing.T) {
	f := newFixture(t)
	rec := f.runningOptimize("t1")
	r := optimizedReport(rec)
	for range job.MaxOptimizedIndexes {
		r.OptimizedIndexes = append(r.OptimizedIndexes, &wire.TOptimizedIndex{Name: "ix"})
	}
	wantStatus(t, f.result(r), wire.TStatusCode_INVALID_ARGUMENT)
	if got := f.job(rec.JobID); got.MutationState != job.Committed || got.OptimizedIndexes != "" || got.ResultDatasetVersion != 12 {
		t.Fatalf("job = %s %q v%d", got.MutationState, got.OptimizedIndexes, got.ResultDatasetVersion)
	}
}

// A crashed OPTIMIZE (a termination without a result) returns to PENDING
// while attempts are left, then ends UNKNOWN: never RESOLVING.
func TestOptimizeTerminationWithoutResultReturnsToPending(t *testing.T) {
	f := newFixture(t)
	f.apply(raftfsm.CmdSetOption, &journal.TSetOptionCommand{NowMs: f.now, Key: options.OptMaxDispatchAttempts, Value: "2"})
	rec := f.runningOptimize("t1")
	crash := func(rec *job.Record) {
		t.Helper()
		tr := validTermination(rec, wire.TLanceIndexTerminationProof_CHILD_REAPED)
		tr.NoResult_ = thrift.BoolPtr(true)
		tr.SanitizedMessage = thrift.StringPtr("killed")
		tr.IndexUUID = thrift.StringPtr(testUUID)
		wantStatus(t, f.termination(tr), wire.TStatusCode_OK)
	}
	n := f.prop.count()
	crash(rec)
	items := f.prop.reportItemsSince(t, n)
	if len(items) != 1 || !items[0].Proof.GetReturnToPending() || items[0].Proof.IndexUUID != nil || items[0].Proof.ResolveAfterMs != nil {
		t.Fatalf("journaled %+v", items)
	}
	got := f.job(rec.JobID)
	if got.MutationState != job.Pending || got.DispatchAttempts != 1 || got.HoldsPossibleLiveSlot() {
		t.Fatalf("after the first crash: %s attempts %d", got.MutationState, got.DispatchAttempts)
	}
	crash(f.dispatch(rec.JobID))
	got = f.job(rec.JobID)
	if got.MutationState != job.Unknown || got.Result.Code != job.NoTrustedResult || got.HoldsPossibleLiveSlot() {
		t.Fatalf("attempts used up: %s %s", got.MutationState, got.Result.Code)
	}
}
