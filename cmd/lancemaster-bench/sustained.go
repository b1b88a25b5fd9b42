package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/config"
	"github.com/lancemaster/lancemaster/pkg/job"
)

// The sustained section carries jobs through the whole lifecycle at steady
// state: admission → dispatch → accepted → report → refresh → DONE, on the
// lifecycle cluster (three complete masters, one fast fake backend, caps
// lifted). Each of admitConc clients admits in a closed loop while fewer
// than sustainedBacklog jobs are between admission and DONE; the fake
// backend answers every submit OK and queues its NATIVE_OK report, which
// sustainedReporters deliver to the leader as backends' outboxes do (as
// many as the admitting clients: with 16, the fake's own senders were the
// bound and held the backlog RUNNING, docs/benchmarks.md); the
// catalog has no refresh target, so the refresh driver takes a COMMITTED
// job to refresh DONE. A job counts when the leader's journal shows it
// COMMITTED with refresh DONE; its latency is from the start of its
// CreateIndex call to the poll that saw it done (the tracker polls every
// sustainedPoll, which bounds the error of each sample).
const (
	secSustained       = "sustained"
	sustainedBacklog   = 1024
	sustainedReporters = 64
	sustainedPoll      = 2 * time.Millisecond
	sustainedWindow    = 60 * time.Second
	sustainedWarm      = 5 * time.Second
	// sustainedHoldOpen bounds how long a window stays open past its end
	// while no job has reached DONE in it (closeWindow).
	sustainedHoldOpen = 30 * time.Second
	sustainedTarget   = 1_000.0 // jobs/s carried to DONE
)

type sustainedResult struct {
	WindowS      float64  `json:"window_s"`
	Done         int      `json:"done"` // jobs that reached DONE inside the window
	PerS         float64  `json:"done_per_s"`
	FirstHalf    float64  `json:"first_half_per_s"`
	SecondHalf   float64  `json:"second_half_per_s"`
	P50Ms        float64  `json:"admission_to_done_p50_ms"`
	P99Ms        float64  `json:"admission_to_done_p99_ms"`
	MaxBacklog   int      `json:"max_backlog"`
	EntriesPer   float64  `json:"raft_entries_per_job"`
	AdmitErrors  int64    `json:"admit_errors"`
	FirstErr     string   `json:"first_error,omitempty"`
	ReportErrors int64    `json:"report_refused"`
	Elections    int      `json:"elections"`
	MasterLog    []string `json:"master_log,omitempty"`
	// Waiting counts the backlog by state at the end of the window: where
	// jobs wait shows the bottleneck.
	Waiting map[string]int `json:"backlog_by_state"`
}

// sustainedTracker holds the jobs between admission and DONE.
type sustainedTracker struct {
	mu      sync.Mutex
	started map[int64]time.Time // job id → start of its CreateIndex call
	room    chan struct{}       // one token per job in the backlog
	max     int
	// window: samples are kept from open until close.
	open, close time.Time
	lats        []time.Duration
	ends        []time.Duration // since open, for the halves
}

func (t *sustainedTracker) admitted(id int64, start time.Time) {
	t.mu.Lock()
	t.started[id] = start
	t.max = max(t.max, len(t.started))
	t.mu.Unlock()
}

