package main

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The fsm section runs pkg/raftfsm's benchmarks (bench_test.go) in `go test`
// subprocesses and sets each figure against its target and against the
// same-run gob baseline (runRawSnap): a query against a naive full scan of as
// many records, persist and restore against gob's, heap per job against the
// gob records' heap per record.
//
// Two runs, because -benchtime applies to a whole run: the queries (and one
// M1 apply) get many iterations, snapshot persist/restore one each. Each run
// builds the fixture once (a generated snapshot of LANCEMASTER_BENCH_JOBS
// retained terminal jobs plus 1,300 open ones, restored into an FSM).
const (
	fsmPkg          = "./pkg/raftfsm"
	fsmJobsEnv      = "LANCEMASTER_BENCH_JOBS"
	fsmQueryBench   = "PendingInIDOrder|RunningByDeadline|SlotHolders|RefreshDue|GCEligible|ApplyMarkRunning|APIJobsPage"
	fsmSnapBench    = "SnapshotPersist|SnapshotRestore"
	fsmQueryIters   = "1000x"
	fsmQueryItersQk = "100x"
	fsmTestTimeout  = 3 * time.Minute // go test -timeout: the test binary alone

	queryTargetMs    = 1.0
	snapshotTargetS  = 3.0
	heapTargetPerJob = 400.0
	// apiPageTargetMs: the HTTP API's jobs page of 100, server side, p99.
	apiPageTargetMs = 5.0
)

// queryNames are the dispatcher's queries; each must answer within 1 ms.
var queryNames = []string{"PendingInIDOrder", "RunningByDeadline", "SlotHolders", "RefreshDue", "GCEligible"}

func runFSMSection(o *options, rep *report) {
	t := time.Now()
	snap, err := runRawSnap(o, o.snapN)
	rep.Sections["raw_snapshot"] = time.Since(t).Seconds()
	var base *snapResult
	if err != nil {
		rep.fail(secRaw, fmt.Errorf("gob snapshot: %w", err))
	} else {
		base = &snap
		rep.RawSnap = base
		progress("raw gob snapshot of %d records: persist %.0f ms (fsync %.0f), restore %.0f ms, heap %.0f B/record, full scan %.0f ms",
			snap.Records, snap.PersistMs, snap.FsyncMs, snap.RestoreMs, snap.HeapPerRecord, snap.FullScanMs)
	}

	iters := fsmQueryIters
	if o.quick {
		iters = fsmQueryItersQk
	}
	env := []string{fsmJobsEnv + "=" + strconv.Itoa(o.snapN)}
	for _, run := range []struct{ name, pattern, benchtime string }{
		{"fsm_queries", fsmQueryBench, iters},
		{"fsm_snapshot", fsmSnapBench, "1x"},
	} {
		t = time.Now()
		progress("go test -bench '%s' -benchtime %s %s (%d retained jobs)", run.pattern, run.benchtime, fsmPkg, o.snapN)
		ctx, cancel := context.WithTimeout(context.Background(), fsmRunTimeout)
		lines, out, err := goTestBench(ctx, fsmPkg, run.pattern, run.benchtime, fsmTestTimeout, env)
		cancel()
		rep.Sections[run.name] = time.Since(t).Seconds()
		rep.FSM = append(rep.FSM, lines...)
		switch {
		case err != nil:
			rep.fail(secFSM, fmt.Errorf("%w\n%s", err, tail(out, 20)))
		case len(lines) == 0:
			rep.fail(secFSM, fmt.Errorf("no benchmark results from go test -bench '%s' %s:\n%s", run.pattern, fsmPkg, tail(out, 20)))
		}
		for _, bl := range lines {
			rep.add(fsmRows(bl, base)...)
		}
	}
}

// fsmRows turns one benchmark line into table rows. Known benchmarks get
// their target and baseline; any other figure is printed as information.
func fsmRows(bl benchLine, base *snapResult) []row {
	name := bl.Name
	if n, ok := bl.Metrics["jobs"]; ok {
		name += " (" + groupThousands(strconv.FormatFloat(n, 'f', 0, 64)) + " jobs)"
	}
	if strings.HasPrefix(bl.Name, "APIJobsPage") {
		return apiPageRows(bl)
	}
	var rows []row
	if nsop, ok := bl.Metrics["ns/op"]; ok {
		switch {
		case isQuery(bl.Name):
			r := row{Section: secFSM, Figure: name + " per query", Unit: "ms", LM: f64(nsop / 1e6)}
			if base != nil {
				r.Raw, r.Note = f64(base.FullScanMs), "raw: naive full scan"
			}
			rows = append(rows, r.withRatio().atMost(queryTargetMs, "ms"))
		case strings.HasPrefix(bl.Name, "SnapshotPersist"):
			r := row{Section: secFSM, Figure: name, Unit: "s", LM: f64(nsop / 1e9)}
			if base != nil {
				r.Raw, r.Note = f64(base.PersistMs/1000), "lancemaster to memory, raw gob to file + fsync"
			}
			rows = append(rows, r.withRatio().atMost(snapshotTargetS, "s"))
		case strings.HasPrefix(bl.Name, "SnapshotRestore"):
			r := row{Section: secFSM, Figure: name, Unit: "s", LM: f64(nsop / 1e9)}
			if base != nil {
				r.Raw, r.Note = f64(base.RestoreMs/1000), "lancemaster from memory, raw gob from file"
			}
			rows = append(rows, r.withRatio().atMost(snapshotTargetS, "s"))
		default:
			rows = append(rows, row{Section: secFSM, Figure: name, Unit: "ms", LM: f64(nsop / 1e6), Note: "no target"})
		}
	}
	units := make([]string, 0, len(bl.Metrics))
	for u := range bl.Metrics {
		units = append(units, u)
	}
	sort.Strings(units)
	for _, unit := range units {
		v := bl.Metrics[unit]
		switch {
		case unit == "ns/op" || unit == "B/op" || unit == "allocs/op" || unit == "MB/s" || unit == "jobs":
		case strings.HasSuffix(strings.ToLower(unit), "b/job"):
			r := row{Section: secFSM, Figure: bl.Name + " live heap per job", Unit: "B", LM: f64(v)}
			if base != nil {
				r.Raw, r.Note = f64(base.HeapPerRecord), "raw: map of ~200 B gob records"
			}
			rows = append(rows, r.withRatio().atMost(heapTargetPerJob, "B"))
		default:
			rows = append(rows, row{Section: secFSM, Figure: bl.Name, Unit: unit, LM: f64(v), Note: "no target"})
		}
	}
	return rows
}

func isQuery(name string) bool {
	for _, q := range queryNames {
		if strings.HasPrefix(name, q) {
			return true
		}
	}
	return false
}

// apiPageRows: the HTTP API's jobs page over the fixture (BenchmarkAPIJobsPage
// in pkg/raftfsm's external tests): p50 as information, p99 against 5 ms.
func apiPageRows(bl benchLine) []row {
	c := strings.TrimPrefix(strings.TrimPrefix(bl.Name, "APIJobsPage"), "/")
	return []row{
		{Section: secFSM, Figure: "HTTP API jobs page of 100, " + c + ", p50", Unit: "ms", LM: f64(bl.Metrics["p50-ms"]),
			Note: "server side, in process: /v1/jobs through the admin read to JSON"},
		row{Section: secFSM, Figure: "HTTP API jobs page of 100, " + c + ", p99", Unit: "ms", LM: f64(bl.Metrics["p99-ms"])}.atMost(apiPageTargetMs, "ms"),
	}
}
