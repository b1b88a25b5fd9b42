package main

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/config"
	"github.com/lancemaster/lancemaster/pkg/dispatch"
	"github.com/lancemaster/lancemaster/pkg/job"
	clusteropt "github.com/lancemaster/lancemaster/pkg/options"
	lmreport "github.com/lancemaster/lancemaster/pkg/report"
)

// The dispatch and reports sections share one cluster (default raft
// profile, production pool and dispatcher settings, caps lifted):
//
//  1. with lance_index_job_dispatcher_paused=true, N jobs are admitted by
//     admitConc clients (untimed);
//  2. dispatch: the dispatcher is unpaused (SetOption through the leader)
//     and the time runs until the leader's FSM holds no PENDING job and all
//     N hold a possible-live slot (RUNNING); separately, until the fake
//     backend has received all N submits (its hook answers OK at once and
//     delivers no report, so every job stays RUNNING);
//  3. reports: the N NATIVE_OK reports (child reaped; the identity and
//     secret the backend received) are sent by reportConc clients to the
//     leader; the time runs until the last one is answered OK, by which
//     time every result is journaled (the leader answers after its M2
//     applied). Afterwards every job is checked COMMITTED.
const (
	defaultLifeJobs = 20_000
	quickLifeJobs   = 2_000
	admitConc       = 64
	reportConc      = 64
	// liftedCap is what "caps lifted" sets max_dispatch_per_round and
	// max_inflight_per_backend to.
	liftedCap = 1 << 30
	// lifeBound bounds every wait of the lifecycle sections.
	lifeBound = 2 * time.Minute
	pollEvery = time.Millisecond

	dispatchTargetPerS = 10_000.0
	reportsTargetPerS  = 5_000.0
)

var liftedCaps = [][2]string{
	{clusteropt.OptMaxDispatchPerRound, strconv.Itoa(liftedCap)},
	{clusteropt.OptMaxInflightPerBackend, strconv.Itoa(liftedCap)},
}

type dispatchResult struct {
	Jobs        int     `json:"jobs"`
	AdmitS      float64 `json:"admit_s"`   // admitting them, dispatcher paused (untimed)
	RunningS    float64 `json:"running_s"` // unpause → all RUNNING
	RunningPerS float64 `json:"running_per_s"`
	// Entries is how many raft entries the leader applied from the unpause
	// until all were RUNNING, the unpause's own included.
	Entries       uint64   `json:"entries"`
	SubmittedS    float64  `json:"submitted_s"` // unpause → the backend received all
	SubmittedPerS float64  `json:"submitted_per_s"`
	Elections     int      `json:"elections"`
	MasterLog     []string `json:"master_log,omitempty"`
}

type reportsResult struct {
	Jobs      int              `json:"jobs"`
	Conc      int              `json:"conc"`
	ElapsedS  float64          `json:"elapsed_s"`
	PerS      float64          `json:"results_per_s"`
	P50Ms     float64          `json:"p50_ms"`
	P99Ms     float64          `json:"p99_ms"`
	Retries   int64            `json:"retries"`
	Refused   int64            `json:"refused"`
	FirstErr  string           `json:"first_error,omitempty"`
	Committed int              `json:"committed"`
	Counts    map[string]int64 `json:"leader_counts"` // the leader's report counters, this phase
	Elections int              `json:"elections"`
	// ReadsPerOp and WritesPerOp: the phase's read and write system calls
	// per report (syscalls.go).
	ReadsPerOp  float64  `json:"reads_per_op,omitempty"`
	WritesPerOp float64  `json:"writes_per_op,omitempty"`
	MasterLog   []string `json:"master_log,omitempty"`
}

