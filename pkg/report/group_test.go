package report

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/job"
)

// The group commit itself is tested in pkg/groupcommit.

// Many backends reporting at once: every result lands exactly once, in
// fewer entries than reports, and the counters add up (run with -race).
func TestConcurrentReports(t *testing.T) {
	const n = 64
	f := newFixture(t)
	recs := make([]*job.Record, n)
	for i := range recs {
		recs[i] = f.running(fmt.Sprintf("t%d", i))
	}
	before := f.prop.count()
	f.prop.gate = make(chan struct{})
	var wg sync.WaitGroup
	for i, rec := range recs {
		wg.Go(func() {
			r := validReport(rec, job.NativeOK)
			if i%2 == 0 {
				r.TerminationProof = ptr(wire.TLanceIndexTerminationProof_CHILD_REAPED)
			}
			if st := f.h.HandleResult(context.Background(), r); st.StatusCode != wire.TStatusCode_OK {
				t.Errorf("job %d: %v %v", rec.JobID, st.StatusCode, st.ErrorMsgs)
			}
			// A concurrent duplicate of every report.
			if st := f.h.HandleResult(context.Background(), r); st.StatusCode != wire.TStatusCode_OK {
				t.Errorf("job %d duplicate: %v %v", rec.JobID, st.StatusCode, st.ErrorMsgs)
			}
		})
	}
	// Every report is queued, or held by a flight blocked on the gate,
	// before the journal opens.
	waiting := func() int { return f.h.reports.Waiting() }
	for deadline := time.Now().Add(5 * time.Second); waiting() < n; {
		if time.Now().After(deadline) {
			close(f.prop.gate)
			t.Fatalf("only %d reports waiting", waiting())
		}
		time.Sleep(time.Millisecond)
	}
	close(f.prop.gate)
	wg.Wait()
	for _, rec := range recs {
		if got := f.job(rec.JobID); got.MutationState != job.Committed {
			t.Fatalf("job %d is %s", rec.JobID, got.MutationState)
		}
	}
	entries := f.prop.count() - before
	if entries >= n+n/2 {
		t.Fatalf("%d entries for %d results and %d proofs; want batching", entries, n, n/2)
	}
	wantCounts(t, f.h, map[string]int64{"applied_result": n, "applied_proof": n / 2, "duplicate": n + n/2})
}
