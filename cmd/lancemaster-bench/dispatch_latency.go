package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/config"
	clusteropt "github.com/lancemaster/lancemaster/pkg/options"
)

// The latency section: on an idle cluster (default raft profile, default
// dispatch interval of 10 s, so only the dispatcher's wake-up can make a
// dispatch fast; max_inflight_per_backend lifted so the RUNNING jobs of
// earlier samples hold no one back), one client admits jobs one at a time.
// A sample is the time from the CreateIndex call to the fake backend's
// submit hook firing for that job: admission (inspect round trip, preflight,
// one raft entry) + wake-up + round + M1 entry + send. Before the next
// admission the client waits latencyGap, so each admission meets an idle
// dispatcher.
const (
	defaultLatencyN   = 200
	quickLatencyN     = 50
	latencyWarm       = 10
	latencyGap        = 10 * time.Millisecond
	latencySubmitWait = 15 * time.Second // beyond the 10 s interval: a missed wake-up shows
	latencyTargetMs   = 25.0
)

type latencyResult struct {
	N int `json:"n"`
	// E2E: the CreateIndex call → the submit received by the backend.
	E2EP50Ms float64 `json:"e2e_p50_ms"`
	E2EP99Ms float64 `json:"e2e_p99_ms"`
	E2EMaxMs float64 `json:"e2e_max_ms"`
	// Admit: the CreateIndex round trip alone.
	AdmitP50Ms float64 `json:"admit_p50_ms"`
	AdmitP99Ms float64 `json:"admit_p99_ms"`
	// AfterP50Ms: the CreateIndex answer → the submit received (negative
	// when the submit arrived first).
	AfterP50Ms float64  `json:"after_answer_p50_ms"`
	Elections  int      `json:"elections"`
	MasterLog  []string `json:"master_log,omitempty"`
}

func runLatency(o *options) (*latencyResult, error) {
	c, err := startMCluster(o, mclusterConfig{name: "latency", profile: config.RaftProfileDefault,
		options: [][2]string{{clusteropt.OptMaxInflightPerBackend, fmt.Sprint(liftedCap)}}})
	if err != nil {
		return nil, err
	}
	defer c.close()
	_, l, err := c.leader(-1)
	if err != nil {
		return nil, err
	}
	type submit struct {
		id int64
		at time.Time
	}
	subs := make(chan submit, 1024)
	c.Backend.SetSubmitHook(func(_ context.Context, d *wire.TLanceIndexJobDispatch) (*wire.TStatus, error) {
		select {
		case subs <- submit{d.JobID, time.Now()}:
		default:
		}
		return &wire.TStatus{StatusCode: wire.TStatusCode_OK}, nil
	})
	a := c.newAdmitter(l.RPCAddr())
	defer a.close()
	one := func() (e2e, admit time.Duration, err error) {
		req, err := a.prepare()
		if err != nil {
			return 0, 0, err
		}
		t0 := time.Now()
		id, err := a.create(req)
		if err != nil {
			return 0, 0, err
		}
		admit = time.Since(t0)
		timeout := time.NewTimer(latencySubmitWait)
		defer timeout.Stop()
		for {
			select {
			case s := <-subs:
				if s.id == id {
					return s.at.Sub(t0), admit, nil
				}
			case <-timeout.C:
				return 0, 0, fmt.Errorf("job %d: no submit within %s", id, latencySubmitWait)
			}
		}
	}
	n := o.latN
	var e2es, admits, afters []time.Duration
	term0 := c.Term()
	c.logs.reset()
	for i := 0; i < latencyWarm+n; i++ {
		e2e, admit, err := one()
		if err != nil {
			return nil, errors.Join(fmt.Errorf("latency: sample %d", i+1), err)
		}
		if i >= latencyWarm {
			e2es, admits, afters = append(e2es, e2e), append(admits, admit), append(afters, e2e-admit)
		}
		time.Sleep(latencyGap)
	}
	slices.Sort(e2es)
	slices.Sort(admits)
	slices.Sort(afters)
	return &latencyResult{N: n,
		E2EP50Ms: pctMs(e2es, 0.50), E2EP99Ms: pctMs(e2es, 0.99), E2EMaxMs: ms(e2es[len(e2es)-1]),
		AdmitP50Ms: pctMs(admits, 0.50), AdmitP99Ms: pctMs(admits, 0.99), AfterP50Ms: pctMs(afters, 0.50),
		Elections: int(c.Term() - term0), MasterLog: c.logs.snapshot(),
	}, nil
}

func latencyRows(r *latencyResult, raw *rawLifeResult) []row {
	rows := []row{
		{Section: secLatency, Figure: "admission → submit received p50, idle", Unit: "ms", LM: f64(r.E2EP50Ms)},
		{Section: secLatency, Figure: "admission → submit received p99, idle", Unit: "ms", LM: f64(r.E2EP99Ms)},
	}
	if raw != nil && raw.Seq != nil {
		rows[0].Raw, rows[1].Raw = f64(raw.Seq.P50Ms), f64(raw.Seq.P99Ms)
	}
	for i := range rows {
		rows[i] = rows[i].withRatio()
	}
	rows[0] = rows[0].atMost(latencyTargetMs, "ms")
	rows[0].Note = fmt.Sprintf("from the CreateIndex call, %d sequential admissions; CreateIndex alone p50 %s ms, answer → submit p50 %s ms; raw: Apply c=1",
		r.N, sig(r.AdmitP50Ms, 3), sig(r.AfterP50Ms, 3))
	rows[1].Note = fmt.Sprintf("max %s ms; CreateIndex alone p99 %s ms", sig(r.E2EMaxMs, 3), sig(r.AdmitP99Ms, 3))
	if r.Elections > 0 {
		rows[0].Note += fmt.Sprintf("; %d election(s)", r.Elections)
	}
	return rows
}