// runDispatchReports runs the dispatch phase and, with withReports, the
// reports phase on the same cluster. The dispatch result is returned even
// when only the reports section was asked for (it is how the jobs got
// RUNNING).
func runDispatchReports(o *options, withReports bool) (*dispatchResult, *reportsResult, error) {
	c, err := startMCluster(o, mclusterConfig{name: "dispatch", profile: config.RaftProfileDefault,
		options: append([][2]string{{clusteropt.OptDispatcherPaused, "true"}}, liftedCaps...)})
	if err != nil {
		return nil, nil, err
	}
	defer c.close()
	_, l, err := c.leader(-1)
	if err != nil {
		return nil, nil, err
	}
	n := o.lifeJobs
	dr := &dispatchResult{Jobs: n}

	t := time.Now()
	ids, err := c.admitMany(l.RPCAddr(), n, admitConc)
	if err != nil {
		return nil, nil, fmt.Errorf("dispatch: admitting %d jobs: %w", n, err)
	}
	dr.AdmitS = time.Since(t).Seconds()
	if got := len(l.FSM().State().PendingInIDOrder(n + 1)); got != n {
		return nil, nil, fmt.Errorf("dispatch: %d jobs PENDING after admitting %d (paused)", got, n)
	}
	progress("dispatch: %d jobs admitted in %.1f s with the dispatcher paused", n, dr.AdmitS)

	var submitted atomic.Int64
	allSubmitted := make(chan time.Time, 1)
	c.Backend.SetSubmitHook(func(_ context.Context, _ *wire.TLanceIndexJobDispatch) (*wire.TStatus, error) {
		if submitted.Add(1) == int64(n) {
			allSubmitted <- time.Now()
		}
		return &wire.TStatus{StatusCode: wire.TStatusCode_OK}, nil
	})
	term0 := c.Term()
	c.logs.reset()
	applied0 := l.FSM().State().AppliedIndex()
	t0 := time.Now()
	if err := setOption(l.RPCAddr(), clusteropt.OptDispatcherPaused, "false"); err != nil {
		return nil, nil, fmt.Errorf("dispatch: unpause: %w", err)
	}
	if !waitFor(lifeBound, pollEvery, func() bool { return len(l.FSM().State().PendingInIDOrder(1)) == 0 }) {
		st := l.FSM().State()
		return nil, nil, fmt.Errorf("dispatch: %d of %d jobs still PENDING %s after the unpause (%d hold a slot, %d submits received); master log: %v",
			len(st.PendingInIDOrder(n+1)), n, lifeBound, st.HeldSlots(c.backendID), submitted.Load(), c.logs.snapshot())
	}
	run := time.Since(t0)
	st := l.FSM().State()
	dr.RunningS, dr.RunningPerS, dr.Entries = run.Seconds(), float64(n)/run.Seconds(), st.AppliedIndex()-applied0
	if held := st.HeldSlots(c.backendID); held != n {
		return nil, nil, fmt.Errorf("dispatch: %d of %d jobs RUNNING once none is PENDING", held, n)
	}
	select {
	case at := <-allSubmitted:
		sub := at.Sub(t0)
		dr.SubmittedS, dr.SubmittedPerS = sub.Seconds(), float64(n)/sub.Seconds()
	case <-time.After(lifeBound):
		return nil, nil, fmt.Errorf("dispatch: the backend received %d of %d submits", submitted.Load(), n)
	}
	dr.Elections, dr.MasterLog = int(c.Term()-term0), c.logs.snapshot()
	if !withReports {
		return dr, nil, nil
	}

	// Reports: one per dispatch the backend received.
	var reps []*wire.TLanceIndexJobReport
	seen := map[int64]bool{}
	for _, d := range c.Backend.Dispatches() {
		if !seen[d.JobID] {
			seen[d.JobID] = true
			reps = append(reps, okReport(d))
		}
	}
	if len(reps) != n {
		return dr, nil, fmt.Errorf("reports: %d distinct jobs dispatched, want %d", len(reps), n)
	}
	term0 = c.Term()
	c.logs.reset()
	before := l.Reports().Counts()
	io0 := readIO()
	// The masters' goroutines predate the window, so a pprof label cannot
	// single it out of a -cpuprofile run: it gets a profile of its own.
	stopProfile := func() {}
	if o.reportsProf != "" {
		if stopProfile, err = startCPUProfile(o.reportsProf); err != nil {
			return dr, nil, fmt.Errorf("reports: -cpuprofile-reports: %w", err)
		}
	}
	d := deliverReports(l.RPCAddr(), reps, reportConc)
	stopProfile()
	io1 := readIO()
	rr := &reportsResult{Jobs: n, Conc: reportConc, ElapsedS: d.Elapsed.Seconds(),
		PerS: float64(n) / d.Elapsed.Seconds(), P50Ms: pctMs(d.Lats, 0.50), P99Ms: pctMs(d.Lats, 0.99),
		Retries: d.Retries, Refused: d.Refused, FirstErr: d.FirstErr, Counts: map[string]int64{}}
	for k, v := range l.Reports().Counts() {
		if v -= before[k]; v != 0 {
			rr.Counts[k] = v
		}
	}
	rr.ReadsPerOp, rr.WritesPerOp, _ = perOp(io0, io1, n)
	st = l.FSM().State()
	for _, id := range ids {
		if r, ok := st.Job(id); ok && r.MutationState == job.Committed {
			rr.Committed++
		}
	}
	rr.Elections, rr.MasterLog = int(c.Term()-term0), c.logs.snapshot()
	if rr.Committed != n {
		return dr, rr, fmt.Errorf("reports: %d of %d jobs COMMITTED after every report was answered (%d refused, first error: %s)",
			rr.Committed, n, rr.Refused, rr.FirstErr)
	}
	return dr, rr, nil
}

