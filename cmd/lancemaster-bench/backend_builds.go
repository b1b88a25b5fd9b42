package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/lancemaster/lancemaster/pkg/backend/frame"
	"github.com/lancemaster/lancemaster/pkg/backend/supervisor"
	"github.com/lancemaster/lancemaster/pkg/job"
	clusteropt "github.com/lancemaster/lancemaster/pkg/options"
)

// demoBuild is one build of the sequence: the two deploy/local/demo.sh
// admits, then one of every other index type (on make-dataset.js --extra's
// columns), with the library's default parameters unless said.
type demoBuild struct {
	Index, Column, Type string
	Props               []job.Property
	// Step names the figure ("" = Type); Extra: one of the other types, run
	// in the first typeReps reps only.
	Step, What string
	Extra      bool
}

func (b demoBuild) step() string {
	if b.Step != "" {
		return b.Step
	}
	return b.Type
}

var demoBuilds = []demoBuild{
	{Index: "vec_ivfpq", Column: "vector", Type: job.IndexIVFPQ, Props: []job.Property{
		{Key: "metric", Value: "l2"}, {Key: "num_partitions", Value: "32"},
		{Key: "num_sub_vectors", Value: "16"}, {Key: "num_bits", Value: "4"}},
		What: " (l2, 32 partitions, 16 sub-vectors, 4 bits)"},
	{Index: "id_btree", Column: "id", Type: job.IndexBTree, What: " on id"},
	{Index: "vec_ivfflat", Column: "vector", Type: "IVF_FLAT", Props: []job.Property{{Key: "num_partitions", Value: "32"}},
		What: " (l2, 32 partitions)", Extra: true},
	{Index: "bits_hamming", Column: "bits", Type: "IVF_FLAT", Props: []job.Property{{Key: "metric", Value: "hamming"},
		{Key: "num_partitions", Value: "32"}}, Step: "IVF_FLAT hamming", What: " (hamming on uint8[8], 32 partitions)", Extra: true},
	{Index: "vec_ivfrq", Column: "vector", Type: "IVF_RQ", Props: []job.Property{{Key: "num_partitions", Value: "32"}},
		What: " (l2, 32 partitions, 1 bit)", Extra: true},
	{Index: "vec_hnswsq", Column: "vector", Type: "IVF_HNSW_SQ", Props: []job.Property{{Key: "num_partitions", Value: "32"}},
		What: " (l2, 32 partitions, m 20, ef_construction 300)", Extra: true},
	{Index: "vec_hnswpq", Column: "vector", Type: "IVF_HNSW_PQ", Props: []job.Property{{Key: "num_partitions", Value: "32"},
		{Key: "num_sub_vectors", Value: "16"}}, What: " (l2, 32 partitions, 16 sub-vectors, m 20, ef_construction 300)", Extra: true},
	{Index: "id_bitmap", Column: "id", Type: "BITMAP", What: " on id", Extra: true},
	{Index: "labels_ll", Column: "labels", Type: "LABEL_LIST", What: " on labels (list<utf8>)", Extra: true},
	{Index: "text_fts", Column: "text", Type: "FTS", What: " on text (simple tokenizer)", Extra: true},
	{Index: "text_fm", Column: "text", Type: "FM", What: " on text", Extra: true},
}

// buildsResult is part 3.
type buildsResult struct {
	Reps    int           `json:"reps"`
	Worker  []string      `json:"worker_argv"`
	Samples []buildSample `json:"samples"`
	Kinds   []buildKind   `json:"summary"`
}

