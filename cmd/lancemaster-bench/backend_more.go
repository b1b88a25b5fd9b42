package main

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/lancemaster/lancemaster/pkg/backend/frame"
	"github.com/lancemaster/lancemaster/pkg/job"
	clusteropt "github.com/lancemaster/lancemaster/pkg/options"
	"github.com/lancemaster/lancemaster/pkg/s3test"
)

// The index work beyond demo.sh's builds (part 3b): the same IVF_PQ and
// BTREE builds on an S3 fake (gofakes3 in process, over loopback) against
// local files, and an OPTIMIZE after 3 appends of 2,000 rows, supervised
// and bare.

const (
	moreReps       = 3
	moreRepsQuick  = 1
	appendRows     = 2000
	appendsPerRep  = 3
	s3BenchPrefix  = "bench"
	s3BenchSecret  = "bench-secret"
	optimizeStep   = "OPTIMIZE"
	s3StepSuffix   = " on S3"
	localStepLabel = " local"
)

type moreResult struct {
	Samples []buildSample `json:"samples"`
}

func runMoreBuilds(o *options, env *backendEnv, dir, pristineURI string) (*moreResult, error) {
	sup, err := benchSupervisor(env)
	if err != nil {
		return nil, err
	}
	reps := moreReps
	if o.quick {
		reps = moreRepsQuick
	}
	run := func(req *frame.Request) (*frame.Result, buildSample, error) {
		t0 := time.Now()
		out := sup.Run(context.Background(), req, t0.Add(buildTimeout))
		s := buildSample{Supervised: true, WallMs: ms(time.Since(t0)), SpawnToExitMs: ms(out.Duration), OutcomePeakBytes: out.PeakMemoryBytes}
		if out.Result == nil {
			return nil, s, fmt.Errorf("no trusted result (%s); stderr: %s", out.Failure, clip(string(out.Stderr), 300))
		}
		return out.Result, s, nil
	}
	res := &moreResult{}
	store, err := s3test.New()
	if err != nil {
		return nil, err
	}
	defer store.Close()
	opts := store.StorageOptions(s3BenchSecret)
	lim := job.Limits(clusteropt.Resolve(nil).IndexLimits())
	deadline := time.Now().Add(time.Hour).UnixMilli()
	for rep := 0; rep < reps; rep++ {
		// S3 vs local: the demo's two builds, alternating which goes first.
		local := filepath.Join(dir, "more", "local", "items.lance")
		if err := copyDataset(pristineURI, local); err != nil {
			return res, err
		}
		prefix := s3BenchPrefix + strconv.Itoa(rep)
		if _, err := store.UploadDir(pristineURI, prefix+"/items.lance"); err != nil {
			return res, err
		}
		remote := store.Root(prefix) + "/items.lance"
		for k := 0; k < 2; k++ {
			uri, label, so := local, localStepLabel, map[string]string(nil)
			if (rep+k)%2 == 1 {
				uri, label, so = remote, s3StepSuffix, opts
			}
			for i, b := range demoBuilds {
				if b.Extra {
					continue
				}
				req, err := inspectAndRequest(run, uri, so, b, lim, int64(5000+rep*100+k*10+i), deadline)
				if err != nil {
					return res, fmt.Errorf("%s%s: %w", b.Type, label, err)
				}
				br, s, err := run(req)
				if err != nil || br.ResultCode != "NATIVE_OK" {
					return res, fmt.Errorf("%s%s build: %v %s", b.Type, label, err, resultLine(br))
				}
				s.Rep, s.Step, s.Result = rep+1, b.Type+label, br.ResultCode
				res.Samples = append(res.Samples, s)
			}
		}
		// OPTIMIZE after 3 appends, on two identical copies: one supervised, one bare.
		base := filepath.Join(dir, "more", "optimize", "items.lance")
		if err := copyDataset(pristineURI, base); err != nil {
			return res, err
		}
		for i, b := range demoBuilds[:2] {
			req, err := inspectAndRequest(run, base, nil, b, lim, int64(7000+rep*10+i), deadline)
			if err != nil {
				return res, err
			}
			if br, _, err := run(req); err != nil || br.ResultCode != "NATIVE_OK" {
				return res, fmt.Errorf("%s before OPTIMIZE: %v %s", b.Type, err, resultLine(br))
			}
		}
		for a := 0; a < appendsPerRep; a++ {
			if err := appendToDataset(env, base, appendRows); err != nil {
				return res, err
			}
		}
		other := filepath.Join(dir, "more", "optimize-bare", "items.lance")
		if err := copyDataset(base, other); err != nil {
			return res, err
		}
		for _, supervised := range []bool{true, false} {
			uri := base
			if !supervised {
				uri = other
			}
			ir, _, err := run(&frame.Request{Protocol: frame.Protocol, Mode: frame.ModeInspect, DatasetURI: uri})
			if err != nil || !ir.OK {
				return res, fmt.Errorf("inspect before OPTIMIZE: %v", err)
			}
			req := &frame.Request{Protocol: frame.Protocol, Mode: frame.ModeBuild, DatasetURI: uri, JobID: int64(8000 + rep),
				InvocationID: "bench-optimize-" + strconv.Itoa(rep), MutationType: "OPTIMIZE",
				AdmittedDatasetVersion: ir.DatasetVersion, DeadlineMs: deadline}
			var br *frame.Result
			var s buildSample
			if supervised {
				br, s, err = run(req)
			} else {
				br, s, err = bareBuild(env, req)
			}
			if err != nil || br.ResultCode != "NATIVE_OK" {
				return res, fmt.Errorf("OPTIMIZE: %v %s", err, resultLine(br))
			}
			s.Rep, s.Step, s.Supervised, s.Result = rep+1, optimizeStep, supervised, br.ResultCode
			res.Samples = append(res.Samples, s)
		}
	}
	return res, nil
}

