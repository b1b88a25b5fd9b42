package main

import (
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/hashicorp/raft"
)

// The raw baselines of the dispatch, reports, latency and failover sections,
// with the method of ../shared/bench/rawraft (modes seq, conc with -payload
// 16384, failover, transfer) on the same raw cluster as raw.go:
//
//   - one Apply in flight with a 256-byte command: the latency floor of one
//     commit (latency section);
//   - one Apply in flight with a 16 KiB command, 64 transitions of 256 B
//     packed into one entry: transitions/s = 64 × commits/s (dispatch
//     section; the baseline note's "64 transitions packed per entry");
//   - c = 64 Applies in flight with 256-byte commands (reports section: its
//     64 concurrent report clients);
//   - the leader killed (raft Shutdown, transport and store closed) → the
//     first Apply committed by the next leader, and a planned
//     LeadershipTransfer → the first Apply committed, both with the "fast"
//     timeouts (500 ms heartbeat and election, 250 ms lease) of the
//     lancemaster failover section. A fresh cluster per repetition.
const (
	rawPackedTransitions = 64
	rawFailoverWrites    = 100 // entries written before the leader goes
	rawFailoverSettle    = 200 * time.Millisecond
	rawFailoverBound     = 30 * time.Second
	// lifeWindowMax caps the windows of the lifecycle baselines: they are
	// single figures next to a lancemaster measurement, not a load sweep.
	lifeWindowMax = 3 * time.Second
)

// rawLifeResult is every raw figure the lifecycle sections compare with.
type rawLifeResult struct {
	Seq        *loadResult  `json:"seq_256b,omitempty"`       // c = 1, 256 B
	Packed     *loadResult  `json:"seq_packed_16k,omitempty"` // c = 1, 64 × 256 B per entry
	PackedPerS float64      `json:"packed_transitions_per_s"` // 64 × Packed.OpsPerS
	Conc64     *loadResult  `json:"conc64_256b,omitempty"`    // c = 64, 256 B (reports)
	WindowS    float64      `json:"window_s"`                 // window of each load point
	Failover   *eventResult `json:"failover_fast,omitempty"`  // kill → first commit
	Transfer   *eventResult `json:"transfer_fast,omitempty"`  // transfer → first commit
	Errors     []string     `json:"errors,omitempty"`         // what failed
}

// eventResult is a repeated one-off event: every sample, and its median
// [min–max].
type eventResult struct {
	Ms     []float64 `json:"ms"`
	Median float64   `json:"median_ms"`
	Min    float64   `json:"min_ms"`
	Max    float64   `json:"max_ms"`
}

func newEventResult(ms []float64) *eventResult {
	s := append([]float64(nil), ms...)
	sort.Float64s(s)
	e := &eventResult{Ms: ms}
	if len(s) > 0 {
		e.Min, e.Max = s[0], s[len(s)-1]
		if len(s)%2 == 1 {
			e.Median = s[len(s)/2]
		} else {
			e.Median = (s[len(s)/2-1] + s[len(s)/2]) / 2
		}
	}
	return e
}

func (e *eventResult) String() string {
	return fmt.Sprintf("%s ms [%s–%s], n=%d", sig(e.Median, 3), sig(e.Min, 3), sig(e.Max, 3), len(e.Ms))
}

// lifeWindow is the window of a lifecycle baseline load point.
func lifeWindow(o *options) time.Duration { return min(o.dur, lifeWindowMax) }