// buildSample is one worker run: an inspect or a build, supervised or bare.
type buildSample struct {
	Rep        int     `json:"rep"`
	Step       string  `json:"step"` // inspect | IVF_PQ | BTREE
	Supervised bool    `json:"supervised"`
	WallMs     float64 `json:"wall_ms"` // the call until it returned, everything reaped
	// SpawnToExitMs is Outcome.Duration (supervised only).
	SpawnToExitMs float64 `json:"spawn_to_exit_ms,omitempty"`
	// PeakRSSBytes is the worker's VmHWM, sampled every hwmEvery. (Not
	// ru_maxrss: Linux folds the pre-exec address space's peak into it,
	// which for a child forked by this process is this process's peak.)
	PeakRSSBytes int64 `json:"peak_rss_bytes"`
	// AnonBytes and FileBytes are RssAnon and RssFile at the largest VmRSS
	// sample.
	AnonBytes int64 `json:"rss_anon_bytes"`
	FileBytes int64 `json:"rss_file_bytes"`
	// OutcomePeakBytes is Outcome.PeakMemoryBytes (supervised only): the
	// cgroup's peak usage, page cache included, or in process-group mode
	// the leader's ru_maxrss.
	OutcomePeakBytes int64  `json:"outcome_peak_memory_bytes,omitempty"`
	Result           string `json:"result"`
	NewVersion       int64  `json:"new_dataset_version,omitempty"`
}

// spread is a median [min–max] of repeated samples.
type spread struct {
	Values []float64 `json:"values"`
	Median float64   `json:"median"`
	Min    float64   `json:"min"`
	Max    float64   `json:"max"`
}

func newSpread(v []float64) spread {
	e := newEventResult(v)
	return spread{Values: v, Median: e.Median, Min: e.Min, Max: e.Max}
}

func (s spread) String(unit string) string {
	if len(s.Values) == 1 {
		return sig(s.Median, 3) + " " + unit
	}
	return fmt.Sprintf("%s %s [%s–%s]", sig(s.Median, 3), unit, sig(s.Min, 3), sig(s.Max, 3))
}

type buildKind struct {
	Name string    `json:"step"`
	Sup  buildSide `json:"supervisor"`
	Bare buildSide `json:"bare_node"`
}

type buildSide struct {
	WallMs      spread  `json:"wall_ms"`
	PeakMiB     spread  `json:"peak_rss_mib"`
	ExitMs      *spread `json:"spawn_to_exit_ms,omitempty"`
	AnonMiB     spread  `json:"rss_anon_mib"`
	FileMiB     spread  `json:"rss_file_mib"`
	OutcomeMiB  *spread `json:"outcome_peak_memory_mib,omitempty"`
	PeakMissing int     `json:"peak_not_sampled,omitempty"`
}

// stepRunner runs one worker for req: through the supervisor, or bare.
type stepRunner func(req *frame.Request) (*frame.Result, buildSample, error)

func runDemoBuilds(o *options, env *backendEnv, dir, pristineURI string) (*buildsResult, error) {
	sup, err := benchSupervisor(env)
	if err != nil {
		return nil, err
	}
	reps := buildReps
	if o.quick {
		reps = buildRepsQuick
	}
	res := &buildsResult{Reps: reps, Worker: []string{env.node, env.builder}}
	work := filepath.Join(dir, "demo", "items.lance")

	supRun := func(req *frame.Request) (*frame.Result, buildSample, error) {
		h := startHWMSampler(supervisedNode)
		t0 := time.Now()
		out := sup.Run(context.Background(), req, t0.Add(buildTimeout))
		wall := time.Since(t0)
		peak, anon, file := h.finish()
		s := buildSample{Supervised: true, WallMs: ms(wall), SpawnToExitMs: ms(out.Duration), PeakRSSBytes: peak,
			AnonBytes: anon, FileBytes: file, OutcomePeakBytes: out.PeakMemoryBytes}
		if out.Result == nil {
			return nil, s, fmt.Errorf("no trusted result (%s, proof %s); stderr: %s", out.Failure, out.Proof, clip(string(out.Stderr), 300))
		}
		return out.Result, s, nil
	}
	bareRun := func(req *frame.Request) (*frame.Result, buildSample, error) { return bareBuild(env, req) }

	for rep := 0; rep < reps; rep++ {
		// The same frames for both runs of a rep: same path, same ids, same
		// deadline; each run inspects its fresh copy of the dataset first.
		deadline := time.Now().Add(10 * time.Minute).UnixMilli()
		var frames [][]byte
		for k := 0; k < 2; k++ {
			supervised := (rep+k)%2 == 0
			run, who := bareRun, "bare"
			if supervised {
				run, who = supRun, "supervised"
			}
			if err := copyDataset(pristineURI, work); err != nil {
				return res, err
			}
			got, err := demoSequence(run, rep, work, deadline, res)
			if err != nil {
				return res, fmt.Errorf("%s, rep %d: %w", who, rep+1, err)
			}
			if frames == nil {
				frames = got
			} else {
				for i := range got {
					if !bytes.Equal(got[i], frames[i]) {
						return res, fmt.Errorf("rep %d: the supervised and bare runs built different frames (did the dataset differ?)", rep+1)
					}
				}
			}
		}
	}
	res.Kinds = summarizeBuilds(res.Samples)
	return res, nil
}

