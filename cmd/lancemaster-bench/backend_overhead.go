package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"time"

	"github.com/lancemaster/lancemaster/pkg/backend"
	"github.com/lancemaster/lancemaster/pkg/backend/frame"
	"github.com/lancemaster/lancemaster/pkg/backend/supervisor"
)

// overheadResult is part 1: the trivial worker through the supervisor and
// through a bare exec.Command, run for run alternately.
type overheadResult struct {
	Runs int          `json:"runs"`
	Sup  overheadSide `json:"supervisor"`
	Bare overheadSide `json:"bare_exec"`
	Cmd  []string     `json:"worker_argv"`
	raw  overheadSamps
}

// overheadSide summarizes one way of running the worker.
type overheadSide struct {
	// FirstByte: from the call (Run, or cmd.Start) to the worker's wall
	// clock just before it wrote the first byte of its result frame.
	FirstByte pctSummary `json:"call_to_first_frame_byte"`
	// Job: from the call until it returned with everything reaped (Run's
	// return: cgroup removed and proofs checked; the bare Wait's return).
	Job pctSummary `json:"whole_job"`
	// SpawnToExit: Outcome.Duration (supervisor only): spawn → leader exit.
	SpawnToExit *pctSummary `json:"spawn_to_exit,omitempty"`
}

type overheadSamps struct {
	supFirst, supJob, supExit, bareFirst, bareJob []time.Duration
}

type pctSummary struct {
	N      int     `json:"n"`
	P50Ms  float64 `json:"p50_ms"`
	P99Ms  float64 `json:"p99_ms"`
	MeanMs float64 `json:"mean_ms"`
	MinMs  float64 `json:"min_ms"`
	MaxMs  float64 `json:"max_ms"`
}

func summarize(ds []time.Duration) pctSummary {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	if len(s) == 0 {
		return pctSummary{}
	}
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	return pctSummary{N: len(s), P50Ms: pctMs(s, 0.50), P99Ms: pctMs(s, 0.99), MeanMs: ms(sum / time.Duration(len(s))),
		MinMs: ms(s[0]), MaxMs: ms(s[len(s)-1])}
}

func runOverhead(o *options, res *backendResult) (*overheadResult, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("this binary's path: %w", err)
	}
	env := append(backend.DefaultFileConfig().WorkerEnviron(os.Getenv("PATH")), trivialWorkerEnv+"=1")
	sup, err := supervisor.New(supervisor.Config{Command: []string{exe}, Env: env,
		Isolation: supervisor.IsolationBestEffort})
	if err != nil {
		return nil, err
	}
	res.Mode, res.Verified, res.Reason = sup.Mode(), sup.Verified(), sup.Reason()
	n := overheadRuns
	if o.quick {
		n = overheadRunsQuick
	}
	ov := &overheadResult{Runs: n, Cmd: []string{exe}}
	req := &frame.Request{Protocol: frame.Protocol, Mode: frame.ModeBuild, DatasetURI: "/bench/none.lance",
		JobID: 1, InvocationID: "bench-trivial", MutationType: "CREATE", IndexName: "i", ColumnName: "id",
		IndexType: "BTREE", PropertiesJSON: "{}", AdmittedDatasetVersion: 1, SchemaContractJSON: "{}"}
	var reqFrame bytes.Buffer
	if err := frame.Write(&reqFrame, req, frame.MaxRequestBytes); err != nil {
		return nil, err
	}

	supRun := func() (first, job, exit time.Duration, err error) {
		t0 := time.Now()
		out := sup.Run(context.Background(), req, t0.Add(overheadDeadline))
		job = time.Since(t0)
		if out.Result == nil {
			return 0, 0, 0, fmt.Errorf("no trusted result (%s, proof %s): %s", out.Failure, out.Proof, clip(string(out.Stderr), 200))
		}
		if out.Proof != supervisor.ProofChildReaped {
			return 0, 0, 0, fmt.Errorf("proof %s, want CHILD_REAPED", out.Proof)
		}
		first, err = stampSince(out.Result.Message, t0)
		return first, job, out.Duration, err
	}
	bareRun := func() (first, job time.Duration, err error) {
		ctx, cancel := context.WithTimeout(context.Background(), overheadDeadline)
		defer cancel()
		cmd := exec.CommandContext(ctx, exe)
		cmd.Env = env
		cmd.Stdin = bytes.NewReader(reqFrame.Bytes())
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		t0 := time.Now()
		err = cmd.Run()
		job = time.Since(t0)
		if err != nil {
			return 0, 0, fmt.Errorf("bare exec: %w: %s", err, clip(stderr.String(), 200))
		}
		var r frame.Result
		if err := frame.Read(&stdout, &r, frame.MaxResultBytes); err != nil {
			return 0, 0, fmt.Errorf("bare exec: %w", err)
		}
		first, err = stampSince(r.Message, t0)
		return first, job, err
	}

	for i := 0; i < overheadWarmups; i++ { // page cache, cgroup parent, first-run costs
		if _, _, _, err := supRun(); err != nil {
			return nil, fmt.Errorf("supervised warm-up: %w", err)
		}
		if _, _, err := bareRun(); err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
	}
	s := &ov.raw
	for i := 0; i < n; i++ {
		// Alternate which goes first, so drift of the machine hits both alike.
		for k := 0; k < 2; k++ {
			if (i+k)%2 == 0 {
				first, job, exit, err := supRun()
				if err != nil {
					return nil, fmt.Errorf("supervised run %d: %w", i, err)
				}
				s.supFirst, s.supJob, s.supExit = append(s.supFirst, first), append(s.supJob, job), append(s.supExit, exit)
			} else {
				first, job, err := bareRun()
				if err != nil {
					return nil, fmt.Errorf("bare run %d: %w", i, err)
				}
				s.bareFirst, s.bareJob = append(s.bareFirst, first), append(s.bareJob, job)
			}
		}
	}
	exit := summarize(s.supExit)
	ov.Sup = overheadSide{FirstByte: summarize(s.supFirst), Job: summarize(s.supJob), SpawnToExit: &exit}
	ov.Bare = overheadSide{FirstByte: summarize(s.bareFirst), Job: summarize(s.bareJob)}
	return ov, nil
}

