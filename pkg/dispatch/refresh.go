package dispatch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// Defaults of RefreshDeps.
const (
	// DefaultRefreshMaxPerStep bounds the jobs one step moves: two entries
	// of this many transitions each stay small.
	DefaultRefreshMaxPerStep = 64
	// DefaultRefreshStepBudget bounds the refresh calls of one step, so a
	// slow webhook delays the round's PENDING dispatch by seconds, not
	// minutes.
	DefaultRefreshStepBudget = 5 * time.Second
	// DefaultRefreshConcurrency is how many refreshes of a step run at once.
	DefaultRefreshConcurrency = 4

	// maxRefreshBatch bounds the transitions of one RefreshBatch entry (the
	// same bound as a GC entry).
	maxRefreshBatch = raftfsm.MaxGCBatch
	// refreshScanLimit bounds how many due jobs a step looks at. The due set
	// is unresolved, so the unresolved quotas keep it far below this; the
	// bound only caps a step's work if they were raised wildly.
	refreshScanLimit = 1 << 16
	// refreshGrace is how long a step waits, after its budget, for
	// refreshers to return their ctx error before it abandons them.
	refreshGrace = 250 * time.Millisecond
)

// RefreshDeps are what a RefreshDriver needs. Zero numbers take defaults.
type RefreshDeps struct {
	Proposer    raftfsm.Proposer
	Reader      raftfsm.Reader
	Refreshers  Refreshers
	Clock       func() time.Time
	Logger      *zap.Logger
	MaxPerStep  int           // jobs moved to refresh RUNNING per step (DefaultRefreshMaxPerStep, ≤ 1024)
	StepBudget  time.Duration // bound of a step's refresh calls (DefaultRefreshStepBudget)
	Concurrency int           // refresh calls in flight at once (DefaultRefreshConcurrency)
}

// RefreshDriver is step 3 of the dispatch round (DESIGN.md §7): terminal
// jobs whose refresh is REQUIRED, or FAILED long enough ago, go R1 → refresh
// → R2 (DONE, the job resolves) or R3 (FAILED, retried later).
//
// Concurrency: Step is called by one goroutine at a time (the round); it runs
// refreshers on goroutines of its own and waits for them (or abandons them
// once the budget and a short grace are over). Construct one driver per
// process and keep it across rounds: it remembers transitions whose proposal
// failed and re-proposes them at the next step.
type RefreshDriver struct {
	d RefreshDeps

	// unrecorded holds CAS'd transitions whose proposal returned an error
	// (fate unknown): the outcome of a finished refresh, or a downgrade of
	// an R1 that may have landed. Without them such a job would sit in
	// refresh RUNNING, which no step picks up, until the next leader's R4.
	// The rev CAS makes a re-proposal harmless if the first one did land.
	unrecorded []*journal.TRefreshTransition
}

// NewRefreshDriver returns a driver.
func NewRefreshDriver(d RefreshDeps) *RefreshDriver {
	if d.Logger == nil {
		d.Logger = zap.NewNop()
	}
	if d.Clock == nil {
		d.Clock = time.Now
	}
	if d.MaxPerStep <= 0 {
		d.MaxPerStep = DefaultRefreshMaxPerStep
	}
	d.MaxPerStep = min(d.MaxPerStep, maxRefreshBatch)
	if d.StepBudget <= 0 {
		d.StepBudget = DefaultRefreshStepBudget
	}
	if d.Concurrency <= 0 {
		d.Concurrency = DefaultRefreshConcurrency
	}
	return &RefreshDriver{d: d}
}

// refreshVerdict is what became of one job's refresh.
type refreshVerdict int

const (
	verdictDone         refreshVerdict = iota + 1 // R2
	verdictFailed                                 // R3
	verdictNotAttempted                           // the budget ran out first: back to REQUIRED
)

// refreshTask is one job between its R1 and its outcome.
type refreshTask struct {
	id, rev  int64 // rev: what R1 produced, the CAS of the outcome
	catalog  int64
	found    bool // the catalog exists
	kind     string
	req      RefreshRequest
	started  atomic.Int32 // 0 queued, 1 started, 2 abandoned before it started
	verdict  refreshVerdict
	err      error
	reported bool
}

