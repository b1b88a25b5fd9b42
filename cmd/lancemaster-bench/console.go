package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/config"
	"github.com/lancemaster/lancemaster/pkg/console/consoletest"
)

// The console section: the lifecycle cluster with each master serving the
// console, consoleJobs jobs admitted (the fake backend accepts every submit
// and never reports, so they stay RUNNING), and headless Debian chromium
// (the browser tests' flags: pkg/console/consoletest) loading the jobs
// page from a follower consoleLoads times: navigation start → the page
// rendered (main#app ready, polled every consolePoll). The baseline, run
// beside it: the same page's API answer alone, GET /v1/jobs?limit=100 from
// Go over a fresh connection each time.
const (
	secConsole   = "console"
	consoleJobs  = 500
	consoleLoads = 20
	consolePoll  = 5 * time.Millisecond
	consoleStep  = 30 * time.Second
)

type consoleResult struct {
	Jobs       int     `json:"jobs"`
	Loads      int     `json:"loads"`
	RenderP50  float64 `json:"render_p50_ms"`
	RenderP99  float64 `json:"render_p99_ms"`
	APIP50     float64 `json:"api_p50_ms"`
	APIP99     float64 `json:"api_p99_ms"`
	Chromium   string  `json:"chromium"`
	FirstStart float64 `json:"browser_start_ms"`
}

func runConsole(o *options) (*consoleResult, error) {
	bin := consoletest.Find()
	if bin == "" {
		return nil, errors.New("console: no chromium (apt-get install chromium, or set LANCEMASTER_CHROMIUM)")
	}
	c, err := startMCluster(o, mclusterConfig{name: "console", profile: config.RaftProfileDefault, options: liftedCaps, console: true})
	if err != nil {
		return nil, err
	}
	defer c.close()
	li, l, err := c.leader(-1)
	if err != nil {
		return nil, err
	}
	c.Backend.SetSubmitHook(func(context.Context, *wire.TLanceIndexJobDispatch) (*wire.TStatus, error) {
		return &wire.TStatus{StatusCode: wire.TStatusCode_OK}, nil
	})
	jobs, loads := consoleJobs, consoleLoads
	if o.quick { // the smoke run: as many jobs as the lifecycle sections, 3 loads
		jobs, loads = min(jobs, o.lifeJobs), 3
	}
	if _, err := c.admitMany(l.RPCAddr(), jobs, admitConc); err != nil {
		return nil, fmt.Errorf("console: admitting %d jobs: %w", jobs, err)
	}
	follower := c.Master((li + 1) % 3)
	base := "http://" + follower.HTTPAddr()
	res := &consoleResult{Jobs: jobs, Loads: loads, Chromium: bin}

	api := make([]time.Duration, 0, loads)
	for range loads {
		t := time.Now()
		if err := getOnce(base + "/v1/jobs?limit=100"); err != nil {
			return nil, fmt.Errorf("console: the API baseline: %w", err)
		}
		api = append(api, time.Since(t))
	}

	profile, err := os.MkdirTemp(o.tmp, "chromium-")
	if err != nil {
		return nil, err
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), consoletest.AllocatorOptions(bin, profile, io.Discard)...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	t := time.Now()
	started := make(chan error, 1)
	go func() {
		started <- chromedp.Do(ctx, chromedp.EmulateViewport(consoletest.ViewportWidth, consoletest.ViewportHeight))
	}() // the first action starts the browser
	select {
	case err := <-started:
		if err != nil {
			return nil, fmt.Errorf("console: start %s: %w", bin, err)
		}
	case <-time.After(consoleStep):
		return nil, fmt.Errorf("console: %s did not start within %s", bin, consoleStep)
	}
	res.FirstStart = ms1(time.Since(t))
	render := make([]time.Duration, 0, loads)
	for i := range loads + 1 { // the first load (cold caches) is not counted
		sctx, scancel := context.WithTimeout(ctx, consoleStep)
		t := time.Now()
		err := chromedp.Do(sctx, chromedp.Navigate(base+"/ui/?load="+strconv.Itoa(i)+"#/jobs"))
		if err == nil {
			_, err = chromedp.Run(sctx, chromedp.Poll[bool](consoletest.RenderedJS("#/jobs"), chromedp.WithPollingInterval(consolePoll)))
		}
		d := time.Since(t)
		scancel()
		if err != nil {
			return nil, fmt.Errorf("console: load %d of the jobs page: %w", i, err)
		}
		if i > 0 {
			render = append(render, d)
		}
	}
	slices.Sort(api)
	slices.Sort(render)
	res.APIP50, res.APIP99 = pctMs(api, 0.50), pctMs(api, 0.99)
	res.RenderP50, res.RenderP99 = pctMs(render, 0.50), pctMs(render, 0.99)
	return res, nil
}

// getOnce GETs url on a fresh connection and reads the whole answer.
func getOnce(url string) error {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Close = true
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return nil
}

func runConsoleSection(o *options, rep *report) {
	t := time.Now()
	r, err := runConsole(o)
	rep.Sections[secConsole] = time.Since(t).Seconds()
	if err != nil {
		rep.fail(secConsole, err)
		return
	}
	rep.Console = r
	progress("console: jobs page rendered p50 %.0f ms (API alone %.1f ms), %d jobs, browser start %.0f ms", r.RenderP50, r.APIP50, r.Jobs, r.FirstStart)
	note := fmt.Sprintf("headless chromium, navigation → page rendered, %d loads after a cold one, %d jobs; raw: GET /v1/jobs?limit=100 alone", r.Loads, r.Jobs)
	rep.add(
		row{Section: secConsole, Figure: "console jobs page rendered, p50", Unit: "ms", LM: f64(r.RenderP50), Raw: f64(r.APIP50), Note: note}.withRatio(),
		row{Section: secConsole, Figure: "console jobs page rendered, p99", Unit: "ms", LM: f64(r.RenderP99), Raw: f64(r.APIP99)}.withRatio(),
	)
}
