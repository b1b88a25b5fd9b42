// Command lancemaster-bench measures lancemaster against the raw Raft
// baseline in one invocation and prints every figure as a ratio to that
// baseline (docs/benchmarks.md). The machine these run on is shared and
// moves ±30% between runs, so a figure means something only next to the
// baseline measured in the same run. Figures are printed, never asserted.
//
// Sections (-only):
//
//	raw        the raw baseline: 3 hashicorp/raft nodes over loopback TCP,
//	           raft-boltdb/v2 with fsync, trivial FSM; Apply commits/s and
//	           latency at c = 64 and 256.
//	admission  3 lancemaster masters over loopback, a fake backend, c Thrift
//	           clients calling CreateIndex on the leader; admissions/s and
//	           latency at c = 64 and 256, against raw Apply at the same c.
//	dispatch   3 complete masters (master.Start: dispatcher, pool, reports)
//	           over loopback, one fast fake backend, caps lifted: N jobs
//	           admitted paused, then RUNNING transitions/s from the unpause,
//	           against raw transitions/s packed 64 per entry, 1 in flight.
//	reports    the same cluster: N NATIVE_OK reports from 64 clients to the
//	           leader; results applied/s, against raw Apply at c = 64.
//	latency    an idle cluster: CreateIndex call → submit received by the
//	           backend, p50/p99 of sequential admissions, against raw Apply
//	           latency at c = 1.
//	failover   fast raft profile, PENDING work queued: leader killed, and
//	           SIGTERM (leadership transfer) → first dispatch by the new
//	           leader, median [min–max], against raw kill/transfer → first
//	           commit with the same timeouts.
//	etcd       the peer: a three-member etcd 3.7 cluster over loopback with
//	           default settings (bench/etcd builds it), Put and
//	           compare-and-swap Txn at c = 64 and 256 over 16 shared gRPC
//	           connections, interleaved with the admission load points;
//	           admission is quoted against etcd Txn at the same c.
//	sustained  the same cluster as dispatch, jobs carried through the whole
//	           lifecycle (admission → dispatch → report → refresh → DONE)
//	           at steady state for 60 s, at most 1,024 in flight: jobs/s and
//	           admission → DONE p50/p99, against raw Apply at c = 64.
//	console    the same cluster serving the console: the jobs page loaded
//	           in headless Debian chromium from a follower, navigation →
//	           rendered, against the page's API answer alone.
//	fsm        the raftfsm benchmarks (go test -bench, a subprocess): queries
//	           over 1M retained jobs, snapshot persist/restore, heap per job,
//	           against a same-run gob snapshot of 1M ~200 B records.
//	backend    the backend agent: supervisor overhead per job (a trivial
//	           worker through supervisor.Supervisor vs a bare exec, call →
//	           first frame byte and whole job, p50/p99); the real
//	           `lancemaster backend` process's VmRSS idle and after demo
//	           builds; demo.sh's IVF_PQ and BTREE builds on 20,000 × 128
//	           through the supervisor vs node run directly: wall time and
//	           each worker's peak RSS. Needs node and make setup for the
//	           builds (skipped with a line otherwise).
//
// A section's baseline runs whenever the section does: admission runs raw
// Apply at the same concurrency, dispatch, reports and latency run the raw
// load points they compare with, failover runs raw failover and transfer,
// etcd is itself a baseline of admission, fsm runs the gob snapshot baseline, backend runs every worker bare too.
//
// -rounds N repeats raw, admission, etcd, dispatch and reports N times and
// adds the section targets: each peer target judged on the median of its
// per-round ratios (rounds.go).
//
// Usage (make bench BENCH_ARGS="..." runs the same):
//
//	go run ./cmd/lancemaster-bench [-dur 10s] [-quick] [-only raw,admission,...]
//	    [-c 64,256] [-n 20000] [-lat 200] [-reps 5] [-tmp dir] [-json]
//	    [-cpuprofile file | -cpuprofile-reports file] [-memprofile file]
//	    [-etcd path] [-rounds N]
//
// Progress goes to stderr, the table (or -json) to stdout. Everything runs on
// 127.0.0.1 under one temp dir, removed at the end (also on SIGINT/SIGTERM).
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lancemaster/lancemaster/pkg/backend/supervisor"
	"github.com/lancemaster/lancemaster/pkg/config"
)

