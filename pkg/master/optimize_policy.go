package master

import (
	"context"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/pkg/admin"
	"github.com/lancemaster/lancemaster/pkg/cluster"
	"github.com/lancemaster/lancemaster/pkg/dispatch"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// addOptimizePolicy registers the per-catalog OPTIMIZE policy as a leader
// service (docs/optimize.md). It admits through the admin API's own
// InspectDataset and OptimizeDataset, and the admin server is built after
// the node starts: the caller stores it in the returned pointer once it
// exists. Until then a pass ends at once (NOT_LEADER: not ready).
func addOptimizePolicy(node *cluster.Node, fsm *raftfsm.FSM, clock func() time.Time, every time.Duration, log *zap.Logger) *atomic.Pointer[admin.Server] {
	var ref atomic.Pointer[admin.Server]
	notReady := &adminapi.TAdminError{Code: adminapi.TErrorCode_NOT_LEADER, Message: "the admin API is not ready yet"}
	node.AddLeaderService("optimize-policy", dispatch.NewOptimizePolicy(dispatch.OptimizePolicyDeps{
		Reader: fsm, Clock: clock, Logger: log, Interval: every,
		Inspect: func(ctx context.Context, catalog, db, table string) (*adminapi.TDatasetView, error) {
			if a := ref.Load(); a != nil {
				return a.InspectDataset(ctx, catalog, db, table)
			}
			return nil, notReady
		},
		Admit: func(ctx context.Context, r *adminapi.TOptimizeRequest) (*adminapi.TAdmitResponse, error) {
			if a := ref.Load(); a != nil {
				return a.OptimizeDataset(ctx, r)
			}
			return nil, notReady
		},
	}))
	return &ref
}
