package dispatch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

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
func DowngradeRefreshRunning(ctx context.Context, p raftfsm.Proposer, r raftfsm.Reader, clk func() time.Time) error {
	if clk == nil {
		clk = time.Now
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

// EnsureClusterID journals a random cluster id when the journal has none
// (DESIGN.md §13.1): the first leader of a Raft history names it, and every
// heartbeat, dispatch, query and resolve carries it, so that backends keep
// their leader-term fence per history. Call it from OnLeaderReady, before
// the leader services start (they read the id). An id already set is kept
// (the entry is then a NOOP); a retry after an error re-reads the view.
func EnsureClusterID(ctx context.Context, p raftfsm.Proposer, r raftfsm.Reader, clk func() time.Time) error {
	if r.State().ClusterID() != "" {
		return nil
	}
	if clk == nil {
		clk = time.Now
	}
	id, err := NewClusterID()
	if err != nil {
		return err
	}
	resp, err := propose(ctx, p, raftfsm.CmdSetClusterID, &journal.TClusterIDCommand{NowMs: clk().UnixMilli(), ClusterID: id})
	if err != nil {
		return fmt.Errorf("journal the cluster id: %w", err)
	}
	if resp.Code != journal.TApplyCode_OK && resp.Code != journal.TApplyCode_NOOP {
		return fmt.Errorf("journal the cluster id: %s: %s", resp.Code, resp.GetMessage())
	}
	return nil
}

// NewClusterID mints a cluster id: "lm-" and 128 random bits in hex.
func NewClusterID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("dispatch: read random: %w", err)
	}
	return "lm-" + hex.EncodeToString(b[:]), nil
}
