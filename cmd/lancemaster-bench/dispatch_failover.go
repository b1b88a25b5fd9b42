package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/config"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/master/masterkit"
)

// The failover section: one cluster on the "fast" raft profile (500 ms
// heartbeat and election timeouts, 250 ms lease), caps lifted, the pool
// heartbeating every failoverPool. Each repetition:
//
//  1. every master's heartbeats to the backend are refused (gatedBackends)
//     until the leader's pool no longer counts the backend alive, so the
//     leader cannot dispatch;
//  2. failoverJobs jobs are admitted through the leader and wait PENDING;
//  3. the clock starts, the other masters' heartbeats are let through, and
//     the leader is closed: Close(false), a kill as the others see it (raft
//     stops answering; its leader services are stopped first), or
//     Close(true), the SIGTERM path (leadership transfer first);
//  4. the clock stops when the fake backend receives the first submit of
//     one of those jobs carrying a newer leader term. In between: election
//     (or transfer), the new leader's barrier and R4 hook, its pool's first
//     heartbeat pass, reconcile (nothing RUNNING), and a dispatch round.
//
// Then the jobs are reported done to the new leader and settle, and the
// closed master is restarted from its data dir and catches up. Kill and
// transfer repetitions alternate.
const (
	defaultFailoverReps = 5
	quickFailoverReps   = 3
	failoverJobs        = 16
	// failoverPool is the pool's heartbeat interval here (production: 1 s):
	// a gated leader forgets the backend after 3 intervals, so a short one
	// keeps the repetitions short. A new leader heartbeats at once whatever
	// the interval, so the measured path does not depend on it.
	failoverPool = 250 * time.Millisecond

	failoverKillTargetMs     = 1500.0
	failoverTransferTargetMs = 150.0
)

type failoverResult struct {
	Reps int `json:"reps"`
	Jobs int `json:"jobs"`
	// Kill and Transfer: close → first submit by the new leader.
	Kill     *eventResult `json:"kill_to_first_dispatch,omitempty"`
	Transfer *eventResult `json:"transfer_to_first_dispatch,omitempty"`
	// ...Ready: close → the new leader's barrier done (it may write).
	KillReady     *eventResult `json:"kill_to_leader_ready,omitempty"`
	TransferReady *eventResult `json:"transfer_to_leader_ready,omitempty"`
	MasterLog     []string     `json:"master_log,omitempty"`
}

func runFailover(o *options) (*failoverResult, error) {
	c, err := startMCluster(o, mclusterConfig{name: "failover", profile: config.RaftProfileFast, pool: failoverPool,
		options: liftedCaps})
	if err != nil {
		return nil, err
	}
	defer c.close()
	res := &failoverResult{Reps: o.reps, Jobs: failoverJobs}
	var kill, killReady, transfer, transferReady []float64
	c.logs.reset()
	for rep := 0; rep < 2*o.reps; rep++ {
		planned := rep%2 == 1
		dispatch, ready, err := failoverOnce(c, planned)
		what := "kill"
		if planned {
			what = "transfer"
		}
		if err != nil {
			res.MasterLog = c.logs.snapshot()
			return res, fmt.Errorf("failover: %s repetition %d: %w", what, rep/2+1, err)
		}
		progress("failover %s %d/%d: first dispatch after %.0f ms (new leader ready after %.0f ms)",
			what, rep/2+1, o.reps, ms1(dispatch), ms1(ready))
		if planned {
			transfer, transferReady = append(transfer, ms1(dispatch)), append(transferReady, ms1(ready))
		} else {
			kill, killReady = append(kill, ms1(dispatch)), append(killReady, ms1(ready))
		}
	}
	res.Kill, res.KillReady = newEventResult(kill), newEventResult(killReady)
	res.Transfer, res.TransferReady = newEventResult(transfer), newEventResult(transferReady)
	res.MasterLog = c.logs.snapshot()
	return res, nil
}