// Sections, in the order they run.
const (
	secRaw       = "raw"
	secAdmission = "admission"
	secDispatch  = "dispatch"
	secReports   = "reports"
	secLatency   = "latency"
	secFailover  = "failover"
	secFSM       = "fsm"
	secBackend   = "backend"
)

var allSections = []string{secRaw, secAdmission, secEtcd, secDispatch, secReports, secLatency, secFailover, secSustained, secConsole, secFSM, secBackend}

// Load points and sizes of a default run and of a -quick smoke run.
const (
	defaultConc  = "64,256"
	defaultWarm  = 1 * time.Second
	quickDur     = 2 * time.Second
	quickWarm    = 500 * time.Millisecond
	defaultSnapN = 1_000_000
	quickSnapN   = 100_000
	// fsmRunTimeout bounds one go test run, build included; a normal one
	// takes well under a minute.
	fsmRunTimeout = 4 * time.Minute
	// maxConc keeps every client connection within a master's default
	// connection cap (rpc.DefaultMaxConns).
	maxConc = 256
	// maxLifeJobs: the dispatcher scans at most 65,536 PENDING jobs a round.
	maxLifeJobs = 65_536
)

type options struct {
	dur, warm   time.Duration
	quick       bool
	only        map[string]bool
	tmp         string
	json        bool
	cpuprof     string
	reportsProf string // a CPU profile of the reports window alone
	memprof     string
	snapN       int   // records of the gob snapshot baseline and of the fsm benchmarks
	conc        []int // load points of raw and admission
	lifeJobs    int   // jobs of the dispatch and reports sections
	latN        int   // samples of the latency section
	reps        int   // repetitions of each failover kind
	etcdBin     string
	logStore    string // the masters' and the raw baseline's raft_log_store (config.RaftLogStore*)
	rounds      int    // rounds of the peer comparisons (rounds.go)
}

func main() {
	// The backend section runs a supervisor, which re-executes this binary as
	// its cgroup v1 placement helper and as its trivial worker.
	supervisor.MaybeRunHelper()
	if os.Getenv(trivialWorkerEnv) == "1" {
		os.Exit(trivialWorker())
	}
	os.Exit(benchMain())
}

// benchMain runs the benchmark and returns the exit code: 2 for bad flags, 1
// when a section could not run (a missed target is not a failure).
func benchMain() int {
	o, err := parseFlags()
	if err != nil {
		fmt.Fprintln(os.Stderr, "lancemaster-bench:", err)
		return 2
	}
	if o.cpuprof != "" {
		stopProfile, err := startCPUProfile(o.cpuprof)
		if err != nil {
			fmt.Fprintln(os.Stderr, "lancemaster-bench:", err)
			return 2
		}
		defer stopProfile()
	}
	rep := run(o)
	if o.memprof != "" {
		if err := writeAllocsProfile(o.memprof); err != nil {
			fmt.Fprintln(os.Stderr, "lancemaster-bench:", err)
			return 1
		}
	}
	if o.json {
		if err := rep.writeJSON(os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "lancemaster-bench:", err)
			return 1
		}
	} else {
		quick := ""
		if o.quick {
			quick = ", -quick"
		}
		fmt.Printf("\nlancemaster-bench %s  (%d CPUs, %s, window %s per load point%s, raft log store %s)\n",
			rep.Date, rep.Host.CPUs, rep.Host.GoVersion, o.dur, quick, o.freshLogStore())
		fmt.Println("ratio = lancemaster / raw baseline of this run; throughput: higher is better; time, bytes: lower is better.")
		fmt.Println()
		rep.writeTable(os.Stdout)
	}
	if len(rep.Errors) > 0 {
		return 1
	}
	return 0
}

