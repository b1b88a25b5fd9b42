package groupcommit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/testkit"
)

// okResp answers every item OK, naming it by its value.
func okResp(items []int) *journal.TApplyResponse {
	resp := &journal.TApplyResponse{Code: journal.TApplyCode_OK}
	for _, it := range items {
		resp.Items = append(resp.Items, &journal.TItemResult_{JobID: int64(it), Code: journal.TApplyCode_OK})
	}
	return resp
}

// waitUntil polls cond; on a timeout (5 s) it opens gate (so blocked flights
// end) and fails the test.
func waitUntil(t *testing.T, what string, gate chan struct{}, cond func() bool) {
	t.Helper()
	if !testkit.Poll(5*time.Second, cond) {
		close(gate)
		t.Fatalf("timed out waiting for %s", what)
	}
}

// settle waits until n items are queued or held by a flight.
func settle[I any](t *testing.T, g *Group[I], n int, gate chan struct{}) {
	t.Helper()
	waitUntil(t, fmt.Sprintf("%d items waiting", n), gate, func() bool { return g.Waiting() >= n })
}

// taken waits until n items have been taken by flights.
func taken[I any](t *testing.T, g *Group[I], n int, gate chan struct{}) {
	t.Helper()
	waitUntil(t, fmt.Sprintf("%d items in flight", n), gate, func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.taken == n
	})
}

// Items submitted while batches are in flight share the next entry, and
// every caller gets its own item's answer.
func TestPacksConcurrentItems(t *testing.T) {
	const n, flights = 50, 2
	gate := make(chan struct{})
	var calls atomic.Int64
	var sizes sync.Map
	g := New(Config[int64]{MaxItems: 16, MaxFlights: flights, Propose: func(_ context.Context, items []int64) (*journal.TApplyResponse, error) {
		c := calls.Add(1)
		sizes.Store(c, len(items))
		<-gate
		resp := &journal.TApplyResponse{Code: journal.TApplyCode_OK, Index: &c}
		for _, id := range items {
			code := journal.TApplyCode_OK
			if id%2 == 1 {
				code = journal.TApplyCode_CAS_FAILED
			}
			resp.Items = append(resp.Items, &journal.TItemResult_{JobID: id, Code: code})
		}
		return resp, nil
	}})
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range int64(n) {
		wg.Go(func() {
			o := g.Do(context.Background(), i)
			switch {
			case o.Err != nil:
				errs <- o.Err
			case o.Item.JobID != i:
				errs <- fmt.Errorf("item %d got the answer for %d", i, o.Item.JobID)
			case (o.Item.Code == journal.TApplyCode_OK) != (i%2 == 0):
				errs <- fmt.Errorf("item %d got %v", i, o.Item.Code)
			case o.Index < 1 || o.Index > calls.Load():
				errs <- fmt.Errorf("item %d got index %d", i, o.Index)
			}
		})
	}
	settle(t, g, n, gate)
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
	if g.flights != 0 || len(g.queue) != 0 || g.taken != 0 {
		t.Fatalf("flights %d queue %d taken %d after the work is done", g.flights, len(g.queue), g.taken)
	}
}

// Under light load an item is proposed at once, alone: batching adds no
// latency. Items that queue behind a full set of flights leave together, in
// submission order.
func TestLightLoadAloneHeavyLoadInOrder(t *testing.T) {
	var mu sync.Mutex
	var batches [][]int
	record := func(items []int) {
		mu.Lock()
		batches = append(batches, slices.Clone(items))
		mu.Unlock()
	}
	g := New(Config[int]{MaxItems: 8, MaxFlights: 2, Propose: func(_ context.Context, items []int) (*journal.TApplyResponse, error) {
		record(items)
		return okResp(items), nil
	}})
	for i := range 5 {
		if o := g.Do(context.Background(), i); o.Err != nil || o.Item.JobID != int64(i) {
			t.Fatalf("item %d: %+v", i, o)
		}
	}
	if len(batches) != 5 {
		t.Fatalf("batches %v: sequential items must each get their own flight", batches)
	}

	gate := make(chan struct{})
	blocked := New(Config[int]{MaxItems: 8, MaxFlights: 1, Propose: func(_ context.Context, items []int) (*journal.TApplyResponse, error) {
		<-gate
		record(items)
		return okResp(items), nil
	}})
	batches = nil
	var wg sync.WaitGroup
	wg.Go(func() { blocked.Do(context.Background(), 0) })
	taken(t, blocked, 1, gate)
	for i := 1; i <= 3; i++ {
		wg.Go(func() { blocked.Do(context.Background(), i) })
		settle(t, blocked, i+1, gate)
	}
	close(gate)
	wg.Wait()
	if len(batches) != 2 || !slices.Equal(batches[1], []int{1, 2, 3}) {
		t.Fatalf("batches %v, want [[0] [1 2 3]]", batches)
	}
}