// runRawLifeLoad measures the load points the lifecycle sections need, on
// one fresh raw cluster: c = 1 at 256 B and 16 KiB, and c = 64 at 256 B when
// withConc64.
func runRawLifeLoad(o *options, res *rawLifeResult, withConc64 bool) error {
	cl, err := startRawCluster(o.tmp, o.freshLogStore())
	if err != nil {
		return fmt.Errorf("raw: start cluster: %w", err)
	}
	defer cl.close()
	r, err := cl.leader()
	if err != nil {
		return err
	}
	win := lifeWindow(o)
	res.WindowS = win.Seconds()
	point := func(c, payload int) (*loadResult, error) {
		cmd := make([]byte, payload)
		for j := range cmd {
			cmd[j] = byte('a' + j%26)
		}
		lr, err := closedLoop(c, o.warm, win, func(int) (worker, error) {
			return worker{do: func() error { return r.Apply(cmd, rawApplyTimeout).Error() }}, nil
		})
		if err != nil {
			return nil, fmt.Errorf("raw c=%d payload %d B: %w", c, payload, err)
		}
		return &lr, nil
	}
	var errs []error
	if res.Seq, err = point(1, rawPayload); err != nil {
		errs = append(errs, err)
	}
	if res.Packed, err = point(1, rawPackedTransitions*rawPayload); err != nil {
		errs = append(errs, err)
	} else {
		res.PackedPerS = rawPackedTransitions * res.Packed.OpsPerS
	}
	if withConc64 {
		if res.Conc64, err = point(reportConc, rawPayload); err != nil {
			errs = append(errs, err)
		}
	}
	for _, e := range errs {
		res.Errors = append(res.Errors, e.Error())
	}
	return errors.Join(errs...)
}

// fastRaft gives a raw node the "fast" profile's timeouts
// (config.RaftProfileFast).
func fastRaft(c *raft.Config) {
	c.HeartbeatTimeout = 500 * time.Millisecond
	c.ElectionTimeout = 500 * time.Millisecond
	c.LeaderLeaseTimeout = 250 * time.Millisecond
}

// runRawFailover times reps leader changes, each on a fresh cluster with the
// fast timeouts: planned = LeadershipTransfer, else the leader is stopped.
// The time runs from the kill (or the transfer call) to the first Apply
// committed by the next leader.
func runRawFailover(o *options, reps int, planned bool) (*eventResult, error) {
	var ms []float64
	cmd := make([]byte, rawPayload)
	for rep := 0; rep < reps; rep++ {
		d, err := rawFailoverOnce(o, cmd, planned)
		if err != nil {
			return nil, fmt.Errorf("repetition %d: %w", rep+1, err)
		}
		ms = append(ms, ms1(d))
	}
	return newEventResult(ms), nil
}

func rawFailoverOnce(o *options, cmd []byte, planned bool) (time.Duration, error) {
	cl, err := startRawCluster(o.tmp, o.freshLogStore(), fastRaft)
	if err != nil {
		return 0, fmt.Errorf("raw: start cluster: %w", err)
	}
	defer cl.close()
	r, err := cl.leader()
	if err != nil {
		return 0, err
	}
	var old *rawNode
	for _, nd := range cl.nodes {
		if nd.r == r {
			old = nd
		}
	}
	for i := 0; i < rawFailoverWrites; i++ {
		if err := r.Apply(cmd, rawApplyTimeout).Error(); err != nil {
			return 0, err
		}
	}
	time.Sleep(rawFailoverSettle) // followers' last contact is fresh
	t0 := time.Now()
	if planned {
		if err := r.LeadershipTransfer().Error(); err != nil {
			return 0, fmt.Errorf("transfer: %w", err)
		}
	} else {
		old.stop()
	}
	var next *raft.Raft
	for next == nil {
		for _, nd := range cl.nodes {
			if nd != old && !nd.down && nd.r.State() == raft.Leader {
				next = nd.r
			}
		}
		if next == nil {
			if time.Since(t0) > rawFailoverBound {
				return 0, errors.New("no new leader")
			}
			time.Sleep(200 * time.Microsecond)
		}
	}
	for next.Apply(cmd, 5*time.Second).Error() != nil {
		if time.Since(t0) > rawFailoverBound {
			return 0, errors.New("no commit by the new leader")
		}
		time.Sleep(time.Millisecond)
	}
	return time.Since(t0), nil
}

// ms1 is a duration in milliseconds with microsecond resolution.
func ms1(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