func parseFlags() (*options, error) {
	o := &options{warm: defaultWarm, snapN: defaultSnapN}
	flag.DurationVar(&o.dur, "dur", 10*time.Second, "measurement window per load point")
	flag.BoolVar(&o.quick, "quick", false, "smoke run: 2 s windows, 100k-record snapshots, 2,000 dispatched jobs, 50 latency samples, 3 failovers of each kind (unless given)")
	only := flag.String("only", strings.Join(allSections, ","), "comma list of sections: "+strings.Join(allSections, ", "))
	flag.StringVar(&o.tmp, "tmp", os.TempDir(), "parent directory for the run's temp dir (removed at the end)")
	flag.BoolVar(&o.json, "json", false, "print the report as JSON instead of a table")
	concFlag := flag.String("c", defaultConc, "comma list of concurrencies (load points) of raw and admission")
	flag.StringVar(&o.cpuprof, "cpuprofile", "", "write a CPU profile of the whole run to this file (for finding bottlenecks)")
	flag.StringVar(&o.reportsProf, "cpuprofile-reports", "", "write a CPU profile of the reports window alone to this file (the last round's; not with -cpuprofile)")
	flag.StringVar(&o.memprof, "memprofile", "", "write the run's allocations profile to this file at the end")
	flag.IntVar(&o.lifeJobs, "n", defaultLifeJobs, fmt.Sprintf("jobs dispatched and reported by dispatch and reports (-quick: %d)", quickLifeJobs))
	flag.IntVar(&o.latN, "lat", defaultLatencyN, fmt.Sprintf("sequential admissions measured by latency (-quick: %d)", quickLatencyN))
	flag.IntVar(&o.reps, "reps", defaultFailoverReps, fmt.Sprintf("repetitions of each failover kind (-quick: %d)", quickFailoverReps))
	flag.StringVar(&o.etcdBin, "etcd", "", "etcd server binary of the etcd section (default: built from bench/etcd on first use)")
	flag.StringVar(&o.logStore, "raft-log-store", config.DefaultRaftLogStore,
		"the raft log store of the masters and of the raw baseline: auto (the default: wal, every data dir of the run is new), boltdb or wal")
	flag.IntVar(&o.rounds, "rounds", 1, fmt.Sprintf("repeat %s this many times and judge the peer targets over the rounds (at most %d)",
		strings.Join(roundSections, ", "), maxRounds))
	flag.Parse()
	if flag.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", flag.Args())
	}
	if err := config.CheckRaftLogStore(o.logStore); err != nil {
		return nil, fmt.Errorf("-raft-log-store: %w", err)
	}
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if o.quick {
		o.warm, o.snapN = quickWarm, quickSnapN
		if !set["dur"] {
			o.dur = quickDur
		}
		if !set["n"] {
			o.lifeJobs = quickLifeJobs
		}
		if !set["lat"] {
			o.latN = quickLatencyN
		}
		if !set["reps"] {
			o.reps = quickFailoverReps
		}
	}
	if o.dur <= 0 || o.dur > 10*time.Minute {
		return nil, fmt.Errorf("-dur %s: want (0, 10m]", o.dur)
	}
	if o.lifeJobs < 1 || o.lifeJobs > maxLifeJobs {
		return nil, fmt.Errorf("-n %d: want [1, %d]", o.lifeJobs, maxLifeJobs)
	}
	if o.latN < 1 || o.latN > 10_000 {
		return nil, fmt.Errorf("-lat %d: want [1, 10000]", o.latN)
	}
	if o.reps < 1 || o.reps > 100 {
		return nil, fmt.Errorf("-reps %d: want [1, 100]", o.reps)
	}
	for _, f := range strings.Split(*concFlag, ",") {
		c, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || c < 1 || c > maxConc {
			return nil, fmt.Errorf("-c: %q is not a concurrency in [1, %d]", f, maxConc)
		}
		o.conc = append(o.conc, c)
	}
	o.only = map[string]bool{}
	for _, s := range strings.Split(*only, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if !contains(allSections, s) {
			return nil, fmt.Errorf("-only: unknown section %q (want %s)", s, strings.Join(allSections, ", "))
		}
		o.only[s] = true
	}
	if len(o.only) == 0 {
		return nil, fmt.Errorf("-only: no section selected")
	}
	if err := checkProfiles(o); err != nil {
		return nil, err
	}
	if err := checkRounds(o); err != nil {
		return nil, err
	}
	return o, nil
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