// MaxBytes splits the queue by size; an oversized item goes alone.
func TestMaxBytesBoundsABatch(t *testing.T) {
	gate := make(chan struct{})
	var mu sync.Mutex
	var batches [][]int
	g := New(Config[int]{MaxItems: 100, MaxFlights: 1, MaxBytes: 10, Size: func(i int) int { return i },
		Propose: func(_ context.Context, items []int) (*journal.TApplyResponse, error) {
			<-gate
			mu.Lock()
			batches = append(batches, slices.Clone(items))
			mu.Unlock()
			return okResp(items), nil
		}})
	var wg sync.WaitGroup
	wg.Go(func() { g.Do(context.Background(), 1) })
	taken(t, g, 1, gate)
	for k, size := range []int{4, 5, 2, 30, 3, 3, 3, 3} {
		wg.Go(func() {
			if o := g.Do(context.Background(), size); o.Err != nil || o.Item.JobID != int64(size) {
				t.Errorf("item of size %d: %+v", size, o)
			}
		})
		settle(t, g, k+2, gate)
	}
	close(gate)
	wg.Wait()
	want := [][]int{{1}, {4, 5}, {2}, {30}, {3, 3, 3}, {3}}
	if len(batches) != len(want) {
		t.Fatalf("batches %v, want %v", batches, want)
	}
	for i := range want {
		if !slices.Equal(batches[i], want[i]) {
			t.Fatalf("batches %v, want %v", batches, want)
		}
	}
}

func TestFailuresReachEveryCaller(t *testing.T) {
	errRaft := errors.New("raft: timeout")
	for _, tc := range []struct {
		name string
		resp *journal.TApplyResponse
		err  error
		want error
	}{
		{"error", nil, errRaft, errRaft},
		{"no response", nil, nil, ErrBatchRefused},
		{"refused", &journal.TApplyResponse{Code: journal.TApplyCode_INVALID}, nil, ErrBatchRefused},
		{"short", &journal.TApplyResponse{Code: journal.TApplyCode_OK}, nil, ErrBatchRefused},
	} {
		gate := make(chan struct{})
		g := New(Config[int]{MaxItems: 4, MaxFlights: 1, Propose: func(context.Context, []int) (*journal.TApplyResponse, error) {
			<-gate
			return tc.resp, tc.err
		}})
		var wg sync.WaitGroup
		for i := range 3 {
			wg.Go(func() {
				if o := g.Do(context.Background(), i); !errors.Is(o.Err, tc.want) || o.Item != nil {
					t.Errorf("%s: item %d: %+v, want %v", tc.name, i, o, tc.want)
				}
			})
		}
		settle(t, g, 3, gate)
		close(gate)
		wg.Wait()
	}
}

// A caller that stops waiting gets an error wrapping ctx's; the flight
// finishes alone, and the proposal's context is the group's, bounded.
func TestCallerThatStopsWaiting(t *testing.T) {
	gate := make(chan struct{})
	var deadline atomic.Int64
	g := New(Config[int]{MaxItems: 4, MaxFlights: 1, Timeout: time.Minute, Propose: func(ctx context.Context, items []int) (*journal.TApplyResponse, error) {
		if dl, ok := ctx.Deadline(); ok {
			deadline.Store(int64(time.Until(dl)))
		}
		<-gate
		return okResp(items), ctx.Err()
	}})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if o := g.Do(ctx, 1); !errors.Is(o.Err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", o.Err)
	}
	close(gate)
	if o := g.Do(context.Background(), 2); o.Err != nil {
		t.Fatalf("next item: %v", o.Err)
	}
	if d := time.Duration(deadline.Load()); d <= 50*time.Second || d > time.Minute {
		t.Fatalf("the proposal's deadline is %v away, want the group's minute", d)
	}
}

func TestNewDefaultsAndWiringBugs(t *testing.T) {
	propose := func(context.Context, []int) (*journal.TApplyResponse, error) { return nil, nil }
	g := New(Config[int]{MaxItems: 0, MaxFlights: -1, Propose: propose})
	if g.c.MaxItems != 1 || g.c.MaxFlights != 1 || g.c.Timeout != DefaultTimeout {
		t.Fatalf("limits %+v", g.c)
	}
	for name, c := range map[string]Config[int]{
		"no propose":     {MaxItems: 1},
		"bytes, no size": {MaxItems: 1, MaxBytes: 10, Propose: propose},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: New did not panic", name)
				}
			}()
			New(c)
		}()
	}
}
