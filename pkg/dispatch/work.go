package dispatch

import (
	"context"
	"maps"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/groupcommit"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// Group commit limits of the completions journaled by sends and resolves.
const (
	// completionBatchItems keeps an entry well under the frame limit: an
	// item is at most ~1.4 KiB (a 1 KiB message plus ids).
	completionBatchItems = 256
	// completionFlights is how many CompleteBatch entries may be in flight.
	completionFlights = 2
	// completionTries and completionRetryWait: a failed entry is proposed
	// again after 100 ms, then 200 ms.
	completionTries     = 3
	completionRetryWait = 100 * time.Millisecond
)

// termWork is the work of one leadership term that outlives the round that
// started it (DESIGN.md §13.9): sends and resolves run on their own
// goroutines, each journals its outcome as soon as it is known, through one
// group commit, so that a slow or hung backend holds neither the other
// backends nor the next round.
//
// Concurrency: every method is safe for concurrent use. Calls are started
// only by the round (under roundMu); they run under the term's context, so
// a leadership end cancels them, and wait (Run does, before it returns)
// blocks until every call and its journal write has returned.
type termWork struct {
	d     *Dispatcher
	waker *Waker // the dispatcher's (Deps.Waker): an ended call wakes a round
	term  uint64
	ctx   context.Context // the leadership's: every call and write of the term runs under it
	prev  *termWork       // replaced, maybe not yet waited for (Wait forgets it)

	completions *groupcommit.Group[*journal.TCompletion]
	wg          sync.WaitGroup

	mu         sync.Mutex
	jobs       map[int64]bool // jobs with a send or resolve in flight
	perBackend map[int64]int  // calls in flight per backend
	// starved: backends a round left work for because they had no room for
	// another call; the end of one of their calls wakes the dispatcher.
	starved    map[int64]bool
	lowerEpoch map[int64]int64 // per backend, the lower epoch last warned about
	// sent remembers, per job, the invocation handed to Submit during this
	// term. A dispatch of the current term may still be on the wire after
	// its send failed, so reconcile never reads UNKNOWN_INVOCATION as a
	// proof for it (the term fence only covers older leaders).
	sent           map[int64]string
	sentAfterPrune int // len(sent) after the last prune (see pruneSent)
	resolveTries   map[int64]int
}

func newTermWork(d *Dispatcher, ctx context.Context, term uint64) *termWork {
	w := &termWork{d: d, waker: d.d.Waker, term: term, ctx: ctx, jobs: map[int64]bool{}, perBackend: map[int64]int{}, starved: map[int64]bool{},
		lowerEpoch: map[int64]int64{}, sent: map[int64]string{}, resolveTries: map[int64]int{}}
	w.completions = groupcommit.New(groupcommit.Config[*journal.TCompletion]{
		MaxItems: completionBatchItems, MaxFlights: completionFlights,
		Propose: func(fctx context.Context, items []*journal.TCompletion) (*journal.TApplyResponse, error) {
			// The flight's context bounds the proposal; the term's makes sure
			// a service whose term is over cannot write.
			pctx, cancel := context.WithCancel(w.ctx)
			stop := context.AfterFunc(fctx, cancel)
			defer func() { stop(); cancel() }()
			return propose(pctx, d.d.Proposer, raftfsm.CmdCompleteBatch,
				&journal.TCompleteBatch{NowMs: d.d.Clock().UnixMilli(), Completions: items})
		}})
	return w
}

// work returns the term's work, starting a new one when the term changed
// or the one of this term has a context that ended (a caller that is not
// Run, e.g. a test, called with a short-lived context first). Called with
// roundMu held.
func (d *Dispatcher) work(ctx context.Context, term uint64) *termWork {
	d.workMu.Lock()
	defer d.workMu.Unlock()
	if c := d.cur; c == nil || c.term != term || (c.ctx.Err() != nil && ctx.Err() == nil) {
		w := newTermWork(d, ctx, term)
		w.prev = c
		if c != nil && c.term == term {
			c.mu.Lock()
			w.sent = maps.Clone(c.sent) // still this term's dispatches on the wire
			c.mu.Unlock()
		}
		d.cur = w
	}
	return d.cur
}

// current returns the term's work if the current one is of term.
func (d *Dispatcher) current(term uint64) *termWork {
	d.workMu.Lock()
	defer d.workMu.Unlock()
	if d.cur != nil && d.cur.term == term {
		return d.cur
	}
	return nil
}

// Wait blocks until every send and resolve the dispatcher started, and its
// journal write, has returned. Run calls it before it returns; a call still
// in flight when the term's context ends returns at once (its context is
// the term's).
func (d *Dispatcher) Wait() {
	d.roundMu.Lock() // no round starts calls while we wait
	defer d.roundMu.Unlock()
	d.workMu.Lock()
	w := d.cur
	d.workMu.Unlock()
	for c := w; c != nil; c = c.prev {
		c.wg.Wait()
	}
	if w != nil {
		d.workMu.Lock()
		w.prev = nil
		d.workMu.Unlock()
	}
}

// busy reports whether a send or resolve of the job is in flight.
func (w *termWork) busy(jobID int64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.jobs[jobID]
}

// inflight is the number of calls in flight to a backend.
func (w *termWork) inflight(backendID int64) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.perBackend[backendID]
}