// Step is one bounded pass of the refresh driver. An idle step proposes
// nothing. A refresher error never aborts the step (it becomes R3); a
// proposal error is returned. The refresh calls end by StepBudget after the
// step began (plus refreshGrace for a refresher that ignores ctx); the
// proposals use ctx itself, because an outcome cut short by the budget
// would strand its jobs in refresh RUNNING.
func (d *RefreshDriver) Step(ctx context.Context) error {
	deadline := time.Now().Add(d.d.StepBudget) // real time: the budget bounds blocking, not journaled time
	if err := d.retryUnrecorded(ctx); err != nil {
		return err
	}
	due := d.pickDue()
	if len(due) == 0 {
		return nil
	}
	tasks, err := d.startRefresh(ctx, due)
	if err != nil || len(tasks) == 0 {
		return err
	}
	d.runRefreshers(ctx, deadline, tasks)
	return d.recordOutcomes(ctx, tasks)
}

// pickDue chooses at most MaxPerStep jobs, in id order: every REQUIRED one
// first (a first refresh is never delayed, not even by a backlog of retries
// with smaller ids), then FAILED ones whose retry wait is over. The wait is
// re-read from the options every step.
func (d *RefreshDriver) pickDue() []*job.Record {
	st := d.d.Reader.State()
	retryMs := st.Options().RefreshRetrySecond * 1000 // clamped to ≤ 2^40 s: no overflow
	nowMs := d.d.Clock().UnixMilli()
	var required, failed []*job.Record
	for _, r := range st.RefreshDue(refreshScanLimit) {
		switch {
		case !r.NeedsRefresh(): // the index says so; a force-released job never refreshes
		case r.RefreshState != job.RefreshFailed:
			if len(required) < d.d.MaxPerStep {
				required = append(required, r)
			}
		case nowMs >= r.RefreshFailureTimeMs+retryMs:
			if len(failed) < d.d.MaxPerStep {
				failed = append(failed, r)
			}
		}
	}
	picked := append(required, failed[:min(len(failed), d.d.MaxPerStep-len(required))]...)
	// The entry lists the jobs in id order, whichever half they came from.
	slices.SortFunc(picked, func(a, b *job.Record) int { return cmp.Compare(a.JobID, b.JobID) })
	return picked
}

// startRefresh journals R1 for every picked job in one entry and returns the
// jobs this driver now owns, with the rev R1 gave them read back from State.
func (d *RefreshDriver) startRefresh(ctx context.Context, due []*job.Record) ([]*refreshTask, error) {
	trs := make([]*journal.TRefreshTransition, len(due))
	for i, r := range due {
		trs[i] = newRefreshTransition(r.JobID, r.Rev, job.RefreshRunning)
	}
	resp, err := d.proposeRefresh(ctx, trs)
	if err != nil {
		// R1 may have landed: send each job back to REQUIRED at the next
		// step if (and only if) it is still at the rev R1 would give it.
		for _, r := range due {
			d.unrecorded = append(d.unrecorded, newRefreshTransition(r.JobID, r.Rev+1, job.RefreshRequired))
		}
		return nil, fmt.Errorf("refresh: R1 for %d jobs: %w", len(due), err)
	}
	st := d.d.Reader.State()
	var tasks []*refreshTask
	for i, r := range due {
		if code := applyItemCode(resp, i); code != journal.TApplyCode_OK {
			// Lost a CAS: the job moved since it was read; a later step
			// sees it in its new state.
			d.d.Logger.Info("refresh: R1 not applied", zap.Int64("job_id", r.JobID),
				zap.Stringer("code", code), zap.String("reason", applyItemMessage(resp, i)))
			continue
		}
		cur, ok := st.Job(r.JobID)
		if !ok || cur.RefreshState != job.RefreshRunning || cur.Rev != r.Rev+1 {
			// Not the record our R1 made. Propose returns after the local
			// apply, so this should not happen; if it does, make sure our
			// R1 cannot strand the job in RUNNING (a no-op CAS otherwise).
			d.unrecorded = append(d.unrecorded, newRefreshTransition(r.JobID, r.Rev+1, job.RefreshRequired))
			continue
		}
		t := &refreshTask{id: cur.JobID, rev: cur.Rev, catalog: cur.CatalogID, req: RefreshRequest{
			JobID: cur.JobID, DB: cur.DB, Table: cur.Table, IndexName: cur.DisplayIndexName,
			MutationType: cur.MutationType.String(), Outcome: cur.MutationState.String(),
		}}
		if c, ok := st.CatalogByID(cur.CatalogID); ok {
			t.found, t.kind, t.req.Catalog, t.req.URL = true, c.RefreshKind, c.Name, c.RefreshURL
			t.req.Address, t.req.Statement, t.req.CredentialsRef = c.RefreshAddress, c.RefreshStatement, c.RefreshCredentialsRef
		}
		tasks = append(tasks, t)
	}
	return tasks, nil
}