// failoverOnce is one repetition; it returns close → first dispatch and
// close → new leader ready.
func failoverOnce(c *mcluster, planned bool) (dispatch, ready time.Duration, err error) {
	li, l, err := c.leader(-1)
	if err != nil {
		return 0, 0, err
	}
	for _, g := range c.gates {
		g.closed.Store(true)
	}
	if !waitFor(10*failoverPool+5*time.Second, 5*time.Millisecond, func() bool {
		s, known := l.Pool().Status(c.backendID)
		return !known || !s.Alive
	}) {
		return 0, 0, fmt.Errorf("the leader still counts the backend alive")
	}
	ids, err := c.admitMany(l.RPCAddr(), failoverJobs, 4)
	if err != nil {
		return 0, 0, err
	}
	st := l.FSM().State()
	want := map[int64]bool{}
	for _, id := range ids {
		if r, ok := st.Job(id); !ok || r.MutationState != job.Pending {
			return 0, 0, fmt.Errorf("job %d is not PENDING on the gated leader", id)
		}
		want[id] = true
	}
	oldTerm := int64(l.Node().LeaderTerm())

	var first atomic.Pointer[time.Time]
	var got atomic.Int64
	all := make(chan struct{})
	c.Backend.SetSubmitHook(func(_ context.Context, d *wire.TLanceIndexJobDispatch) (*wire.TStatus, error) {
		if want[d.JobID] && d.GetLeaderTerm() > oldTerm {
			now := time.Now()
			first.CompareAndSwap(nil, &now)
			if got.Add(1) == int64(len(want)) {
				close(all)
			}
		}
		return &wire.TStatus{StatusCode: wire.TStatusCode_OK}, nil
	})
	defer c.Backend.SetSubmitHook(nil)

	// The new leader is ready once its barrier is done (LeaderTerm set).
	var readyAt atomic.Pointer[time.Time]
	stopPoll := make(chan struct{})
	var pollWG sync.WaitGroup
	pollWG.Add(1)
	go func() {
		defer pollWG.Done()
		for {
			for i := range c.Nodes {
				if m := c.Master(i); i != li && m != nil && int64(m.Node().LeaderTerm()) > oldTerm {
					now := time.Now()
					readyAt.CompareAndSwap(nil, &now)
					return
				}
			}
			select {
			case <-stopPoll:
				return
			case <-time.After(200 * time.Microsecond):
			}
		}
	}()

	t0 := time.Now()
	for i, g := range c.gates {
		if i != li {
			g.closed.Store(false)
		}
	}
	closed := make(chan struct{})
	go func() { defer close(closed); _ = c.Stop(li, planned) }()
	select {
	case <-all:
	case <-time.After(lifeBound):
		err = fmt.Errorf("the new leader dispatched %d of %d jobs within %s", got.Load(), len(want), lifeBound)
	}
	<-closed
	close(stopPoll)
	pollWG.Wait()
	if err != nil {
		return 0, 0, err
	}
	dispatch = first.Load().Sub(t0)
	if r := readyAt.Load(); r != nil {
		ready = r.Sub(t0)
	}

	// Settle: the backend reports the jobs done to the new leader.
	_, nl, err := c.leader(li)
	if err != nil {
		return 0, 0, err
	}
	var reps []*wire.TLanceIndexJobReport
	for _, d := range c.Backend.Dispatches() {
		if want[d.JobID] && d.GetLeaderTerm() > oldTerm {
			reps = append(reps, okReport(d))
		}
	}
	if dr := deliverReports(nl.RPCAddr(), reps, 4); dr.Refused > 0 {
		return 0, 0, fmt.Errorf("reports refused: %s", dr.FirstErr)
	}
	if !waitFor(lifeBound, 5*time.Millisecond, func() bool { return masterkit.Settled(nl.FSM().State(), ids) }) {
		return 0, 0, fmt.Errorf("the jobs did not settle on the new leader")
	}
	// The closed master comes back and catches up.
	if err := c.StartMaster(li); err != nil {
		return 0, 0, err
	}
	target := nl.FSM().State().AppliedIndex()
	if !waitFor(lifeBound, 5*time.Millisecond, func() bool {
		m := c.Master(li)
		return m != nil && m.FSM().State().AppliedIndex() >= target
	}) {
		return 0, 0, fmt.Errorf("the restarted master did not catch up")
	}
	return dispatch, ready, nil
}

func failoverRows(f *failoverResult, raw *rawLifeResult) []row {
	mk := func(fig string, lm, ready, base *eventResult, target float64) row {
		r := row{Section: secFailover, Figure: fig, Unit: "ms"}
		if lm != nil && len(lm.Ms) > 0 {
			r.LM = f64(lm.Median)
		}
		if base != nil && len(base.Ms) > 0 {
			r.Raw = f64(base.Median)
		}
		r = r.withRatio().atMost(target, "ms")
		if lm != nil && len(lm.Ms) > 0 {
			r.Note = fmt.Sprintf("median of %d [%s–%s]; new leader ready (barrier done) after %s ms",
				len(lm.Ms), sig(lm.Min, 3), sig(lm.Max, 3), sig(ready.Median, 3))
		}
		if base != nil && len(base.Ms) > 0 {
			r.Note += fmt.Sprintf("; raw first commit [%s–%s]", sig(base.Min, 3), sig(base.Max, 3))
		}
		return r
	}
	var rk, rt *eventResult
	if raw != nil {
		rk, rt = raw.Failover, raw.Transfer
	}
	return []row{
		mk("leader killed → first dispatch, fast profile", f.Kill, f.KillReady, rk, failoverKillTargetMs),
		mk("SIGTERM (transfer) → first dispatch, fast profile", f.Transfer, f.TransferReady, rt, failoverTransferTargetMs),
	}
}
