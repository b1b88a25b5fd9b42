package main

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
)

// The profiles of a run (-cpuprofile, -cpuprofile-reports, -memprofile):
// where to look for a bottleneck, never a figure of the report.

// checkProfiles refuses -cpuprofile-reports without the reports section, or
// with -cpuprofile: Go writes one CPU profile at a time.
func checkProfiles(o *options) error {
	if o.reportsProf == "" {
		return nil
	}
	if o.cpuprof != "" {
		return fmt.Errorf("-cpuprofile-reports: not with -cpuprofile (one CPU profile at a time)")
	}
	if !o.only[secReports] {
		return fmt.Errorf("-cpuprofile-reports: the reports section is not selected (-only)")
	}
	return nil
}

// labelled runs a load point under the pprof label point=<section>_c<c>.
// Goroutines inherit their creator's labels, so the cluster's own (raft,
// FSM, servers) carry it too: `go tool pprof -tagfocus point=admission_c256`
// shows one load point of a -cpuprofile run.
func labelled(section string, c int, f func()) {
	pprof.Do(context.Background(), pprof.Labels("point", fmt.Sprintf("%s_c%d", section, c)), func(context.Context) { f() })
}

// writeAllocsProfile writes the allocations of the whole run (every byte
// allocated since the start, by call site: `go tool pprof -sample_index=alloc_space`).
func writeAllocsProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// startCPUProfile starts a CPU profile into path; the returned func stops it
// and closes the file.
func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
