package master

import (
	"context"
	"fmt"
	"strconv"

	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/pkg/metrics"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// DefaultReadyMaxApplyLag is how many committed entries the journal replica
// may still have to apply and the master be ready: a replica that keeps up
// is a few entries behind at most under load; one restoring a snapshot or
// replaying a log is thousands behind.
const DefaultReadyMaxApplyLag = 64

// readyChecks are a master's /readyz checks (docs/metrics.md):
//
//   - leader: this master knows a leader (itself or another);
//   - fsm_caught_up: its journal replica has applied every entry up to the
//     commit index it knows, within maxLag entries. The replica's own
//     applied index is used (raft's runs ahead of the FSM by what is queued
//     for it); raft's is the fallback while the replica has none (an older
//     snapshot that does not carry it, before the next entry).
//
// Raft entries that never reach the FSM (no-ops, configuration changes)
// leave the replica a few entries "behind" until the next command; the lag
// allowance absorbs them.
func readyChecks(r raftView, fsm raftfsm.Reader, maxLag uint64) []metrics.Check {
	return []metrics.Check{
		{Name: "leader", Fn: func(context.Context) (string, error) {
			id, addr := r.Leader()
			if id == "" {
				s := r.Stats()
				return "", fmt.Errorf("no leader known (raft state %s, term %s)", s["state"], s["term"])
			}
			if r.IsLeader() {
				return id + " (this master)", nil
			}
			return fmt.Sprintf("%s at %s", id, addr), nil
		}},
		{Name: "fsm_caught_up", Fn: func(context.Context) (string, error) {
			s := r.Stats()
			commit, err := strconv.ParseUint(s["commit_index"], 10, 64)
			if err != nil {
				return "", fmt.Errorf("raft reports no commit index (state %s)", s["state"])
			}
			applied := fsm.State().AppliedIndex()
			if applied == 0 {
				applied, _ = strconv.ParseUint(s["applied_index"], 10, 64)
			}
			if commit > applied && commit-applied > maxLag {
				return "", fmt.Errorf("applied index %d is %d entries behind the commit index %d (allowed %d)",
					applied, commit-applied, commit, maxLag)
			}
			return fmt.Sprintf("applied index %d, commit index %d", applied, commit), nil
		}},
	}
}

// startHTTP serves /metrics, /livez and /readyz on addr; "" serves nothing.
func startHTTP(addr string, mm *masterMetrics, r raftView, fsm raftfsm.Reader, maxLag uint64, log *zap.Logger) (*metrics.Server, error) {
	if addr == "" {
		return nil, nil
	}
	if maxLag == 0 {
		maxLag = DefaultReadyMaxApplyLag
	}
	return metrics.Listen(metrics.Options{Addr: addr, Gatherer: mm.reg, Ready: readyChecks(r, fsm, maxLag), Logger: log})
}