// closeWindow closes the window now, or, while no job has reached DONE
// inside it, once one has or extra has passed — a -quick window on a loaded
// machine can close before the first job is through (admission → DONE
// takes seconds there) — and returns the window's real length, which every
// rate is over.
func (t *sustainedTracker) closeWindow(open time.Time, extra time.Duration) time.Duration {
	deadline := time.Now().Add(extra)
	for {
		t.mu.Lock()
		n := len(t.lats)
		t.mu.Unlock()
		if n > 0 || !time.Now().Before(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	now := time.Now()
	t.mu.Lock()
	t.close = now
	t.mu.Unlock()
	return now.Sub(open)
}

// poll moves the jobs done on the leader out of the backlog.
func (t *sustainedTracker) poll(done func(id int64) bool) {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	for id, start := range t.started {
		if !done(id) {
			continue
		}
		delete(t.started, id)
		<-t.room
		if !t.open.IsZero() && now.After(t.open) && (t.close.IsZero() || now.Before(t.close)) {
			t.lats = append(t.lats, now.Sub(start))
			t.ends = append(t.ends, now.Sub(t.open))
		}
	}
}

func (t *sustainedTracker) setWindow(open, close time.Time) {
	t.mu.Lock()
	t.open, t.close = open, close
	t.mu.Unlock()
}

func runSustained(o *options) (*sustainedResult, error) {
	window, warm := sustainedWindow, sustainedWarm
	if o.quick {
		window, warm = o.dur, quickWarm
	}
	c, err := startMCluster(o, mclusterConfig{name: "sustained", profile: config.RaftProfileDefault, options: liftedCaps})
	if err != nil {
		return nil, err
	}
	defer c.close()
	_, l, err := c.leader(-1)
	if err != nil {
		return nil, err
	}
	reports := make(chan *wire.TLanceIndexJobReport, 2*sustainedBacklog)
	c.Backend.SetSubmitHook(func(_ context.Context, d *wire.TLanceIndexJobDispatch) (*wire.TStatus, error) {
		select {
		case reports <- okReport(d):
		default: // more reports outstanding than jobs in the backlog: cannot happen
		}
		return &wire.TStatus{StatusCode: wire.TStatusCode_OK}, nil
	})
	tr := &sustainedTracker{started: map[int64]time.Time{}, room: make(chan struct{}, sustainedBacklog)}
	conns := newSharedConns(l.RPCAddr()) // the reporters'; closed once they are done
	defer conns.close()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()

	var stats senderStats
	for g := range sustainedReporters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := &reportSender{conns: conns, g: g, stats: &stats}
			for {
				select {
				case <-ctx.Done():
					return
				case r := <-reports:
					s.send(r)
				}
			}
		}()
	}
	var admitErrs atomic.Int64
	var firstErr atomic.Pointer[string]
	for range admitConc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := c.newAdmitter(l.RPCAddr())
			defer a.close()
			for {
				select {
				case <-ctx.Done():
					return
				case tr.room <- struct{}{}:
				}
				req, err := a.prepare()
				start := time.Now()
				var id int64
				if err == nil {
					id, err = a.create(req)
				}
				if err != nil {
					<-tr.room
					admitErrs.Add(1)
					msg := err.Error()
					firstErr.CompareAndSwap(nil, &msg)
					time.Sleep(errorBackoff)
					continue
				}
				tr.admitted(id, start)
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(sustainedPoll)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				st := l.FSM().State()
				tr.poll(func(id int64) bool {
					r, ok := st.Job(id)
					return ok && r.MutationState == job.Committed && r.RefreshState == job.RefreshDone
				})
			}
		}
	}()

	term0 := c.Term()
	time.Sleep(warm)
	c.logs.reset()
	open := time.Now()
	tr.setWindow(open, time.Time{}) // closed by closeWindow
	applied0 := l.FSM().State().AppliedIndex()
	time.Sleep(window)
	window = tr.closeWindow(open, sustainedHoldOpen)
	st := l.FSM().State()
	applied := st.AppliedIndex() - applied0
	waiting := map[string]int{}
	tr.mu.Lock()
	for id := range tr.started {
		if r, ok := st.Job(id); ok {
			waiting[r.MutationState.String()+"/"+r.RefreshState.String()]++
		} else {
			waiting["not yet applied"]++
		}
	}
	tr.mu.Unlock()
	cancel()
	wg.Wait()

	tr.mu.Lock()
	defer tr.mu.Unlock()
	res := &sustainedResult{WindowS: window.Seconds(), Done: len(tr.lats), MaxBacklog: tr.max,
		AdmitErrors: admitErrs.Load(), ReportErrors: stats.refused.Load(), Elections: int(c.Term() - term0),
		MasterLog: c.logs.snapshot(), Waiting: waiting}
	if p := firstErr.Load(); p != nil {
		res.FirstErr = *p
	} else if p := stats.firstErr.Load(); p != nil {
		res.FirstErr = *p
	}
	if res.Done == 0 {
		return res, errors.New("sustained: no job reached DONE in the window: " + res.FirstErr)
	}
	res.PerS = float64(res.Done) / window.Seconds()
	half := window / 2
	for _, e := range tr.ends {
		if e < half {
			res.FirstHalf++
		} else {
			res.SecondHalf++
		}
	}
	res.FirstHalf, res.SecondHalf = res.FirstHalf/half.Seconds(), res.SecondHalf/half.Seconds()
	slices.Sort(tr.lats)
	res.P50Ms, res.P99Ms = pctMs(tr.lats, 0.50), pctMs(tr.lats, 0.99)
	res.EntriesPer = float64(applied) / float64(res.Done)
	return res, nil
}