// runRefreshers calls each task's refresher, at most Concurrency at once,
// until deadline, and sets every task's verdict. It returns by deadline plus
// refreshGrace whatever the refreshers do.
func (d *RefreshDriver) runRefreshers(ctx context.Context, deadline time.Time, tasks []*refreshTask) {
	bctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	type result struct {
		i   int
		err error
	}
	results := make(chan result, len(tasks)) // buffered: an abandoned refresher never blocks
	go func() {
		sem := make(chan struct{}, d.d.Concurrency)
		for i, t := range tasks {
			select {
			case sem <- struct{}{}:
			case <-bctx.Done():
			}
			if bctx.Err() != nil || !t.started.CompareAndSwap(0, 1) {
				return // the rest stay queued; the collector abandons them
			}
			go func() {
				defer func() { <-sem }()
				results <- result{i, d.refreshOne(bctx, t)}
			}()
		}
	}()
	var grace <-chan time.Time
	done := bctx.Done()
	pending := len(tasks)
collect:
	for pending > 0 {
		select {
		case r := <-results:
			t := tasks[r.i]
			t.reported, t.err, t.verdict = true, r.err, verdictDone
			if r.err != nil {
				t.verdict = verdictFailed
			}
			pending--
		case <-done:
			// Queued tasks will never start: they go back to REQUIRED, as a
			// refresh that was never tried is no failure to throttle.
			for _, t := range tasks {
				if t.started.CompareAndSwap(0, 2) {
					t.reported, t.verdict = true, verdictNotAttempted
					pending--
				}
			}
			done, grace = nil, time.After(refreshGrace)
		case <-grace:
			break collect
		}
	}
	for _, t := range tasks {
		if !t.reported { // started and still running past the grace: abandoned
			t.verdict, t.err = verdictFailed, fmt.Errorf("refresh of job %d: no answer within the step budget (%s)", t.id, d.d.StepBudget)
		}
	}
}

// refreshOne looks the job's catalog and refresher up and calls it. A
// panicking refresher is a failed refresh, not a dead master.
func (d *RefreshDriver) refreshOne(ctx context.Context, t *refreshTask) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("refresh of job %d: the %q refresher panicked: %v", t.id, t.kind, p)
		}
	}()
	if !t.found {
		return fmt.Errorf("refresh of job %d: catalog %d does not exist", t.id, t.catalog)
	}
	rf, err := d.d.Refreshers.Lookup(t.kind)
	if err != nil {
		return fmt.Errorf("refresh of job %d (catalog %q): %w", t.id, t.req.Catalog, err)
	}
	return rf.Refresh(ctx, t.req)
}