// start runs fn on its own goroutine, tracked as a call about jobIDs to
// backendID. When a backend had reached bound calls in flight, or a round
// found it without room (awaitRoom), the end of one wakes the dispatcher
// (work waited for that room).
func (w *termWork) start(jobIDs []int64, backendID int64, bound int, fn func()) {
	w.mu.Lock()
	for _, id := range jobIDs {
		w.jobs[id] = true
	}
	w.perBackend[backendID]++
	w.mu.Unlock()
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer func() {
			w.mu.Lock()
			full := w.perBackend[backendID] >= bound || w.starved[backendID]
			delete(w.starved, backendID)
			for _, id := range jobIDs {
				delete(w.jobs, id)
			}
			if w.perBackend[backendID]--; w.perBackend[backendID] <= 0 {
				delete(w.perBackend, backendID)
			}
			w.mu.Unlock()
			if full {
				w.waker.Wake()
			}
		}()
		fn()
	}()
}

// awaitRoom is called by a round, after it started its calls, with the
// backends it found without room for another (bound in flight, its own
// counted). The round's view is older than the counters: a call may have
// ended since it looked, and that end did not wake anyone (the backend was
// not at bound then, or not yet marked). So, under the counters' lock:
// where room exists now the dispatcher is woken at once; elsewhere the
// backend is marked starved, and the end of its next call wakes it. No end
// of a call is missed, so a backlog drains without waiting for the
// interval, and a backend that stays busy is never polled.
func (w *termWork) awaitRoom(backendIDs []int64, bound int) {
	if len(backendIDs) == 0 {
		return
	}
	w.mu.Lock()
	wake := false
	for _, id := range backendIDs {
		if w.perBackend[id] < bound {
			wake = true
		} else {
			w.starved[id] = true
		}
	}
	w.mu.Unlock()
	if wake {
		w.waker.Wake()
	}
}

// complete journals one M2 / M2' / M2″ through the group commit and
// returns its item's result, or nil when the entry failed: logged. A
// failed entry is retried (completionTries in all, while the term lasts):
// every item is guarded by the dispatch identity, so a retry of an entry
// that did apply is a harmless refusal, and an outcome that is known is
// not left to the deadline because one proposal timed out.
func (w *termWork) complete(c *journal.TCompletion, what string) *journal.TItemResult_ {
	var o groupcommit.Outcome
	for try := range completionTries {
		if try > 0 {
			select {
			case <-w.ctx.Done():
				return nil
			case <-time.After(completionRetryWait << (try - 1)):
			}
		}
		if o = w.completions.Do(context.Background(), c); o.Err == nil || w.ctx.Err() != nil {
			break
		}
	}
	if o.Err != nil {
		if w.ctx.Err() == nil {
			w.d.log.Warn("journal a completion failed; the job converges by reconcile, a report or the deadline",
				zap.String("what", what), zap.Int64("job_id", c.JobID), zap.Error(o.Err))
		}
		return nil
	}
	if o.Item.Code != journal.TApplyCode_OK {
		w.d.log.Info("journal item not applied (stale or already settled)", zap.String("what", what),
			zap.Int64("job_id", c.JobID), zap.Stringer("code", o.Item.Code), zap.String("reason", o.Item.GetMessage()))
	}
	return o.Item
}

// ---- dispatches of this term on the wire -------------------------------------------

// noteSent is called right before a dispatch is handed to Submit.
func (w *termWork) noteSent(jobID int64, invocationID string) {
	w.mu.Lock()
	w.sent[jobID] = invocationID
	w.mu.Unlock()
}

// mayBeOnTheWire reports whether a dispatch of the record can still reach
// its backend after an answer of the query (carrying term) said the
// backend never saw it. A dispatch of an older term cannot: the query made
// the backend refuse that term. One of this term can only if this leader
// handed it to Submit.
func (d *Dispatcher) mayBeOnTheWire(r *job.Record, term uint64) bool {
	if r.LeaderTerm < int64(term) {
		return false
	}
	if r.LeaderTerm > int64(term) {
		return true // not ours: a newer leader's; never conclude anything
	}
	w := d.current(term)
	if w == nil {
		return true // no record of this term's sends: assume the worst
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	inv, ok := w.sent[r.JobID]
	return ok && inv == r.InvocationID
}

// pruneSent forgets the sends whose job no longer runs that invocation.
// Stale entries are harmless (mayBeOnTheWire compares the invocation id,
// which is never reused), so pruning is only memory hygiene: it runs when
// the map has doubled since the last prune, which keeps its cost amortized
// O(1) per send instead of O(RUNNING jobs) per round.
func (w *termWork) pruneSent(st *raftfsm.State) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.sent) < 2*w.sentAfterPrune+64 {
		return
	}
	for id, inv := range w.sent {
		if r, ok := st.Job(id); !ok || r.MutationState != job.Running || r.InvocationID != inv {
			delete(w.sent, id)
		}
	}
	w.sentAfterPrune = len(w.sent)
	for id := range w.resolveTries {
		if r, ok := st.Job(id); !ok || r.MutationState != job.Resolving {
			delete(w.resolveTries, id)
		}
	}
}

// warnLowerEpoch reports whether a lower epoch of a backend is news (not
// the one last warned about), and remembers it.
func (w *termWork) warnLowerEpoch(backendID, epoch int64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.lowerEpoch[backendID] == epoch {
		return false
	}
	w.lowerEpoch[backendID] = epoch
	return true
}

// nextResolveTry counts the resolve attempts of a job this term (to rotate
// among backends).
// resolveTriesOf is how many resolve calls this term started for a job.
func (w *termWork) resolveTriesOf(jobID int64) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.resolveTries[jobID]
}

func (w *termWork) nextResolveTry(jobID int64) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := w.resolveTries[jobID]
	w.resolveTries[jobID] = n + 1
	return n
}
