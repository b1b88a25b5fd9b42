package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	clusteropt "github.com/lancemaster/lancemaster/pkg/options"
	"github.com/lancemaster/lancemaster/pkg/testkit"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/job/jobwire"
	"github.com/lancemaster/lancemaster/pkg/rpc"
)

// Part 2 measures the real `lancemaster backend` process: an agent in this
// benchmark's process would share its heap and its RSS with everything the
// benchmark did before (masters, raft, fixtures), so only a process of its
// own shows what the agent itself costs.
const (
	agentBuildTimeout = 3 * time.Minute // go build ./cmd/lancemaster
	agentReadyTimeout = 20 * time.Second
	agentStopTimeout  = 15 * time.Second
	agentSettle       = time.Second
	agentSettleQuick  = 500 * time.Millisecond
	agentHeartbeat    = time.Second // the master pool's heartbeat period
	agentLeaderTerm   = int64(1)
)

// agentResult is part 2.
type agentResult struct {
	Binary   string    `json:"binary"`
	GoBuildS float64   `json:"go_build_s"`
	Idle     memPoint  `json:"idle"`         // after the first heartbeat and a settle
	After    memPoint  `json:"after_builds"` // reports delivered, after a settle
	Builds   int       `json:"builds"`
	Inspects int       `json:"inspects"`
	Reports  int64     `json:"reports_delivered"`
	BuildMs  []float64 `json:"submit_to_finished_ms"`
	// Log holds the agent's warnings and errors (its last lines instead
	// when the part failed without any).
	Log []string `json:"log,omitempty"`
}

// memPoint is one reading of the agent process.
type memPoint struct {
	RSSBytes       int64 `json:"vmrss_bytes"`
	HWMBytes       int64 `json:"vmhwm_bytes"`
	HeapInuseBytes int64 `json:"go_heap_inuse_bytes"`
	GoSysBytes     int64 `json:"go_sys_bytes"`
}

// benchMaster stands in for the masters: it accepts every report. Any
// other method is never called (the embedded interface is nil).
type benchMaster struct {
	adminapi.LanceMasterService
	reports atomic.Int64
}

func (m *benchMaster) ReportLanceIndexJobResult_(context.Context, *wire.TLanceIndexJobReport) (*wire.TStatus, error) {
	m.reports.Add(1)
	return &wire.TStatus{StatusCode: wire.TStatusCode_OK}, nil
}

func (m *benchMaster) ReportLanceIndexJobTermination(context.Context, *wire.TLanceIndexJobTerminationReport) (*wire.TStatus, error) {
	m.reports.Add(1)
	return &wire.TStatus{StatusCode: wire.TStatusCode_OK}, nil
}

func (m *benchMaster) ReportLanceIndexJobProgress(context.Context, *wire.TLanceIndexJobProgressReport) (*wire.TStatus, error) {
	return &wire.TStatus{StatusCode: wire.TStatusCode_OK}, nil
}

