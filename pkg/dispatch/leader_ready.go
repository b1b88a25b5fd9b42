package dispatch

import (
	"context"
	"fmt"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// DowngradeRefreshRunning journals R4 (refresh RUNNING → REQUIRED, rev CAS)
// for every job whose refresh is RUNNING, in entries of at most 1024
// transitions (DESIGN.md §8). A refresh RUNNING on a new leader was started
// by a predecessor that can no longer record its outcome; REQUIRED lets this
// leader's refresh driver redo it at once (refreshers are idempotent by job
// id). Nothing RUNNING → no entry.
//
// Call it from the cluster's OnLeaderReady hook: after the Raft barrier (so
// the view holds every RUNNING the log has) and before the leader services
// start (so no driver of this term has a refresh in flight). The hook is
// retried on error, and a retry re-reads the view, so a partial run is
// harmless. A CAS failure of one job is not an error: the job moved on.
func DowngradeRefreshRunning(ctx context.Context, p raftfsm.Proposer, r raftfsm.Reader, clk Clock) error {
	if clk == nil {
		clk = SystemClock{}
	}
	running := r.State().RefreshRunning()
	for len(running) > 0 {
		n := min(len(running), maxRefreshBatch)
		trs := make([]*journal.TRefreshTransition, n)
		for i, rec := range running[:n] {
			trs[i] = newRefreshTransition(rec.JobID, rec.Rev, job.RefreshRequired)
		}
		if _, err := proposeRefreshBatch(ctx, p, clk, trs); err != nil {
			return fmt.Errorf("R4: downgrade %d refresh RUNNING jobs (first %d): %w", n, trs[0].JobID, err)
		}
		running = running[n:]
	}
	return nil
}
