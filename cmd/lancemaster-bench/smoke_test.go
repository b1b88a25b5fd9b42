package main

import (
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/pkg/console/consoletest"
)

// Every load and lifecycle section runs at its smallest: a change that
// breaks a section (it cannot run, or it measures nothing) fails make test
// rather than the next bench run. Nothing here is timed: the figures of so
// short a run mean nothing, only that each section completes. (The fsm and
// backend sections run go test benchmarks and real builds: make bench.)
func TestSectionsRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts several three-master clusters")
	}
	o := &options{
		dur: 300 * time.Millisecond, warm: 100 * time.Millisecond, quick: true, tmp: t.TempDir(),
		only: map[string]bool{secRaw: true, secAdmission: true, secDispatch: true, secReports: true,
			secLatency: true, secFailover: true, secSustained: true},
		conc: []int{4}, lifeJobs: 100, latN: 3, reps: 1, snapN: quickSnapN, rounds: 1,
	}
	sections := []string{secRaw, secAdmission, secDispatch, secReports, secLatency, secFailover, secSustained}
	// The console section needs chromium: with CI set (which installs it)
	// always, else when this machine has it.
	if consoletest.Find() != "" || os.Getenv("CI") != "" {
		o.only[secConsole] = true
		sections = append(sections, secConsole)
	}
	rep := run(o)
	if len(rep.Errors) > 0 {
		t.Fatalf("sections failed:\n%s", strings.Join(rep.Errors, "\n"))
	}
	for _, sec := range sections {
		n := 0
		for _, r := range rep.Rows {
			if r.Section == sec && (r.LM != nil || r.Raw != nil) {
				n++
			}
		}
		if n == 0 {
			t.Errorf("section %s reported no figure", sec)
		}
	}
}

// The GC figures of a window count the cycles that ran in it and give
// their share of the process's CPU (0 without a cycle).
func TestGCSinceCountsTheWindowsCycles(t *testing.T) {
	from := readGC()
	if n, share := gcSince(from); n != 0 || share != 0 {
		t.Fatalf("no cycle yet: %d cycles, share %v", n, share)
	}
	runtime.GC()
	runtime.GC()
	n, share := gcSince(from)
	if n != 2 || share <= 0 || share > 1 {
		t.Fatalf("after two forced cycles: %d cycles, share %v", n, share)
	}
	if note := gcNote(loadResult{GCCycles: 2, GCCPUShare: 0.184}); note != "GC: 2 cycles, 18% of the process's CPU" {
		t.Fatalf("note %q", note)
	}
}
