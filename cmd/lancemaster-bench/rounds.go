package main

import (
	"fmt"
	"slices"
	"strings"
)

// Rounds (-rounds N): the peer targets judged over several rounds.
//
// On this shared machine one load point moves by a fifth from one minute to
// the next, and etcd's own rate by a quarter, so one run can meet a target
// that the next misses. -rounds repeats the sections that make the peer
// comparisons (raw, admission, etcd, then dispatch and reports) N times,
// round after round, each on fresh clusters. Every row of round k says so
// in its figure; at the end the section "targets" gives, for each peer
// target, the median of the per-round ratios (each round pairs lancemaster
// with the baseline measured next to it) and how many rounds met it.

// roundSections are the sections -rounds may repeat.
var roundSections = []string{secRaw, secAdmission, secEtcd, secDispatch, secReports}

const (
	maxRounds  = 20
	secTargets = "targets"
	// Issue targets of the peer comparison (docs/benchmarks.md, "Targets").
	admitVsEtcdTarget   = 1.5 // admissions/s ≥ 1.5 × etcd Txn/s at the same c
	p99VsEtcdTarget     = 1.2 // admission p99 ≤ 1.2 × etcd Txn p99 at the same c
	admitVsRawTarget    = 0.8 // admissions/s ≥ 0.8 × raw Apply at c = admitVsRawConc
	admitVsRawConc      = 256
	reportsVsEtcdTarget = 2.0 // reports applied/s ≥ 2 × etcd Txn/s at c = reportConc
)

// peerRound is what one round measured, by concurrency.
type peerRound struct {
	Round    int                `json:"round"`
	Raw      map[int]loadResult `json:"raw_apply,omitempty"`
	Admit    map[int]loadResult `json:"admission,omitempty"`
	Txn      map[int]loadResult `json:"etcd_txn,omitempty"`
	ReportsS *float64           `json:"reports_applied_per_s,omitempty"`
}

func newPeerRound(k int) *peerRound {
	return &peerRound{Round: k, Raw: map[int]loadResult{}, Admit: map[int]loadResult{}, Txn: map[int]loadResult{}}
}

// checkRounds refuses -rounds N > 1 with a section it does not repeat.
func checkRounds(o *options) error {
	if o.rounds < 1 || o.rounds > maxRounds {
		return fmt.Errorf("-rounds %d: want [1, %d]", o.rounds, maxRounds)
	}
	if o.rounds == 1 {
		return nil
	}
	for s := range o.only {
		if !contains(roundSections, s) {
			return fmt.Errorf("-rounds %d: repeats %s only, not %s (select them with -only)",
				o.rounds, strings.Join(roundSections, ", "), s)
		}
	}
	return nil
}

// runRounds runs the load and lifecycle sections o.rounds times, and after
// more than one the targets' medians.
func runRounds(o *options, rep *report) {
	load := o.only[secRaw] || o.only[secAdmission] || o.only[secEtcd]
	life := o.only[secDispatch] || o.only[secReports] || o.only[secLatency] || o.only[secFailover]
	if !load && !life {
		return
	}
	for k := 1; k <= o.rounds; k++ {
		rep.cur = newPeerRound(k)
		if o.rounds > 1 {
			rep.roundTag = fmt.Sprintf(" (round %d)", k)
			progress("round %d of %d", k, o.rounds)
		}
		if load {
			runLoadSections(o, rep)
		}
		if life {
			runLifecycleSections(o, rep)
		}
		if r, ok := reportsVsEtcdRow(rep.cur); ok {
			rep.add(r)
		}
		rep.Rounds = append(rep.Rounds, rep.cur)
	}
	rep.cur, rep.roundTag = nil, ""
	if o.rounds > 1 {
		rep.add(roundTargetRows(o.conc, rep.Rounds)...)
	}
}

// reportsVsEtcdRow is the reports target of one round: results applied per
// second at 64 clients against etcd's Txn at the same concurrency.
func reportsVsEtcdRow(pr *peerRound) (row, bool) {
	t := reportsVsEtcd()
	lm, base, ok := t.of(pr)
	if !ok {
		return row{}, false
	}
	r := row{Section: secEtcd, Figure: t.figure, Unit: t.unit, LM: f64(lm), Raw: f64(base)}.withRatio()
	return r.ratioTarget(t.op, t.target, t.base), true
}