// run executes the selected sections inside one temp dir, removed at the end
// (and on SIGINT/SIGTERM).
func run(o *options) *report {
	rep := &report{
		Date:     time.Now().UTC().Format("2006-01-02 15:04 UTC"),
		Host:     hostInfo{GoVersion: runtime.Version(), CPUs: runtime.NumCPU(), OS: runtime.GOOS, Arch: runtime.GOARCH},
		Sections: map[string]float64{},
		Options: map[string]any{"dur": o.dur.String(), "warm": o.warm.String(), "quick": o.quick,
			"only": keys(o.only), "concurrency": o.conc, "snapshot_records": o.snapN,
			"lifecycle_jobs": o.lifeJobs, "latency_samples": o.latN, "failover_reps": o.reps,
			"raft_log_store": o.freshLogStore(), "rounds": o.rounds},
	}
	root, err := os.MkdirTemp(o.tmp, "lancemaster-bench-")
	if err != nil {
		rep.fail("setup", err)
		return rep
	}
	o.tmp = root
	defer os.RemoveAll(root)
	done := make(chan struct{})
	defer close(done)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	go func() { // an interrupted run leaves no child and no temp dir behind
		select {
		case <-sig:
			killChild()
			os.RemoveAll(root)
			fmt.Fprintln(os.Stderr, "lancemaster-bench: interrupted")
			os.Exit(130)
		case <-done:
		}
	}()

	runRounds(o, rep) // raw, admission, etcd, then the lifecycle sections
	if o.only[secSustained] {
		runSustainedSection(o, rep)
	}
	if o.only[secConsole] {
		runConsoleSection(o, rep)
	}
	if o.only[secFSM] {
		runFSMSection(o, rep)
	}
	if o.only[secBackend] {
		// Last: it makes this process the child subreaper.
		runBackendSection(o, rep)
	}
	return rep
}

// runLoadSections interleaves raw, lancemaster and etcd load points (raw
// c=64, admission c=64, etcd Put and Txn c=64, raw c=256, ...) so that
// drift of the shared machine hits them alike. Every load point gets a
// fresh cluster.
func runLoadSections(o *options, rep *report) {
	etcdBin := ""
	if o.only[secEtcd] {
		var err error
		if etcdBin, err = etcdBinary(o); err != nil {
			rep.fail(secEtcd, err)
		}
	}
	for _, c := range o.conc {
		var adm *loadResult
		if o.only[secRaw] || o.only[secAdmission] {
			adm = runAdmissionPoint(o, rep, c)
		}
		if etcdBin != "" {
			runEtcdPoints(o, rep, etcdBin, c, adm)
		}
	}
}