func sustainedRows(s *sustainedResult, raw *loadResult) []row {
	rows := []row{
		{Section: secSustained, Figure: "jobs carried to DONE/s, steady state", Unit: "1/s", LM: f64(s.PerS)},
		{Section: secSustained, Figure: "admission → DONE p50", Unit: "ms", LM: f64(s.P50Ms)},
		{Section: secSustained, Figure: "admission → DONE p99", Unit: "ms", LM: f64(s.P99Ms)},
	}
	if raw != nil {
		rows[0].Raw = f64(raw.OpsPerS)
		rows[0] = rows[0].withRatio()
	}
	rows[0] = rows[0].atLeast(sustainedTarget, "/s")
	rows[0].Note = fmt.Sprintf("%d jobs in %.0f s, 1st/2nd half %.0f/%.0f per s, backlog ≤ %d (max seen %d), %.1f raft entries per job",
		s.Done, s.WindowS, s.FirstHalf, s.SecondHalf, sustainedBacklog, s.MaxBacklog, s.EntriesPer)
	if raw != nil {
		rows[0].Note += "; raw: Apply commits/s c=64"
	}
	if s.AdmitErrors > 0 || s.ReportErrors > 0 {
		rows[0].Note += fmt.Sprintf("; %d admissions and %d reports failed, first: %s", s.AdmitErrors, s.ReportErrors, clip(s.FirstErr, 120))
	}
	if s.Elections > 0 {
		rows[0].Note += fmt.Sprintf("; %d election(s)", s.Elections)
	}
	if len(s.Waiting) > 0 {
		rows[0].Note += fmt.Sprintf("; backlog at the end by state: %v", s.Waiting)
	}
	return rows
}

// runSustainedSection runs raw Apply at c = 64 (its baseline), then the
// sustained lifecycle.
func runSustainedSection(o *options, rep *report) {
	t := time.Now()
	raw, rawErr := runRawApply(o, admitConc)
	rep.Sections["raw_c64_sustained"] = time.Since(t).Seconds()
	var base *loadResult
	if rawErr != nil {
		rep.fail(secRaw, fmt.Errorf("sustained baseline: %w", rawErr))
	} else {
		base = &raw
		progress("raw c=%d (next to sustained): %.0f commits/s", admitConc, raw.OpsPerS)
	}
	t = time.Now()
	s, err := runSustained(o)
	rep.Sections[secSustained] = time.Since(t).Seconds()
	rep.Sustained = s
	if s != nil {
		logMasters(s.MasterLog)
	}
	if err != nil {
		rep.fail(secSustained, err)
		return
	}
	progress("sustained: %.0f jobs/s to DONE (%d in %.0f s), admission → DONE p50 %.1f ms, p99 %.1f ms, max backlog %d",
		s.PerS, s.Done, s.WindowS, s.P50Ms, s.P99Ms, s.MaxBacklog)
	rep.add(sustainedRows(s, base)...)
}