func runAgentMemory(o *options, env *backendEnv, dir, pristineURI string) (res *agentResult, err error) {
	res = &agentResult{Binary: filepath.Join(dir, "lancemaster")}
	t := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), agentBuildTimeout)
	build := exec.CommandContext(ctx, env.goBin, "build", "-o", res.Binary, "./cmd/lancemaster")
	build.Dir = env.root
	out, err := build.CombinedOutput()
	cancel()
	res.GoBuildS = time.Since(t).Seconds()
	if err != nil {
		return res, fmt.Errorf("go build ./cmd/lancemaster: %w\n%s", err, tail(out, 10))
	}

	master := &benchMaster{}
	msrv, err := rpc.NewServer("127.0.0.1:0", adminapi.NewLanceMasterServiceProcessor(master), rpc.DefaultConfig(), nil)
	if err != nil {
		return res, err
	}
	if err := msrv.Serve(); err != nil {
		msrv.Close()
		return res, err
	}
	defer msrv.Close()
	masterAddr := msrv.Addr().String()

	ports, err := freePorts(2)
	if err != nil {
		return res, err
	}
	addr, httpAddr := "127.0.0.1:"+strconv.Itoa(ports[0]), "127.0.0.1:"+strconv.Itoa(ports[1])
	cfgPath := filepath.Join(dir, "backend.yaml")
	cfg := fmt.Sprintf(`listen: %q
http_listen: %q
data_dir: %q
masters: [%q]
concurrency: 2
queue_size: 16
isolation: best-effort
memory_limit: 1GiB
pids_limit: 256
worker: [%q, %q]
log_format: json
log_level: info
`, addr, httpAddr, filepath.Join(dir, "agent-data"), masterAddr, env.node, env.builder)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return res, err
	}

	logs := &agentLog{}
	cmd := exec.Command(res.Binary, "backend", "--config", cfgPath)
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // so an interrupted run can end it
	if err := cmd.Start(); err != nil {
		return res, err
	}
	pid := cmd.Process.Pid
	childPgid.Store(int64(pid))
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	defer func() {
		stopAgent(cmd, exited)
		childPgid.Store(0)
		if w := logs.lines(); err != nil || logs.warned() {
			res.Log = w
		}
	}()

	client := rpc.NewThriftBackendClient(rpc.DefaultConfig())
	term := agentLeaderTerm
	hbReq := &wire.THeartbeatRequest{MasterID: "lancemaster-bench", LeaderTerm: &term, MasterAddresses: []string{masterAddr}}
	heartbeat := func() (*wire.THeartbeatResponse, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		hb, err := client.Heartbeat(ctx, addr, hbReq)
		if err == nil && hb.GetStatus().GetStatusCode() != wire.TStatusCode_OK {
			err = fmt.Errorf("heartbeat answered %s", hb.GetStatus().GetStatusCode())
		}
		return hb, err
	}
	var epoch int64
	for end := time.Now().Add(agentReadyTimeout); ; {
		hb, err := heartbeat()
		if err == nil {
			epoch = hb.BeProcessEpoch
			break
		}
		select {
		case <-exited:
			return res, fmt.Errorf("lancemaster backend exited at start: %s", clip(strings.Join(logs.lines(), " | "), 400))
		default:
		}
		if time.Now().After(end) {
			return res, fmt.Errorf("lancemaster backend did not answer a heartbeat within %s: %w", agentReadyTimeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Heartbeat every second, as the leader's pool does, while it runs.
	stopHB := make(chan struct{})
	var hbWG sync.WaitGroup
	hbWG.Add(1)
	go func() {
		defer hbWG.Done()
		tk := time.NewTicker(agentHeartbeat)
		defer tk.Stop()
		for {
			select {
			case <-stopHB:
				return
			case <-tk.C:
				_, _ = heartbeat()
			}
		}
	}()
	defer func() { close(stopHB); hbWG.Wait() }()

	settle := agentSettle
	if o.quick {
		settle = agentSettleQuick
	}
	time.Sleep(settle)
	if res.Idle, err = readAgentMemory(pid, httpAddr); err != nil {
		return res, err
	}

	rounds := agentRounds
	if o.quick {
		rounds = agentRoundsQuick
	}
	opts := clusteropt.Resolve(nil)
	lim := job.Limits(opts.IndexLimits())
	for r := 0; r < rounds; r++ {
		uri := filepath.Join(dir, "agent-datasets", "r"+strconv.Itoa(r+1), "items.lance")
		if err := copyDataset(pristineURI, uri); err != nil {
			return res, err
		}
		for i, b := range demoBuilds {
			if b.Extra {
				continue // the agent's memory is measured over demo.sh's two builds
			}
			jobID := int64(1000 + 10*r + i)
			d, err := agentDispatch(client, addr, uri, b, lim, jobID, epoch)
			if err != nil {
				return res, err
			}
			res.Inspects++
			t := time.Now()
			if err := agentBuild(client, addr, d); err != nil {
				return res, fmt.Errorf("%s build through the agent: %w", b.Type, err)
			}
			res.BuildMs = append(res.BuildMs, ms(time.Since(t)))
			res.Builds++
		}
	}
	for end := time.Now().Add(agentReadyTimeout); master.reports.Load() < int64(res.Builds); {
		if time.Now().After(end) {
			return res, fmt.Errorf("the agent delivered %d of %d reports within %s", master.reports.Load(), res.Builds, agentReadyTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
	res.Reports = master.reports.Load()
	time.Sleep(settle)
	if res.After, err = readAgentMemory(pid, httpAddr); err != nil {
		return res, err
	}
	return res, nil
}

// agentDispatch inspects the dataset through the agent and builds the
// dispatch the leader would send for b.
func agentDispatch(client rpc.BackendClient, addr, uri string, b demoBuild, lim job.Limits, jobID, epoch int64) (*wire.TLanceIndexJobDispatch, error) {
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	timeout := buildTimeout.Milliseconds()
	ir, err := client.Inspect(ctx, addr, &wire.TInspectDatasetRequest{DatasetURI: uri, TimeoutMs: &timeout})
	if err != nil {
		return nil, fmt.Errorf("inspect through the agent: %w", err)
	}
	if st := ir.GetStatus(); st.GetStatusCode() != wire.TStatusCode_OK {
		return nil, fmt.Errorf("inspect through the agent: %s %v", st.GetStatusCode(), st.GetErrorMsgs())
	}
	deadline := time.Now().Add(buildTimeout).UnixMilli()
	req, err := demoBuildRequest(b, jobwire.Snapshot(ir), uri, lim, jobID, deadline)
	if err != nil {
		return nil, err
	}
	secret := "bench-secret-" + strconv.FormatInt(jobID, 10)
	term := agentLeaderTerm
	return &wire.TLanceIndexJobDispatch{JobID: jobID, DispatchRevision: 1, InvocationID: req.InvocationID,
		BeProcessEpoch: epoch, DeadlineMs: deadline, MutationType: wire.TLanceIndexMutationType_CREATE,
		IndexName: req.IndexName, ColumnName: req.ColumnName, IndexType: req.IndexType, PropertiesJSON: &req.PropertiesJSON,
		DatasetURI: uri, AdmittedDatasetVersion: req.AdmittedDatasetVersion, SchemaContractJSON: req.SchemaContractJSON,
		InvocationSecret: &secret, LeaderTerm: &term}, nil
}

// agentBuild submits d and polls the agent until the invocation finished
// with NATIVE_OK.
func agentBuild(client rpc.BackendClient, addr string, d *wire.TLanceIndexJobDispatch) error {
	call := func(f func(ctx context.Context) error) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return f(ctx)
	}
	var st *wire.TStatus
	if err := call(func(ctx context.Context) (err error) { st, err = client.Submit(ctx, addr, d); return }); err != nil {
		return err
	}
	if st.GetStatusCode() != wire.TStatusCode_OK {
		return fmt.Errorf("submit answered %s %v", st.GetStatusCode(), st.GetErrorMsgs())
	}
	q := &wire.TQueryInvocationsRequest{BeProcessEpoch: d.BeProcessEpoch, LeaderTerm: d.GetLeaderTerm(), InvocationIds: []string{d.InvocationID}}
	for end := time.Now().Add(buildTimeout); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		var qr *wire.TQueryInvocationsResponse
		if err := call(func(ctx context.Context) (err error) { qr, err = client.Query(ctx, addr, q); return }); err != nil {
			return err
		}
		if qr.GetStatus().GetStatusCode() != wire.TStatusCode_OK || len(qr.Invocations) != 1 {
			return fmt.Errorf("query answered %s", qr.GetStatus().GetStatusCode())
		}
		inv := qr.Invocations[0]
		if inv.State != wire.TLanceInvocationState_FINISHED {
			continue
		}
		r := inv.GetResult_()
		if r == nil || !r.IsSetResultCode() || r.GetResultCode() != wire.TLanceIndexJobResultCode_NATIVE_OK {
			msg := ""
			if r != nil {
				msg = r.GetSanitizedMessage()
			}
			return fmt.Errorf("finished without NATIVE_OK: %v %s", r.GetResultCode(), msg)
		}
		return nil
	}
	return fmt.Errorf("not finished within %s", buildTimeout)
}

// readAgentMemory reads VmRSS and VmHWM from /proc/PID/status and the Go
// heap from the agent's /metrics.
func readAgentMemory(pid int, httpAddr string) (memPoint, error) {
	m, err := procStatusBytes(pid, "VmRSS", "VmHWM")
	if err != nil {
		return memPoint{}, fmt.Errorf("/proc/%d/status: %w", pid, err)
	}
	p := memPoint{RSSBytes: m["VmRSS"], HWMBytes: m["VmHWM"]}
	g, err := scrapeGauges("http://"+httpAddr+"/metrics", "go_memstats_heap_inuse_bytes", "go_memstats_sys_bytes")
	if err != nil {
		return p, fmt.Errorf("the agent's /metrics: %w", err)
	}
	p.HeapInuseBytes, p.GoSysBytes = int64(g["go_memstats_heap_inuse_bytes"]), int64(g["go_memstats_sys_bytes"])
	return p, nil
}

// scrapeGauges reads unlabeled samples from a Prometheus text endpoint.
func scrapeGauges(url string, names ...string) (map[string]float64, error) {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 8<<20))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && contains(names, f[0]) {
			if v, err := strconv.ParseFloat(f[1], 64); err == nil {
				out[f[0]] = v
			}
		}
	}
	for _, n := range names {
		if _, ok := out[n]; !ok {
			return out, fmt.Errorf("%s: no %s", url, n)
		}
	}
	return out, sc.Err()
}