// runAdmissionPoint runs raw Apply and, when selected, admission at c; it
// returns the admission result (nil when it did not run or failed).
func runAdmissionPoint(o *options, rep *report, c int) *loadResult {
	t := time.Now()
	var raw loadResult
	var rawErr error
	labelled("raw", c, func() { raw, rawErr = runRawApply(o, c) })
	rep.Sections[fmt.Sprintf("raw_c%d", c)] = time.Since(t).Seconds()
	if rawErr != nil {
		rep.fail(secRaw, fmt.Errorf("c=%d: %w", c, rawErr))
	} else {
		rep.Raw = append(rep.Raw, raw)
		rep.cur.Raw[c] = raw
		progress("raw c=%d: %.0f commits/s, p50 %.1f ms, p99 %.1f ms", c, raw.OpsPerS, raw.P50Ms, raw.P99Ms)
		rep.add(rawRows(raw)...)
	}
	if !o.only[secAdmission] {
		return nil
	}
	t = time.Now()
	var adm loadResult
	var err error
	labelled("admission", c, func() { adm, err = runAdmission(o, c) })
	rep.Sections[fmt.Sprintf("admission_c%d", c)] = time.Since(t).Seconds()
	if err != nil {
		rep.fail(secAdmission, fmt.Errorf("c=%d: %w", c, err))
		return nil
	}
	rep.Admit = append(rep.Admit, adm)
	rep.cur.Admit[c] = adm
	progress("admission c=%d: %.0f admissions/s, p50 %.1f ms, p99 %.1f ms, %d errors, %d elections",
		c, adm.OpsPerS, adm.P50Ms, adm.P99Ms, adm.Errors, adm.Elections)
	if adm.Errors > 0 || adm.Elections > 0 {
		for _, l := range adm.MasterLog {
			progress("  master log: %s", clip(l, 300))
		}
	}
	var base *loadResult
	if rawErr == nil {
		base = &raw
	}
	rep.add(admissionRows(adm, base)...)
	return &adm
}

func rawRows(r loadResult) []row {
	c := fmt.Sprintf(" c=%d", r.Conc)
	return []row{
		{Section: secRaw, Figure: "Apply commits/s" + c, Unit: "1/s", Raw: f64(r.OpsPerS),
			Note: fmt.Sprintf("1st/2nd half of window %.0f/%.0f per s; %s%s", r.FirstHalfPerS, r.SecondHalfPerS, gcNote(r), ioNote(r.ReadsPerOp, r.WritesPerOp))},
		{Section: secRaw, Figure: "Apply p50" + c, Unit: "ms", Raw: f64(r.P50Ms)},
		{Section: secRaw, Figure: "Apply p99" + c, Unit: "ms", Raw: f64(r.P99Ms)},
	}
}

func admissionRows(a loadResult, raw *loadResult) []row {
	c := fmt.Sprintf(" c=%d", a.Conc)
	rows := []row{
		{Section: secAdmission, Figure: "admissions/s" + c, Unit: "1/s", LM: f64(a.OpsPerS)},
		{Section: secAdmission, Figure: "admission p50" + c, Unit: "ms", LM: f64(a.P50Ms)},
		{Section: secAdmission, Figure: "admission p99" + c, Unit: "ms", LM: f64(a.P99Ms)},
	}
	if raw != nil {
		rows[0].Raw, rows[1].Raw, rows[2].Raw = f64(raw.OpsPerS), f64(raw.P50Ms), f64(raw.P99Ms)
	}
	for i := range rows {
		rows[i] = rows[i].withRatio()
	}
	rows[0] = rows[0].atLeastRatio(0.5)
	// Every admitted job stays unresolved (no dispatcher runs), so the state
	// grows through the window; the two halves show whether the rate holds.
	rows[0].Note = fmt.Sprintf("1st/2nd half of window %.0f/%.0f per s, %s jobs at end; %s%s",
		a.FirstHalfPerS, a.SecondHalfPerS, groupThousands(strconv.FormatInt(a.JobsAtEnd, 10)), gcNote(a), ioNote(a.ReadsPerOp, a.WritesPerOp))
	if a.Elections > 0 {
		rows[0].Note += fmt.Sprintf("; %d election(s) during the run", a.Elections)
	}
	if a.Errors > 0 {
		rows[0].Note += fmt.Sprintf("; %d failed requests, first: %s", a.Errors, clip(a.FirstErr, 120))
	}
	return rows
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// progress reports to stderr while the run goes on (stdout is the table or JSON).
func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[%s] "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// freshLogStore is the store every cluster of the run (the masters' and the
// raw baseline's, each in a new data dir) keeps its log in: raft_log_store
// auto gives a new data dir raft-wal.
func (o *options) freshLogStore() string {
	if o.logStore == "" || o.logStore == config.RaftLogStoreAuto {
		return config.RaftLogStoreWAL
	}
	return o.logStore
}
