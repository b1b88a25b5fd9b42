package master

import (
	"context"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/pkg/cluster"
	"github.com/lancemaster/lancemaster/pkg/config"
	"github.com/lancemaster/lancemaster/pkg/dispatch"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
	"github.com/lancemaster/lancemaster/pkg/rpc"
)

// leaderServices is what the leader services are built from.
type leaderServices struct {
	backends    rpc.BackendClient
	creds       config.CredentialSource
	clock       func() time.Time
	waker       *dispatch.Waker
	log         *zap.Logger
	nodeID      string
	masterAddrs []string
	hooks       dispatch.Hooks
	heartbeat   time.Duration
	proposer    raftfsm.Proposer  // the node, timed (metrics.go)
	observer    dispatch.Observer // round durations and dispatch outcomes
}

// wireLeaderServices registers the leader services on node (DESIGN.md §8):
// the R4 downgrade runs after the barrier, then the backend pool, the
// dispatcher (whose round calls the refresh driver) and retention GC start
// under the term's context. It returns the pool, whose view the admin API
// shows.
func wireLeaderServices(node *cluster.Node, fsm *raftfsm.FSM, s leaderServices) (*dispatch.Pool, *dispatch.Dispatcher) {
	term := func(ctx context.Context) (uint64, bool) { return cluster.LeaderTermFromContext(ctx) }
	pool := dispatch.NewPool(dispatch.PoolDeps{
		Reader: fsm, Backends: s.backends, Clock: s.clock, Term: term, Waker: s.waker,
		Logger: s.log.Named("pool"), MasterID: s.nodeID,
		MasterAddresses: func() []string { return s.masterAddrs }, HeartbeatInterval: s.heartbeat,
	})
	refresh := dispatch.NewRefreshDriver(dispatch.RefreshDeps{
		Proposer: s.proposer, Reader: fsm, Clock: s.clock,
		// The mysql refresher reads its user and password where the
		// dispatcher reads storage credentials: the node's secrets_dir.
		Refreshers: dispatch.DefaultRefreshers(nil, dispatch.NewMySQLRefresher(dispatch.MySQLOptions{Credentials: s.creds})),
		Logger:     s.log.Named("refresh"),
	})
	disp := dispatch.New(dispatch.Deps{
		Proposer: s.proposer, Reader: fsm, Backends: s.backends, Credentials: s.creds, Pool: pool, Refresh: refresh,
		Clock: s.clock, Term: term, Waker: s.waker, Logger: s.log.Named("dispatch"), Hooks: s.hooks,
		Observer: s.observer,
	})
	gc := dispatch.NewGC(dispatch.GCDeps{Proposer: s.proposer, Reader: fsm, Clock: s.clock, Logger: s.log.Named("gc")})
	node.OnLeaderReady(func(ctx context.Context) error {
		if err := dispatch.EnsureClusterID(ctx, node, fsm, s.clock); err != nil {
			return err
		}
		return dispatch.DowngradeRefreshRunning(ctx, node, fsm, s.clock)
	})
	node.AddLeaderService("backend-pool", pool)
	node.AddLeaderService("dispatcher", disp)
	node.AddLeaderService("retention-gc", gc)
	return pool, disp
}

// wakingFSM wakes the dispatcher after every entry that can give it work
// (its registration says: raftfsm.CommandSpec.Wake): an admission, a
// report's result or proof, a cancel or release, a backend or an option
// change. Its own entries (M1 batches, refresh transitions, GC) and audit
// events do not, so a round does not wake itself. An entry of a type this
// master does not know wakes it (harmless: a round that finds nothing
// proposes nothing). Waking is a non-blocking send; Apply stays
// deterministic.
type wakingFSM struct {
	*raftfsm.FSM
	waker *dispatch.Waker
}

func (w wakingFSM) Apply(l *raft.Log) interface{} {
	resp := w.FSM.Apply(l)
	if len(l.Data) > 0 {
		if s, ok := raftfsm.LookupCommand(raftfsm.CommandType(l.Data[0])); !ok || s.WakesDispatcher() {
			w.waker.Wake()
		}
	}
	return resp
}