// stopAgent sends SIGTERM (a graceful shutdown) and SIGKILLs the group if
// the agent is still there after agentStopTimeout.
func stopAgent(cmd *exec.Cmd, exited chan struct{}) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(agentStopTimeout):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}
}

// freePorts reserves n free loopback ports for the rest of the run (the
// agent's config wants fixed ports).
func freePorts(n int) ([]int, error) { return testkit.ReservePorts(n) }

// agentLog keeps the agent's warnings and errors (JSON log lines) and its
// last lines, bounded.
type agentLog struct {
	mu      sync.Mutex
	partial []byte
	warns   []string
	last    []string
}

func (l *agentLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		line := string(l.partial[:i])
		l.partial = l.partial[i+1:]
		if (strings.Contains(line, `"level":"warn"`) || strings.Contains(line, `"level":"error"`)) && len(l.warns) < maxLogLines {
			l.warns = append(l.warns, line)
		}
		l.last = append(l.last, line)
		if len(l.last) > 5 {
			l.last = l.last[1:]
		}
	}
	if len(l.partial) > 64<<10 {
		l.partial = nil
	}
	return len(p), nil
}

func (l *agentLog) warned() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.warns) > 0
}

// lines returns the warnings and errors, or the last lines when there were
// none.
func (l *agentLog) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.warns) > 0 {
		return append([]string(nil), l.warns...)
	}
	return append([]string(nil), l.last...)
}

func agentRows(a *agentResult) []row {
	heap := func(p memPoint) string {
		return fmt.Sprintf("Go heap in use %s MiB, Go runtime from the OS %s MiB", sig(mib(p.HeapInuseBytes), 3), sig(mib(p.GoSysBytes), 3))
	}
	med := newSpread(a.BuildMs)
	return []row{
		{Section: secBackend, Figure: "lancemaster backend VmRSS, idle after its first heartbeat", Unit: "MiB",
			LM: f64(mib(a.Idle.RSSBytes)), Note: "the real binary (go build), /proc/PID/status; " + heap(a.Idle)},
		{Section: secBackend, Figure: fmt.Sprintf("lancemaster backend VmRSS after %d demo builds + %d inspects", a.Builds, a.Inspects),
			Unit: "MiB", LM: f64(mib(a.After.RSSBytes)),
			Note: fmt.Sprintf("%d reports delivered; VmHWM %s MiB; %s; submit → FINISHED %s", a.Reports,
				sig(mib(a.After.HWMBytes), 3), heap(a.After), med.String("ms"))},
	}
}