// demoSequence runs demo.sh's two builds on the dataset at uri, each
// preceded by an inspect (as the master admits: admitted version = the
// inspected version, schema contract from the inspected field), and returns
// the build frames it sent.
func demoSequence(run stepRunner, rep int, uri string, deadlineMs int64, res *buildsResult) ([][]byte, error) {
	opts := clusteropt.Resolve(nil)
	lim := job.Limits(opts.IndexLimits())
	var frames [][]byte
	for i, b := range demoBuilds {
		if b.Extra && rep >= typeReps {
			continue
		}
		ir, s, err := run(&frame.Request{Protocol: frame.Protocol, Mode: frame.ModeInspect, DatasetURI: uri})
		s.Rep, s.Step = rep+1, "inspect"
		if err != nil {
			return nil, fmt.Errorf("inspect: %w", err)
		}
		if !ir.OK {
			return nil, fmt.Errorf("inspect: %s: %s", ir.ErrorCode, ir.Message)
		}
		s.Result = "OK"
		res.Samples = append(res.Samples, s)
		snap := &job.Snapshot{Version: ir.DatasetVersion}
		for _, f := range ir.Fields {
			snap.Fields = append(snap.Fields, job.Field{ID: f.FieldID, Name: f.Name, Type: f.DataType, Nullable: f.Nullable,
				ListDimension: f.ListDimension, ElementType: f.ElementType, ElementNullable: f.ElementNullable})
		}
		req, err := demoBuildRequest(b, snap, uri, lim, int64(rep*10+i+1), deadlineMs)
		if err != nil {
			return nil, err
		}
		var fb bytes.Buffer
		if err := frame.Write(&fb, req, frame.MaxRequestBytes); err != nil {
			return nil, err
		}
		frames = append(frames, fb.Bytes())
		br, s, err := run(req)
		s.Rep, s.Step = rep+1, b.step()
		if err != nil {
			return nil, fmt.Errorf("%s build: %w", b.Type, err)
		}
		if br.ResultCode != "NATIVE_OK" {
			return nil, fmt.Errorf("%s build answered %s: %s", b.Type, br.ResultCode, br.Message)
		}
		s.Result, s.NewVersion = br.ResultCode, br.NewDatasetVersion
		res.Samples = append(res.Samples, s)
	}
	return frames, nil
}