// stampSince parses the worker's wall-clock stamp (Unix ns) and returns how
// long after t0 it was taken. Both clocks are this machine's CLOCK_REALTIME.
func stampSince(msg string, t0 time.Time) (time.Duration, error) {
	ns, err := strconv.ParseInt(msg, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("the worker's frame holds no time stamp: %q", clip(msg, 40))
	}
	d := time.Duration(ns - t0.UnixNano())
	if d < 0 {
		return 0, errors.New("the worker's time stamp precedes the call (clock stepped?)")
	}
	return d, nil
}

func overheadRows(ov *overheadResult) []row {
	note := func(sup, bare float64) string {
		return fmt.Sprintf("+%s ms per job", sig(sup-bare, 3))
	}
	w := fmt.Sprintf(", trivial worker, n=%d", ov.Runs)
	rows := []row{
		{Section: secBackend, Figure: "call → first frame byte p50" + w, Unit: "ms",
			LM: f64(ov.Sup.FirstByte.P50Ms), Raw: f64(ov.Bare.FirstByte.P50Ms),
			Note: "supervisor vs bare exec; " + note(ov.Sup.FirstByte.P50Ms, ov.Bare.FirstByte.P50Ms)},
		{Section: secBackend, Figure: "call → first frame byte p99" + w, Unit: "ms",
			LM: f64(ov.Sup.FirstByte.P99Ms), Raw: f64(ov.Bare.FirstByte.P99Ms)},
		{Section: secBackend, Figure: "whole job (all reaped) p50" + w, Unit: "ms",
			LM: f64(ov.Sup.Job.P50Ms), Raw: f64(ov.Bare.Job.P50Ms),
			Note: fmt.Sprintf("supervisor vs bare exec; %s; Outcome.Duration (spawn → exit) p50 %s ms",
				note(ov.Sup.Job.P50Ms, ov.Bare.Job.P50Ms), sig(ov.Sup.SpawnToExit.P50Ms, 3))},
		{Section: secBackend, Figure: "whole job (all reaped) p99" + w, Unit: "ms",
			LM: f64(ov.Sup.Job.P99Ms), Raw: f64(ov.Bare.Job.P99Ms)},
	}
	for i := range rows {
		rows[i] = rows[i].withRatio()
	}
	return rows
}
