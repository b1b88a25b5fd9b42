package main

import (
	"math"
	"strings"
	"testing"
)

// Each peer target is judged on the median of its per-round ratios (each
// round pairs lancemaster with the baseline measured next to it), not on
// the ratio of the medians; a target measured in one round only gets no
// median row.
func TestRoundTargetsTakeTheMedianOfEachRoundsRatio(t *testing.T) {
	round := func(k int, admit, txn, p99, txnP99, raw float64, reports *float64) *peerRound {
		pr := newPeerRound(k)
		pr.Admit[64] = loadResult{OpsPerS: admit, P99Ms: p99}
		pr.Txn[64] = loadResult{OpsPerS: txn, P99Ms: txnP99}
		pr.Raw[256] = loadResult{OpsPerS: raw} // no admission at 256: no row
		pr.ReportsS = reports
		return pr
	}
	rounds := []*peerRound{
		round(1, 4000, 4000, 40, 40, 20000, f64(9000)), // 1.0x, p99 1.0x, reports 2.25x
		round(2, 6000, 3000, 60, 40, 20000, f64(5000)), // 2.0x, p99 1.5x, reports 1.67x
		round(3, 5000, 3125, 30, 40, 20000, nil),       // 1.6x, p99 0.75x, no reports
	}
	rows := roundTargetRows([]int{64, 256}, rounds)
	byFigure := map[string]row{}
	for _, r := range rows {
		if r.Section != secTargets {
			t.Fatalf("row %q in section %q", r.Figure, r.Section)
		}
		byFigure[r.Figure] = r
	}
	if len(rows) != 3 {
		t.Fatalf("want admissions, p99 and reports rows, got %d: %v", len(rows), rows)
	}
	admit := byFigure["admissions/s vs etcd Txn c=64, median of 3 rounds"]
	if admit.Ratio == nil || *admit.Ratio != 1.6 || *admit.LM != 5000 || *admit.Raw != 3125 {
		t.Fatalf("admissions row %+v: want ratio 1.6 (the median round), medians 5000 and 3125", admit)
	}
	if admit.Met == nil || !*admit.Met || !strings.Contains(admit.Note, "met in 2 of 3") ||
		!strings.Contains(admit.Note, "1.0x 2.0x 1.6x") {
		t.Fatalf("admissions row %+v", admit)
	}
	p99 := byFigure["admission p99 vs etcd Txn c=64, median of 3 rounds"]
	if p99.Ratio == nil || *p99.Ratio != 1.0 || p99.Met == nil || !*p99.Met || !strings.Contains(p99.Note, "met in 2 of 3") {
		t.Fatalf("p99 row %+v: want the median 1.0x, met (<= 1.2) in 2 of 3", p99)
	}
	rep := byFigure["reports applied/s vs etcd Txn c=64, median of 2 rounds"]
	if want := (2.25 + 5000.0/3000) / 2; rep.Ratio == nil || math.Abs(*rep.Ratio-want) > 1e-9 || rep.Met == nil || *rep.Met ||
		!strings.Contains(rep.Note, "met in 1 of 2") {
		t.Fatalf("reports row %+v: want the mean of the two rounds' ratios, missed, met in 1 of 2", rep)
	}
}

func TestRoundsRepeatOnlyThePeerSections(t *testing.T) {
	for _, tc := range []struct {
		rounds int
		only   []string
		ok     bool
	}{
		{1, []string{secFSM, secBackend}, true},
		{5, []string{secAdmission, secEtcd, secReports}, true},
		{5, []string{secAdmission, secLatency}, false},
		{0, []string{secAdmission}, false},
		{maxRounds + 1, []string{secAdmission}, false},
	} {
		o := &options{rounds: tc.rounds, only: map[string]bool{}}
		for _, s := range tc.only {
			o.only[s] = true
		}
		if err := checkRounds(o); (err == nil) != tc.ok {
			t.Errorf("-rounds %d -only %v: error %v, want ok=%v", tc.rounds, tc.only, err, tc.ok)
		}
	}
}