// recordOutcomes journals R2, R3 or the downgrade of every task in one entry.
func (d *RefreshDriver) recordOutcomes(ctx context.Context, tasks []*refreshTask) error {
	trs := make([]*journal.TRefreshTransition, len(tasks))
	for i, t := range tasks {
		f := []zap.Field{zap.Int64("job_id", t.id), zap.Int64("catalog_id", t.catalog), zap.String("refresh_kind", t.kind)}
		switch t.verdict {
		case verdictDone:
			trs[i] = newRefreshTransition(t.id, t.rev, job.RefreshDone)
			d.d.Logger.Debug("refresh done", f...)
		case verdictNotAttempted:
			trs[i] = newRefreshTransition(t.id, t.rev, job.RefreshRequired)
			d.d.Logger.Info("refresh not attempted within the step budget; it stays REQUIRED", f...)
		default:
			trs[i] = newRefreshTransition(t.id, t.rev, job.RefreshFailed)
			lvl := zap.InfoLevel
			if errors.Is(t.err, ErrUnknownRefreshKind) || !t.found {
				lvl = zap.WarnLevel // configuration, not a flaky target: an operator must act
			}
			d.d.Logger.Log(lvl, "refresh failed; it is retried after lance_index_job_refresh_retry_second",
				append(f, zap.Error(t.err))...)
		}
	}
	resp, err := d.proposeRefresh(ctx, trs)
	if err != nil {
		d.unrecorded = append(d.unrecorded, trs...)
		return fmt.Errorf("refresh: record %d outcomes: %w", len(trs), err)
	}
	d.logLost(resp, trs)
	return nil
}

// retryUnrecorded re-proposes transitions whose proposal failed earlier.
func (d *RefreshDriver) retryUnrecorded(ctx context.Context) error {
	for len(d.unrecorded) > 0 {
		n := min(len(d.unrecorded), maxRefreshBatch)
		trs := d.unrecorded[:n]
		resp, err := d.proposeRefresh(ctx, trs)
		if err != nil {
			return fmt.Errorf("refresh: re-propose %d unrecorded transitions: %w", n, err)
		}
		d.logLost(resp, trs)
		d.unrecorded = d.unrecorded[n:]
	}
	d.unrecorded = nil
	return nil
}

// logLost logs the transitions whose CAS failed: the job moved on without
// this driver (a newer leader, or an earlier proposal that did land).
func (d *RefreshDriver) logLost(resp *journal.TApplyResponse, trs []*journal.TRefreshTransition) {
	for i, tr := range trs {
		if code := applyItemCode(resp, i); code != journal.TApplyCode_OK {
			d.d.Logger.Info("refresh: transition not applied", zap.Int64("job_id", tr.JobID),
				zap.Stringer("to", job.RefreshState(tr.ToState)), zap.Stringer("code", code),
				zap.String("reason", applyItemMessage(resp, i)))
		}
	}
}

func (d *RefreshDriver) proposeRefresh(ctx context.Context, trs []*journal.TRefreshTransition) (*journal.TApplyResponse, error) {
	return proposeRefreshBatch(ctx, d.d.Proposer, d.d.Clock, trs)
}

// proposeRefreshBatch journals one RefreshBatch entry stamped with clk's
// time. A response that is not a per-item answer is an error: the entry
// was refused as a whole.
func proposeRefreshBatch(ctx context.Context, p raftfsm.Proposer, clk func() time.Time, trs []*journal.TRefreshTransition) (*journal.TApplyResponse, error) {
	resp, err := propose(ctx, p, raftfsm.CmdRefreshBatch,
		&journal.TRefreshBatch{NowMs: clk().UnixMilli(), Transitions: trs})
	if err != nil {
		return nil, err
	}
	if resp.Code != journal.TApplyCode_OK {
		return nil, fmt.Errorf("refresh batch refused: %s: %s", resp.Code, resp.GetMessage())
	}
	return resp, nil
}

func newRefreshTransition(id, rev int64, to job.RefreshState) *journal.TRefreshTransition {
	return &journal.TRefreshTransition{JobID: id, ExpectedRev: rev, ToState: journal.TRefreshState(to)}
}

// applyItemCode is the i-th item's code; a missing item reads as not applied.
func applyItemCode(resp *journal.TApplyResponse, i int) journal.TApplyCode {
	if resp == nil || i >= len(resp.Items) || resp.Items[i] == nil {
		return journal.TApplyCode_INVALID
	}
	return resp.Items[i].Code
}

func applyItemMessage(resp *journal.TApplyResponse, i int) string {
	if resp == nil || i >= len(resp.Items) || resp.Items[i] == nil {
		return "no item result"
	}
	return resp.Items[i].GetMessage()
}