func dispatchRows(d *dispatchResult, raw *rawLifeResult) []row {
	r := row{Section: secDispatch, Figure: fmt.Sprintf("RUNNING transitions/s, %s jobs, caps lifted", groupThousands(strconv.Itoa(d.Jobs))),
		Unit: "1/s", LM: f64(d.RunningPerS)}
	if raw != nil && raw.PackedPerS > 0 {
		r.Raw = f64(raw.PackedPerS)
	}
	r = r.withRatio().atLeast(dispatchTargetPerS, "/s")
	r.Note = fmt.Sprintf("unpause → all RUNNING %.2f s, %d raft entries incl. the unpause; raw: 64 × 256 B per entry, 1 in flight", d.RunningS, d.Entries)
	if d.Elections > 0 {
		r.Note += fmt.Sprintf("; %d election(s)", d.Elections)
	}
	s := row{Section: secDispatch, Figure: "submits received by the backend/s", Unit: "1/s", LM: f64(d.SubmittedPerS),
		Note: fmt.Sprintf("information: unpause → last submit %.2f s (the dispatcher sends at most %d at a time to one backend)", d.SubmittedS, dispatch.DefaultSendConcurrency)}
	return []row{r, s}
}

func reportsRows(r *reportsResult, raw *rawLifeResult) []row {
	c := fmt.Sprintf(" c=%d", r.Conc)
	rows := []row{
		{Section: secReports, Figure: "results applied/s" + c, Unit: "1/s", LM: f64(r.PerS)},
		{Section: secReports, Figure: "report p50" + c, Unit: "ms", LM: f64(r.P50Ms)},
		{Section: secReports, Figure: "report p99" + c, Unit: "ms", LM: f64(r.P99Ms)},
	}
	if raw != nil && raw.Conc64 != nil {
		rows[0].Raw, rows[1].Raw, rows[2].Raw = f64(raw.Conc64.OpsPerS), f64(raw.Conc64.P50Ms), f64(raw.Conc64.P99Ms)
	}
	for i := range rows {
		rows[i] = rows[i].withRatio()
	}
	rows[0] = rows[0].atLeast(reportsTargetPerS, "/s")
	rows[0].Note = fmt.Sprintf("%s NATIVE_OK reports in %.2f s, all COMMITTED; each journals its proof and result in one group-committed entry; raw: Apply c=%d%s",
		groupThousands(strconv.Itoa(r.Jobs)), r.ElapsedS, reportConc, ioNote(r.ReadsPerOp, r.WritesPerOp))
	if r.Retries > 0 {
		rows[0].Note += fmt.Sprintf("; %d retries, first: %s", r.Retries, clip(r.FirstErr, 120))
	}
	if r.Elections > 0 {
		rows[0].Note += fmt.Sprintf("; %d election(s)", r.Elections)
	}
	return rows
}

// reportCountsNote summarizes the leader's report counters of the phase.
func reportCountsNote(m map[string]int64) string {
	out := ""
	for _, k := range lmreport.ReasonNames() {
		if v := m[k]; v != 0 {
			if out != "" {
				out += ", "
			}
			out += fmt.Sprintf("%s %d", k, v)
		}
	}
	return out
}
