package main

import (
	"fmt"
	"time"
)

// runLifecycleSections runs the dispatch, reports, latency and failover
// sections that are selected, each right after the raw baseline it is
// compared with: the raw load points (c = 1 at 256 B and 16 KiB, c = 64)
// before the dispatch/reports cluster and the latency cluster, the raw
// failover and transfer repetitions before the lancemaster ones.
func runLifecycleSections(o *options, rep *report) {
	raw := &rawLifeResult{}
	rep.RawLife = raw
	wantDispatch, wantReports := o.only[secDispatch], o.only[secReports]
	if wantDispatch || wantReports || o.only[secLatency] {
		t := time.Now()
		err := runRawLifeLoad(o, raw, wantReports)
		rep.Sections["raw_lifecycle_load"] = time.Since(t).Seconds()
		if err != nil {
			rep.fail(secRaw, fmt.Errorf("lifecycle baselines: %w", err))
		}
		if raw.Seq != nil {
			progress("raw c=1: %.0f commits/s, p50 %.2f ms, p99 %.2f ms", raw.Seq.OpsPerS, raw.Seq.P50Ms, raw.Seq.P99Ms)
			rep.add(row{Section: secRaw, Figure: "Apply p50 c=1", Unit: "ms", Raw: f64(raw.Seq.P50Ms),
				Note: fmt.Sprintf("%.0f commits/s; p99 %s ms", raw.Seq.OpsPerS, sig(raw.Seq.P99Ms, 3))})
		}
		if raw.Packed != nil {
			progress("raw packed 64 x 256 B, c=1: %.0f entries/s = %.0f transitions/s", raw.Packed.OpsPerS, raw.PackedPerS)
			rep.add(row{Section: secRaw, Figure: "transitions/s, 64 × 256 B per entry, c=1", Unit: "1/s", Raw: f64(raw.PackedPerS),
				Note: fmt.Sprintf("%.0f entries/s of 16 KiB", raw.Packed.OpsPerS)})
		}
		if raw.Conc64 != nil {
			progress("raw c=%d (next to reports): %.0f commits/s, p50 %.1f ms, p99 %.1f ms",
				reportConc, raw.Conc64.OpsPerS, raw.Conc64.P50Ms, raw.Conc64.P99Ms)
			rep.add(row{Section: secRaw, Figure: fmt.Sprintf("Apply commits/s c=%d, next to reports", reportConc), Unit: "1/s",
				Raw: f64(raw.Conc64.OpsPerS), Note: fmt.Sprintf("p50 %s ms, p99 %s ms", sig(raw.Conc64.P50Ms, 3), sig(raw.Conc64.P99Ms, 3))})
		}
	}

	if wantDispatch || wantReports {
		t := time.Now()
		d, r, err := runDispatchReports(o, wantReports)
		rep.Sections["dispatch_reports"] = time.Since(t).Seconds()
		rep.Dispatch, rep.Reports = d, r
		if d != nil {
			progress("dispatch: %d jobs RUNNING in %.2f s (%.0f/s, %d entries); all submitted after %.2f s (%.0f/s)",
				d.Jobs, d.RunningS, d.RunningPerS, d.Entries, d.SubmittedS, d.SubmittedPerS)
			logMasters(d.MasterLog)
			if wantDispatch {
				rep.add(dispatchRows(d, raw)...)
			}
		}
		if r != nil {
			progress("reports: %d results in %.2f s (%.0f/s), p50 %.1f ms, p99 %.1f ms, %d retries; leader counters: %s",
				r.Jobs, r.ElapsedS, r.PerS, r.P50Ms, r.P99Ms, r.Retries, reportCountsNote(r.Counts))
			logMasters(r.MasterLog)
			if err == nil {
				rep.add(reportsRows(r, raw)...)
				rep.cur.ReportsS = f64(r.PerS)
			}
		}
		if err != nil {
			sec := secDispatch
			if d != nil || !wantDispatch {
				sec = secReports
			}
			rep.fail(sec, err)
		}
	}

	if o.only[secLatency] {
		t := time.Now()
		l, err := runLatency(o)
		rep.Sections["latency"] = time.Since(t).Seconds()
		if err != nil {
			rep.fail(secLatency, err)
		} else {
			rep.Latency = l
			progress("latency: admission → submit p50 %.1f ms, p99 %.1f ms (CreateIndex alone p50 %.1f ms)",
				l.E2EP50Ms, l.E2EP99Ms, l.AdmitP50Ms)
			logMasters(l.MasterLog)
			rep.add(latencyRows(l, raw)...)
		}
	}

	if o.only[secFailover] {
		t := time.Now()
		var errs []error
		var err1 error
		if raw.Failover, err1 = runRawFailover(o, o.reps, false); err1 != nil {
			errs = append(errs, fmt.Errorf("failover: %w", err1))
		}
		if raw.Transfer, err1 = runRawFailover(o, o.reps, true); err1 != nil {
			errs = append(errs, fmt.Errorf("transfer: %w", err1))
		}
		rep.Sections["raw_failover"] = time.Since(t).Seconds()
		for _, e := range errs {
			raw.Errors = append(raw.Errors, e.Error())
			rep.fail(secRaw, e)
		}
		if raw.Failover != nil {
			progress("raw leader killed → first commit (fast): %s", raw.Failover)
			rep.add(row{Section: secRaw, Figure: "leader killed → first commit, fast timeouts", Unit: "ms",
				Raw: f64(raw.Failover.Median), Note: "median " + raw.Failover.String()})
		}
		if raw.Transfer != nil {
			progress("raw LeadershipTransfer → first commit (fast): %s", raw.Transfer)
			rep.add(row{Section: secRaw, Figure: "LeadershipTransfer → first commit, fast timeouts", Unit: "ms",
				Raw: f64(raw.Transfer.Median), Note: "median " + raw.Transfer.String()})
		}
		t = time.Now()
		f, err := runFailover(o)
		rep.Sections["failover"] = time.Since(t).Seconds()
		rep.Failover = f
		if err != nil {
			if f != nil {
				logMasters(f.MasterLog)
			}
			rep.fail(secFailover, err)
		} else {
			progress("failover: kill → first dispatch %s; transfer → first dispatch %s", f.Kill, f.Transfer)
			rep.add(failoverRows(f, raw)...)
		}
	}
}

// logMasters prints the masters' captured warnings (nothing when quiet).
func logMasters(lines []string) {
	for _, l := range lines {
		progress("  master log: %s", clip(l, 300))
	}
}
