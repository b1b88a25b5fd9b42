package main

import (
	"fmt"
	"runtime/metrics"
)

// The GC's share of a load point. The three masters, the clients and the
// raw baseline's nodes share one process and heap, and the admission's p99
// is set by the GC's mark phases (docs/benchmarks.md, "Why the admission's
// p99 is above etcd's"): each run says how many cycles its window saw and
// what part of the process's CPU they took.

var gcSamples = []metrics.Sample{
	{Name: "/gc/cycles/total:gc-cycles"},
	{Name: "/cpu/classes/gc/total:cpu-seconds"},
	{Name: "/cpu/classes/total:cpu-seconds"},
}

// gcMark is the process's GC counters at one moment.
type gcMark struct {
	cycles        uint64
	gcCPU, allCPU float64
}

func readGC() gcMark {
	s := make([]metrics.Sample, len(gcSamples))
	copy(s, gcSamples)
	metrics.Read(s)
	m := gcMark{}
	if s[0].Value.Kind() == metrics.KindUint64 {
		m.cycles = s[0].Value.Uint64()
	}
	if s[1].Value.Kind() == metrics.KindFloat64 && s[2].Value.Kind() == metrics.KindFloat64 {
		m.gcCPU, m.allCPU = s[1].Value.Float64(), s[2].Value.Float64()
	}
	return m
}

// gcSince is the GC cycles since from and their share of the process's
// CPU. The CPU counters advance at the end of each cycle, so the share is
// that of the cycles that ended in the window: close with many cycles,
// rough with one or two.
func gcSince(from gcMark) (cycles int, share float64) {
	to := readGC()
	if d := to.allCPU - from.allCPU; d > 0 {
		share = (to.gcCPU - from.gcCPU) / d
	}
	return int(to.cycles - from.cycles), share
}

// gcNote is the rows' note on r's GC figures.
func gcNote(r loadResult) string {
	return fmt.Sprintf("GC: %d cycles, %.0f%% of the process's CPU", r.GCCycles, 100*r.GCCPUShare)
}
