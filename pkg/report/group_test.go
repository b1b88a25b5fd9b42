package report

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/job"
)

// Items submitted while batches are in flight share the next entry, and
// every caller gets its own item's answer.
func TestGroupPacksConcurrentItems(t *testing.T) {
	const n, flights = 50, 2
	gate := make(chan struct{})
	var calls atomic.Int64
	var sizes sync.Map
	g := newGroup(16, flights, time.Second, func(_ context.Context, items []int64) (*journal.TApplyResponse, error) {
		c := calls.Add(1)
		sizes.Store(c, len(items))
		<-gate
		resp := &journal.TApplyResponse{Code: journal.TApplyCode_OK}
		for _, id := range items {
			code := journal.TApplyCode_OK
			if id%2 == 1 {
				code = journal.TApplyCode_CAS_FAILED
			}
			resp.Items = append(resp.Items, &journal.TItemResult_{JobID: id, Code: code})
		}
		return resp, nil
	})
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range int64(n) {
		wg.Go(func() {
			o := g.do(context.Background(), i)
			switch {
			case o.err != nil:
				errs <- o.err
			case o.item.JobID != i:
				errs <- fmt.Errorf("item %d got the answer for %d", i, o.item.JobID)
			case (o.item.Code == journal.TApplyCode_OK) != (i%2 == 0):
				errs <- fmt.Errorf("item %d got %v", i, o.item.Code)
			}
		})
	}
	// Wait until every item is either in a blocked flight or queued.
	for deadline := time.Now().Add(5 * time.Second); g.waiting() < n; {
		if time.Now().After(deadline) {
			close(gate)
			t.Fatalf("items never settled: %d waiting", g.waiting())
		}
		time.Sleep(time.Millisecond)
	}
	close(gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// flights in flight first, then the queue in batches of at most 16.
	if c := calls.Load(); c >= n || c > flights+int64((n+15)/16) {
		t.Fatalf("%d proposals for %d items; want them packed", c, n)
	}
	sizes.Range(func(_, v any) bool {
		if v.(int) > 16 {
			t.Errorf("a batch of %d items exceeds the limit", v)
		}
		return true
	})
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.flights != 0 || len(g.queue) != 0 {
		t.Fatalf("flights %d queue %d after the work is done", g.flights, len(g.queue))
	}
}

func TestGroupFailuresReachEveryCaller(t *testing.T) {
	for _, tc := range []struct {
		name string
		resp *journal.TApplyResponse
		err  error
	}{
		{"error", nil, errors.New("raft: timeout")},
		{"no response", nil, nil},
		{"refused", &journal.TApplyResponse{Code: journal.TApplyCode_INVALID}, nil},
		{"short", &journal.TApplyResponse{Code: journal.TApplyCode_OK}, nil},
	} {
		g := newGroup(4, 1, time.Second, func(context.Context, []int) (*journal.TApplyResponse, error) { return tc.resp, tc.err })
		if o := g.do(context.Background(), 1); o.err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
	// A caller that stops waiting gets an error; the flight finishes alone.
	gate := make(chan struct{})
	g := newGroup(4, 1, time.Second, func(context.Context, []int) (*journal.TApplyResponse, error) {
		<-gate
		return nil, errors.New("late")
	})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if o := g.do(ctx, 1); !errors.Is(o.err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", o.err)
	}
	close(gate)
}

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
	waiting := func() int { return f.h.results.waiting() + f.h.proofs.waiting() }
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
