package dispatch

import (
	"context"
	"fmt"
	"math"
	"time"

	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/options"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// GCDeps are what retention GC needs.
type GCDeps struct {
	Proposer raftfsm.Proposer
	Reader   raftfsm.Reader
	Clock    func() time.Time
	Logger   *zap.Logger
}

// GC is retention GC (DESIGN.md §9), a leader service: every
// lance_index_job_clean_interval_second it removes resolved records that
// hold no possible-live slot and were last updated more than
// lance_index_job_keep_max_second ago, oldest first, at most
// raftfsm.MaxGCBatch per entry. It never removes an unresolved record: it
// picks with State.GCEligible and the FSM re-checks every id against the
// entry's cutoff, since a record may change between the pick and the apply.
//
// Concurrency: Run is called by the cluster's leadership monitor, once per
// term; RunOnce may be called by one goroutine at a time.
type GC struct {
	d GCDeps
}

// NewGC returns a GC.
func NewGC(d GCDeps) *GC {
	if d.Logger == nil {
		d.Logger = zap.NewNop()
	}
	if d.Clock == nil {
		d.Clock = time.Now
	}
	return &GC{d: d}
}

// Run runs a pass at once (a new leader catches up on what its predecessor
// left), then one per clean interval, re-read from the options after every
// pass, until ctx is done. A proposal error ends Run with that error so the
// cluster retries it with backoff rather than waiting a whole interval.
func (g *GC) Run(ctx context.Context) error {
	for {
		if _, err := g.RunOnce(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		interval := optionSeconds(g.d.Reader.State().Options().CleanIntervalSecond)
		// The wait is real time: the injected Clock dates the cutoffs, and
		// tests drive RunOnce directly.
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// RunOnce removes what is eligible now and returns how many records it
// removed. It proposes one entry per batch of raftfsm.MaxGCBatch, oldest
// update first, and repeats while a full batch was removed; nothing eligible
// means no entry.
func (g *GC) RunOnce(ctx context.Context) (removed int, err error) {
	st := g.d.Reader.State()
	keepMs := st.Options().KeepMaxSecond * 1000 // clamped to ≤ 2^40 s: no overflow
	nowMs := g.d.Clock().UnixMilli()
	cutoffMs := nowMs - keepMs
	for {
		ids := g.d.Reader.State().GCEligible(cutoffMs, raftfsm.MaxGCBatch)
		if len(ids) == 0 {
			return removed, nil
		}
		resp, err := propose(ctx, g.d.Proposer, raftfsm.CmdGC,
			&journal.TGCCommand{NowMs: nowMs, CutoffMs: cutoffMs, JobIds: ids})
		if err != nil {
			return removed, fmt.Errorf("retention GC of %d jobs: %w", len(ids), err)
		}
		if resp.Code != journal.TApplyCode_OK {
			return removed, fmt.Errorf("retention GC entry refused: %s: %s", resp.Code, resp.GetMessage())
		}
		n := 0
		for i, id := range ids {
			if code := applyItemCode(resp, i); code == journal.TApplyCode_OK {
				n++
			} else {
				// The record changed since the pick (the FSM re-checked it).
				g.d.Logger.Debug("retention GC: job kept", zap.Int64("job_id", id), zap.Stringer("code", code))
			}
		}
		removed += n
		g.d.Logger.Info("retention GC removed jobs", zap.Int("removed", n),
			zap.Int64("cutoff_ms", cutoffMs), zap.Int64("first_job_id", ids[0]))
		if n < raftfsm.MaxGCBatch {
			return removed, nil // the rest waits for the next pass
		}
	}
}

// optionSeconds converts a clamped option to a Duration without
// overflowing (the clamp allows 2^40 s; a Duration holds ~292 years).
func optionSeconds(s int64) time.Duration {
	s = options.Clamp(s)
	if s > math.MaxInt64/int64(time.Second) {
		return math.MaxInt64
	}
	return time.Duration(s) * time.Second
}
