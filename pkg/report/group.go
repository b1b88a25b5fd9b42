package report

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/lancemaster/lancemaster/gen-go/journal"
)

// group is a group commit for one batch command (CompleteBatch or
// RecordProofBatch): items submitted while earlier batches are in flight are
// packed into one Raft entry, up to maxItems, and each caller gets its own
// item's result. Raft here is fsync-bound, so packing many transitions into
// one entry is what makes report throughput scale (docs/decisions.md,
// "Command batching"); the FSM still guards every item on its own.
//
// At most maxFlights batches are in flight at once. Under light load every
// item gets a flight of its own at once, so batching never adds latency.
//
// Concurrency: do is safe for concurrent use. Flights run on goroutines that
// exist only while the queue is non-empty, so a group needs no Close.
type group[I any] struct {
	propose    func(ctx context.Context, items []I) (*journal.TApplyResponse, error)
	maxItems   int
	maxFlights int
	timeout    time.Duration // bounds one proposal; flights outlive any one caller's ctx

	mu      sync.Mutex
	queue   []*pending[I]
	flights int
	taken   int // items in flight (taken from the queue, not yet answered)
}

type pending[I any] struct {
	item I
	done chan outcome // buffered: a flight never blocks on a caller that gave up
}

type outcome struct {
	item  *journal.TItemResult_
	index int64 // the entry's log index, when known
	err   error
}

// errBatchRefused: the whole batch was refused (not OK at the entry level),
// which no well-formed batch of this package's commands should be.
var errBatchRefused = errors.New("report: batch command refused")

func newGroup[I any](maxItems, maxFlights int, timeout time.Duration,
	propose func(ctx context.Context, items []I) (*journal.TApplyResponse, error)) *group[I] {
	return &group[I]{propose: propose, maxItems: maxItems, maxFlights: maxFlights, timeout: timeout}
}

// do submits one item and waits for its result, or for ctx. When ctx wins,
// the item may still be applied: the caller answers "retry", which is
// harmless because applying twice is.
func (g *group[I]) do(ctx context.Context, item I) outcome {
	p := &pending[I]{item: item, done: make(chan outcome, 1)}
	g.mu.Lock()
	g.queue = append(g.queue, p)
	if g.flights < g.maxFlights {
		g.flights++
		go g.fly()
	}
	g.mu.Unlock()
	select {
	case o := <-p.done:
		return o
	case <-ctx.Done():
		return outcome{err: fmt.Errorf("report: stopped waiting for the journal: %w", ctx.Err())}
	}
}

// waiting is how many items are queued or in flight.
func (g *group[I]) waiting() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.queue) + g.taken
}

// fly proposes batches until the queue is empty.
func (g *group[I]) fly() {
	for {
		g.mu.Lock()
		n := min(len(g.queue), g.maxItems)
		if n == 0 {
			g.flights--
			g.mu.Unlock()
			return
		}
		batch := g.queue[:n:n]
		g.queue = g.queue[n:]
		g.taken += n
		g.mu.Unlock()
		g.flush(batch)
		g.mu.Lock()
		g.taken -= n
		g.mu.Unlock()
	}
}

func (g *group[I]) flush(batch []*pending[I]) {
	items := make([]I, len(batch))
	for i, p := range batch {
		items[i] = p.item
	}
	ctx, cancel := context.WithTimeout(context.Background(), g.timeout)
	resp, err := g.propose(ctx, items)
	cancel()
	switch {
	case err != nil:
	case resp == nil:
		err = fmt.Errorf("%w: no response", errBatchRefused)
	case resp.Code != journal.TApplyCode_OK:
		err = fmt.Errorf("%w: %v", errBatchRefused, resp.Code)
	case len(resp.Items) != len(batch):
		err = fmt.Errorf("%w: %d item results for %d items", errBatchRefused, len(resp.Items), len(batch))
	}
	for i, p := range batch {
		if err != nil {
			p.done <- outcome{err: err}
			continue
		}
		p.done <- outcome{item: resp.Items[i], index: resp.GetIndex()}
	}
}
