// Package groupcommit is a group commit for the journal's batch commands:
// items submitted while earlier batches are in flight are packed into one
// Raft entry, and each caller gets its own item's result.
//
// Raft here is fsync-bound and, with three replicas on shared cores, each
// entry also costs a fixed amount of CPU on every replica; packing many items
// into one entry is what makes a write path scale (docs/decisions.md,
// "Command batching"). The FSM still guards every item on its own: one
// item's refusal never fails another.
//
// At most MaxFlights batches are in flight at once, each of at most MaxItems
// items (and, optionally, MaxBytes). Under light load every item gets a flight of its own at once, so
// batching never adds latency; only items that arrive while MaxFlights
// batches are already in flight wait, and they leave together with the next
// flight.
//
// The package knows nothing of what a batch means: the caller's propose
// function builds the command from the items (one clock for the entry) and
// proposes it; the group checks the entry-level answer (OK, one item result
// per item, in order) and hands every caller its item.
package groupcommit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/lancemaster/lancemaster/gen-go/journal"
)

// ProposeFunc proposes one batch and returns the entry's Apply response, or
// an error when the entry's fate is not known to be "applied" (the error
// reaches every caller of the batch unchanged, so errors.Is works on it).
// It is called from the group's own goroutines, at most MaxFlights at once,
// with a context bounded by Config.Timeout and detached from any caller's.
type ProposeFunc[I any] func(ctx context.Context, items []I) (*journal.TApplyResponse, error)

// Outcome is one item's answer.
type Outcome struct {
	// Item is this item's result (its position in the batch's Items). Nil
	// when Err is set.
	Item *journal.TItemResult_
	// Index is the log index of the entry that carried the item, when the
	// proposer reported it (0 otherwise): a caller on a follower waits for
	// its own replica to apply it (read-your-writes).
	Index int64
	// Err: the batch failed as a whole (the proposer's error, unchanged, or
	// ErrBatchRefused), or the caller stopped waiting (it wraps ctx.Err()).
	// In the last case the item may still be applied.
	Err error
}

// ErrBatchRefused is the error of every item of a batch whose entry was
// answered without a per-item result for each item (a response that is
// missing, not OK at the entry level, or of the wrong length). No
// well-formed batch command is answered so.
var ErrBatchRefused = errors.New("groupcommit: batch command refused")

// Config is a Group's limits and its proposer.
type Config[I any] struct {
	// MaxItems bounds the items of one batch (at least 1).
	MaxItems int
	// MaxFlights bounds the batches in flight at once (at least 1).
	MaxFlights int
	// MaxBytes, when positive, bounds the sum of Size over one batch's items,
	// so that an entry stays under the frame a follower forwards it in. An
	// item larger than MaxBytes goes in a batch of its own. Size is then
	// required; it is called once per item, in Do.
	MaxBytes int
	Size     func(item I) int
	// Timeout bounds one proposal (default 10 s). Flights outlive any one
	// caller's context.
	Timeout time.Duration
	// Propose proposes one batch (required).
	Propose ProposeFunc[I]
}

// DefaultTimeout is the Timeout of a Config that sets none.
const DefaultTimeout = 10 * time.Second

// Group packs the items of one batch command type. Create it with New.
//
// Concurrency: Do and Waiting are safe for concurrent use. Flights run on
// goroutines that exist only while the queue is non-empty, so a Group needs
// no Close and holds no goroutine while idle.
type Group[I any] struct {
	c Config[I]

	mu      sync.Mutex
	queue   []*pending[I]
	flights int
	taken   int // items in flight (taken from the queue, not yet answered)
}

type pending[I any] struct {
	item I
	size int
	done chan Outcome // buffered: a flight never blocks on a caller that gave up
}

// New returns a Group for c. Limits below 1 are raised to 1 and a missing
// Timeout takes DefaultTimeout. It panics without Propose, or with MaxBytes
// but no Size: wiring bugs, found at start-up.
func New[I any](c Config[I]) *Group[I] {
	if c.Propose == nil {
		panic("groupcommit.New: Propose is required")
	}
	if c.MaxBytes > 0 && c.Size == nil {
		panic("groupcommit.New: MaxBytes needs Size")
	}
	c.MaxItems, c.MaxFlights = max(c.MaxItems, 1), max(c.MaxFlights, 1)
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	return &Group[I]{c: c}
}

// Do submits one item and waits for its result, or for ctx. When ctx wins,
// the item may still be proposed and applied: the caller must treat the
// outcome as unknown.
func (g *Group[I]) Do(ctx context.Context, item I) Outcome {
	p := &pending[I]{item: item, done: make(chan Outcome, 1)}
	if g.c.MaxBytes > 0 {
		p.size = g.c.Size(item)
	}
	g.mu.Lock()
	g.queue = append(g.queue, p)
	if g.flights < g.c.MaxFlights {
		g.flights++
		go g.fly()
	}
	g.mu.Unlock()
	select {
	case o := <-p.done:
		return o
	case <-ctx.Done():
		return Outcome{Err: fmt.Errorf("groupcommit: stopped waiting for the journal: %w", ctx.Err())}
	}
}

// Waiting is how many items are queued or in flight.
func (g *Group[I]) Waiting() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.queue) + g.taken
}

// fly proposes batches until the queue is empty.
func (g *Group[I]) fly() {
	for {
		g.mu.Lock()
		n := g.next()
		if n == 0 {
			g.flights--
			g.queue = nil // drop the drained backing array and what it references
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

// next is how many items at the head of the queue make the next batch.
// Called with mu held.
func (g *Group[I]) next() int {
	n := min(len(g.queue), g.c.MaxItems)
	if g.c.MaxBytes <= 0 {
		return n
	}
	bytes := 0
	for i, p := range g.queue[:n] {
		if bytes += p.size; bytes > g.c.MaxBytes && i > 0 {
			return i
		}
	}
	return n
}

func (g *Group[I]) flush(batch []*pending[I]) {
	items := make([]I, len(batch))
	for i, p := range batch {
		items[i] = p.item
	}
	ctx, cancel := context.WithTimeout(context.Background(), g.c.Timeout)
	resp, err := g.c.Propose(ctx, items)
	cancel()
	switch {
	case err != nil:
	case resp == nil:
		err = fmt.Errorf("%w: no response", ErrBatchRefused)
	case resp.Code != journal.TApplyCode_OK:
		err = fmt.Errorf("%w: %v: %s", ErrBatchRefused, resp.Code, resp.GetMessage())
	case len(resp.Items) != len(batch):
		err = fmt.Errorf("%w: %d item results for %d items", ErrBatchRefused, len(resp.Items), len(batch))
	}
	for i, p := range batch {
		if err != nil {
			p.done <- Outcome{Err: err}
			continue
		}
		p.done <- Outcome{Item: resp.Items[i], Index: resp.GetIndex()}
	}
}