// demoBuildRequest is the build frame the agent would send for b after the
// master admitted it against snap (pkg/admin's checks, in short).
func demoBuildRequest(b demoBuild, snap *job.Snapshot, uri string, lim job.Limits, jobID, deadlineMs int64) (*frame.Request, error) {
	f, err := snap.FindColumn(b.Column)
	if err != nil {
		return nil, err
	}
	props, err := job.CanonicalProperties(b.Type, b.Props, lim)
	if err != nil {
		return nil, err
	}
	contract, err := job.ColumnContract(f, b.Type, props)
	if err != nil {
		return nil, err
	}
	if snap.Version < 1 {
		return nil, errors.New("inspect answered no dataset version")
	}
	return &frame.Request{Protocol: frame.Protocol, Mode: frame.ModeBuild, DatasetURI: uri,
		JobID: jobID, InvocationID: "bench-" + strconv.FormatInt(jobID, 10), MutationType: "CREATE",
		IndexName: b.Index, ColumnName: b.Column, IndexType: b.Type, PropertiesJSON: props,
		AdmittedDatasetVersion: snap.Version, SchemaContractJSON: contract, DeadlineMs: deadlineMs}, nil
}

func summarizeBuilds(samples []buildSample) []buildKind {
	var kinds []buildKind
	steps := []string{}
	for _, b := range demoBuilds {
		steps = append(steps, b.step())
	}
	for _, step := range append(steps, "inspect") {
		k := buildKind{Name: step}
		for _, supervised := range []bool{true, false} {
			var wall, peak, anon, file, exit, outcome []float64
			missing := 0
			for _, s := range samples {
				if s.Step != step || s.Supervised != supervised {
					continue
				}
				wall = append(wall, s.WallMs)
				if s.PeakRSSBytes > 0 {
					peak = append(peak, mib(s.PeakRSSBytes))
					anon, file = append(anon, mib(s.AnonBytes)), append(file, mib(s.FileBytes))
				} else {
					missing++
				}
				exit = append(exit, s.SpawnToExitMs)
				outcome = append(outcome, mib(s.OutcomePeakBytes))
			}
			if len(wall) == 0 {
				continue
			}
			side := buildSide{WallMs: newSpread(wall), PeakMiB: newSpread(peak), AnonMiB: newSpread(anon),
				FileMiB: newSpread(file), PeakMissing: missing}
			if supervised {
				e, p := newSpread(exit), newSpread(outcome)
				side.ExitMs, side.OutcomeMiB = &e, &p
				k.Sup = side
			} else {
				k.Bare = side
			}
		}
		kinds = append(kinds, k)
	}
	return kinds
}

func buildRows(bs *buildsResult, mode string) []row {
	outcome := "Outcome.PeakMemoryBytes (the cgroup's peak, page cache included)"
	if mode == supervisor.ModeProcessGroup {
		outcome = "Outcome.PeakMemoryBytes (the leader's ru_maxrss, never below the spawning process's own peak RSS)"
	}
	var rows []row
	for _, k := range bs.Kinds {
		if len(k.Sup.WallMs.Values) == 0 || len(k.Bare.WallMs.Values) == 0 {
			continue
		}
		what := "demo " + k.Name + " build"
		for _, b := range demoBuilds {
			if b.step() == k.Name {
				what += b.What
			}
		}
		if k.Name == "inspect" {
			what = "demo inspect (before each build)"
		}
		n := fmt.Sprintf(", n=%d", len(k.Sup.WallMs.Values))
		wall := row{Section: secBackend, Figure: what + " wall" + n, Unit: "ms",
			LM: f64(k.Sup.WallMs.Median), Raw: f64(k.Bare.WallMs.Median),
			Note: fmt.Sprintf("supervisor vs bare node, median; %s vs %s; Outcome.Duration (spawn → exit) %s",
				k.Sup.WallMs.String("ms"), k.Bare.WallMs.String("ms"), k.Sup.ExitMs.String("ms"))}
		peak := row{Section: secBackend, Figure: what + " worker peak RSS", Unit: "MiB",
			Note: fmt.Sprintf("VmHWM sampled every %s, median; supervised %s vs bare %s; at the largest sample "+
				"%s MiB anonymous + %s MiB file-backed (node, the LanceDB library); %s %s",
				hwmEvery, k.Sup.PeakMiB.String("MiB"), k.Bare.PeakMiB.String("MiB"), sig(k.Sup.AnonMiB.Median, 3),
				sig(k.Sup.FileMiB.Median, 3), outcome, k.Sup.OutcomeMiB.String("MiB"))}
		if len(k.Sup.PeakMiB.Values) > 0 {
			peak.LM = f64(k.Sup.PeakMiB.Median)
		}
		if len(k.Bare.PeakMiB.Values) > 0 {
			peak.Raw = f64(k.Bare.PeakMiB.Median)
		}
		if k.Sup.PeakMissing+k.Bare.PeakMissing > 0 {
			peak.Note += fmt.Sprintf("; %d run(s) ended before a sample", k.Sup.PeakMissing+k.Bare.PeakMissing)
		}
		rows = append(rows, wall.withRatio())
		if k.Name != "inspect" {
			rows = append(rows, peak.withRatio())
		}
	}
	return append(rows, relativeToIVFPQ(bs)...)
}

