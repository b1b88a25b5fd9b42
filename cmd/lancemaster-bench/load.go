package main

import (
	"errors"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// loadResult is one closed-loop load point: c workers, each with one request
// outstanding, measured over a window after a warm-up.
type loadResult struct {
	Conc    int     `json:"conc"`
	OpsPerS float64 `json:"ops_per_s"`
	P50Ms   float64 `json:"p50_ms"`
	P99Ms   float64 `json:"p99_ms"`
	N       int     `json:"n"`
	// FirstHalf and SecondHalf are the rates of the two halves of the
	// window: a drop shows work that grows with the requests served.
	FirstHalfPerS  float64 `json:"first_half_ops_per_s"`
	SecondHalfPerS float64 `json:"second_half_ops_per_s"`
	Errors         int64   `json:"errors"`
	FirstErr       string  `json:"first_error,omitempty"`
	// JobsAtEnd is how many jobs the leader's FSM holds when the load stops
	// (admission only; every admitted job stays unresolved).
	JobsAtEnd int64 `json:"jobs_at_end,omitempty"`
	// Elections counts raft term changes during the load point (admission
	// only); on this shared machine a stalled host can cost a leader.
	Elections int `json:"elections,omitempty"`
	// MasterLog holds the masters' first warnings and errors (admission only).
	MasterLog []string `json:"master_log,omitempty"`
	// GCCycles and GCCPUShare are the Go GC cycles of the benchmark's
	// process in the window and their share of its CPU (gcshare.go): the
	// process's, so they describe raw and admission, not etcd.
	GCCycles   int     `json:"gc_cycles"`
	GCCPUShare float64 `json:"gc_cpu_share"`
	// ReadsPerOp and WritesPerOp are the read and write system calls of
	// this process and its children in the window per operation completed
	// (syscalls.go); zero where /proc cannot be read.
	ReadsPerOp  float64 `json:"reads_per_op,omitempty"`
	WritesPerOp float64 `json:"writes_per_op,omitempty"`
}

// worker is one closed-loop client.
type worker struct {
	// prepare, when set, runs before each request, outside the timing (to
	// register the next dataset with the fake backend, say).
	prepare func()
	// do is one request; it must be bounded by its own timeout.
	do func() error
	// close, when set, runs once the load has stopped.
	close func()
}

// errorBackoff keeps a worker whose requests fail at once from spinning.
const errorBackoff = 10 * time.Millisecond

// closedLoop runs c workers, each calling its op in a loop with one request
// outstanding (the raw baseline's method): a warm-up, then a window in which
// every request that completes successfully in the window is counted and its
// latency recorded. newWorker is called once per worker before the load
// starts.
func closedLoop(c int, warm, window time.Duration, newWorker func(g int) (worker, error)) (loadResult, error) {
	ws := make([]worker, 0, c)
	defer func() {
		for _, w := range ws {
			if w.close != nil {
				w.close()
			}
		}
	}()
	for g := 0; g < c; g++ {
		w, err := newWorker(g)
		if err != nil {
			return loadResult{}, err
		}
		ws = append(ws, w)
	}

	var (
		measuring, stop atomic.Bool
		errs            atomic.Int64
		firstErr        atomic.Pointer[string]
		wg              sync.WaitGroup
	)
	type sample struct{ end, lat time.Duration } // end: since the window opened
	var t0 time.Time                             // written before measuring is set
	lats := make([][]sample, c)
	for g := 0; g < c; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			local := make([]sample, 0, 4096)
			w := ws[g]
			for !stop.Load() {
				if w.prepare != nil {
					w.prepare()
				}
				s := time.Now()
				err := w.do()
				d := time.Since(s)
				if err != nil {
					errs.Add(1)
					msg := err.Error()
					firstErr.CompareAndSwap(nil, &msg)
					time.Sleep(errorBackoff)
					continue
				}
				if measuring.Load() {
					local = append(local, sample{end: time.Since(t0), lat: d})
				}
			}
			lats[g] = local
		}(g)
	}
	time.Sleep(warm)
	gc0, io0 := readGC(), readIO()
	t0 = time.Now()
	measuring.Store(true)
	time.Sleep(window)
	measuring.Store(false)
	el := time.Since(t0)
	io1 := readIO()
	gcCycles, gcShare := gcSince(gc0)
	stop.Store(true)
	wg.Wait()

	var all []time.Duration
	var first, second int
	for _, l := range lats {
		for _, x := range l {
			all = append(all, x.lat)
			if x.end < el/2 {
				first++
			} else {
				second++
			}
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	half := el.Seconds() / 2
	res := loadResult{
		Conc: c, N: len(all), OpsPerS: float64(len(all)) / el.Seconds(),
		P50Ms: pctMs(all, 0.50), P99Ms: pctMs(all, 0.99), Errors: errs.Load(),
		FirstHalfPerS: float64(first) / half, SecondHalfPerS: float64(second) / half,
		GCCycles: gcCycles, GCCPUShare: gcShare,
	}
	res.ReadsPerOp, res.WritesPerOp, _ = perOp(io0, io1, len(all))
	if p := firstErr.Load(); p != nil {
		res.FirstErr = *p
	}
	if len(all) == 0 {
		return res, errors.New("no request completed in the window: " + res.FirstErr)
	}
	return res, nil
}

// pctMs is the p-quantile of sorted durations in milliseconds (the baseline's
// nearest-rank-below definition).
func pctMs(sorted []time.Duration, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return ms(sorted[int(float64(len(sorted)-1)*p)])
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