// peerTarget is one target as each round measured it.
type peerTarget struct {
	figure, unit, op, base string
	target                 float64
	// of returns lancemaster's figure and the baseline's in one round.
	of func(pr *peerRound) (lm, base float64, ok bool)
}

func peerTargets(conc []int) []peerTarget {
	var ts []peerTarget
	for _, c := range conc {
		ts = append(ts,
			peerTarget{figure: fmt.Sprintf("admissions/s vs etcd Txn c=%d", c), unit: "1/s", op: ">=", base: "etcd",
				target: admitVsEtcdTarget, of: func(pr *peerRound) (float64, float64, bool) {
					a, ok1 := pr.Admit[c]
					t, ok2 := pr.Txn[c]
					return a.OpsPerS, t.OpsPerS, ok1 && ok2
				}},
			peerTarget{figure: fmt.Sprintf("admission p99 vs etcd Txn c=%d", c), unit: "ms", op: "<=", base: "etcd",
				target: p99VsEtcdTarget, of: func(pr *peerRound) (float64, float64, bool) {
					a, ok1 := pr.Admit[c]
					t, ok2 := pr.Txn[c]
					return a.P99Ms, t.P99Ms, ok1 && ok2
				}})
		if c == admitVsRawConc {
			ts = append(ts, peerTarget{figure: fmt.Sprintf("admissions/s vs raw Apply c=%d", c), unit: "1/s", op: ">=", base: "raw",
				target: admitVsRawTarget, of: func(pr *peerRound) (float64, float64, bool) {
					a, ok1 := pr.Admit[c]
					r, ok2 := pr.Raw[c]
					return a.OpsPerS, r.OpsPerS, ok1 && ok2
				}})
		}
	}
	return append(ts, reportsVsEtcd())
}

// reportsVsEtcd is the reports target: results applied per second (the
// reports section's 64 clients) against etcd's Txn at 64 clients.
func reportsVsEtcd() peerTarget {
	return peerTarget{figure: fmt.Sprintf("reports applied/s vs etcd Txn c=%d", reportConc), unit: "1/s",
		op: ">=", base: "etcd", target: reportsVsEtcdTarget, of: func(pr *peerRound) (float64, float64, bool) {
			t, ok := pr.Txn[reportConc]
			if !ok || pr.ReportsS == nil {
				return 0, 0, false
			}
			return *pr.ReportsS, t.OpsPerS, true
		}}
}

// roundTargetRows gives each target measured in at least two rounds: the
// medians of lancemaster's figure and of the baseline's, the median of the
// per-round ratios (the ratio column, which the target judges), and every
// round's ratio with how many met the target.
func roundTargetRows(conc []int, rounds []*peerRound) []row {
	var rows []row
	for _, t := range peerTargets(conc) {
		var lms, bases, ratios []float64
		met := 0
		for _, pr := range rounds {
			lm, base, ok := t.of(pr)
			if !ok || base == 0 {
				continue
			}
			q := lm / base
			lms, bases, ratios = append(lms, lm), append(bases, base), append(ratios, q)
			if (t.op == ">=" && q >= t.target) || (t.op == "<=" && q <= t.target) {
				met++
			}
		}
		if len(ratios) < 2 {
			continue
		}
		each := make([]string, len(ratios))
		for i, q := range ratios {
			each[i] = ratio(&q)
		}
		r := row{Section: secTargets, Figure: fmt.Sprintf("%s, median of %d rounds", t.figure, len(ratios)), Unit: t.unit,
			LM: f64(median(lms)), Raw: f64(median(bases)), Ratio: f64(median(ratios))}
		r = r.ratioTarget(t.op, t.target, t.base)
		r.Note = fmt.Sprintf("rounds: %s; met in %d of %d", strings.Join(each, " "), met, len(ratios))
		rows = append(rows, r)
	}
	return rows
}

// median of xs (not empty); the mean of the middle two for an even count.
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