// relativeToIVFPQ: each index type's supervised wall against IVF_PQ's, as
// a ratio of medians measured in the same reps.
func relativeToIVFPQ(bs *buildsResult) []row {
	var base float64
	for _, k := range bs.Kinds {
		if k.Name == job.IndexIVFPQ && len(k.Sup.WallMs.Values) > 0 {
			base = k.Sup.WallMs.Median
		}
	}
	if base == 0 {
		return nil
	}
	var rows []row
	for _, k := range bs.Kinds {
		if k.Name == "inspect" || k.Name == job.IndexIVFPQ || len(k.Sup.WallMs.Values) == 0 {
			continue
		}
		rows = append(rows, row{Section: secBackend, Figure: "demo " + k.Name + " build wall relative to IVF_PQ", Unit: "ms",
			LM: f64(k.Sup.WallMs.Median), Raw: f64(base),
			Note: "supervised medians; the 'raw' column is the IVF_PQ build of the same sequence"}.withRatio())
	}
	return rows
}

// bareBuild runs one frame through a bare `node builder.js` (the baseline
// of every supervised figure), sampling the child's peak RSS as the
// supervised runs are.
func bareBuild(env *backendEnv, req *frame.Request) (*frame.Result, buildSample, error) {
	var in bytes.Buffer
	if err := frame.Write(&in, req, frame.MaxRequestBytes); err != nil {
		return nil, buildSample{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, env.node, env.builder)
	cmd.Env = env.workEnv
	cmd.Stdin = &in
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// Its own process group only so that an interrupted run can end it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, buildSample{}, err
	}
	pid := cmd.Process.Pid
	childPgid.Store(int64(pid))
	h := startHWMSampler(func() int { return pid })
	err := cmd.Wait()
	wall := time.Since(t0)
	peak, anon, file := h.finish()
	childPgid.Store(0)
	s := buildSample{WallMs: ms(wall), PeakRSSBytes: peak, AnonBytes: anon, FileBytes: file}
	if err != nil {
		return nil, s, fmt.Errorf("node builder.js: %w; stderr: %s", err, tail(stderr.Bytes(), 5))
	}
	var r frame.Result
	if err := frame.Read(&stdout, &r, frame.MaxResultBytes); err != nil {
		return nil, s, fmt.Errorf("node builder.js: %w", err)
	}
	return &r, s, nil
}

// benchSupervisor is the supervisor every build figure runs the builder
// under: best-effort isolation with the backend's default limits.
func benchSupervisor(env *backendEnv) (*supervisor.Supervisor, error) {
	return supervisor.New(supervisor.Config{Command: []string{env.node, env.builder}, Env: env.workEnv,
		Isolation: supervisor.IsolationBestEffort, MemoryLimitBytes: supervisor.DefaultMemoryLimitBytes,
		PidsLimit: supervisor.DefaultPidsLimit})
}