func resultLine(r *frame.Result) string {
	if r == nil {
		return ""
	}
	return r.ResultCode + ": " + clip(r.Message, 200)
}

// inspectAndRequest inspects uri and builds b's CREATE frame against it.
func inspectAndRequest(run stepRunner, uri string, so map[string]string, b demoBuild, lim job.Limits, jobID, deadlineMs int64) (*frame.Request, error) {
	ir, _, err := run(&frame.Request{Protocol: frame.Protocol, Mode: frame.ModeInspect, DatasetURI: uri, StorageOptions: so})
	if err != nil {
		return nil, fmt.Errorf("inspect: %w", err)
	}
	if !ir.OK {
		return nil, fmt.Errorf("inspect: %s: %s", ir.ErrorCode, ir.Message)
	}
	snap := &job.Snapshot{Version: ir.DatasetVersion}
	for _, f := range ir.Fields {
		snap.Fields = append(snap.Fields, job.Field{ID: f.FieldID, Name: f.Name, Type: f.DataType, Nullable: f.Nullable,
			ListDimension: f.ListDimension, ElementType: f.ElementType, ElementNullable: f.ElementNullable})
	}
	req, err := demoBuildRequest(b, snap, uri, lim, jobID, deadlineMs)
	if err != nil {
		return nil, err
	}
	req.StorageOptions = so
	return req, nil
}

// appendToDataset adds n rows with make-dataset.js --append.
func appendToDataset(env *backendEnv, uri string, n int) error {
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	script := filepath.Join(filepath.Dir(env.builder), "make-dataset.js")
	name := filepath.Base(uri)
	cmd := exec.CommandContext(ctx, env.node, script, filepath.Dir(uri), name[:len(name)-len(".lance")], "--append", "--rows", strconv.Itoa(n))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("make-dataset --append: %w: %s", err, tail(stderr.Bytes(), 5))
	}
	return nil
}

func moreRows(m *moreResult) []row {
	wall := func(step string, supervised bool) []float64 {
		var v []float64
		for _, s := range m.Samples {
			if s.Step == step && s.Supervised == supervised {
				v = append(v, s.WallMs)
			}
		}
		return v
	}
	var rows []row
	for _, t := range []string{job.IndexIVFPQ, job.IndexBTree} {
		s3, local := wall(t+s3StepSuffix, true), wall(t+localStepLabel, true)
		if len(s3) == 0 || len(local) == 0 {
			continue
		}
		a, b := newSpread(s3), newSpread(local)
		rows = append(rows, row{Section: secBackend, Figure: fmt.Sprintf("demo %s build on the S3 fake vs local files, n=%d", t, len(s3)),
			Unit: "ms", LM: f64(a.Median), Raw: f64(b.Median),
			Note: fmt.Sprintf("supervised, median; gofakes3 in process over loopback %s vs local %s", a.String("ms"), b.String("ms"))}.withRatio())
	}
	sup, bare := wall(optimizeStep, true), wall(optimizeStep, false)
	if len(sup) > 0 && len(bare) > 0 {
		a, b := newSpread(sup), newSpread(bare)
		rows = append(rows, row{Section: secBackend,
			Figure: fmt.Sprintf("OPTIMIZE after %d appends of %d rows (IVF_PQ + BTREE), n=%d", appendsPerRep, appendRows, len(sup)),
			Unit:   "ms", LM: f64(a.Median), Raw: f64(b.Median),
			Note: fmt.Sprintf("supervisor vs bare node, median; %s vs %s; compaction, then both indexes brought up to date, no prune", a.String("ms"), b.String("ms"))}.withRatio())
	}
	return rows
}
