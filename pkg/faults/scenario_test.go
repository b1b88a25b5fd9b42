package faults

import (
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/pkg/options"
)

var flagScenarios = flag.Bool("faults.scenarios", false, "also run the scripted scenarios (known violations, docs/faults.md)")

// A scripted schedule: jobs admitted while the dispatcher is paused are
// PENDING in an operator snapshot; they then run and finish; the snapshot is
// restored (the dispatcher stays paused) and the operator resumes the
// dispatcher without looking. The restored PENDING records are dispatched
// again with fresh invocations, and every job is accepted (and built) a
// second time: the at-most-once invariant fails by design today
// (docs/operations.md leaves it to the operator to look before resuming).
// Run with -faults.scenarios; it is not part of make test while it fails.
func TestScenarioRestoreRerunsPendingJobs(t *testing.T) {
	if !*flagScenarios {
		t.Skip("scripted scenarios run with -faults.scenarios")
	}
	w := newWorld(t, 99, *flagVerbose)
	w.setup()
	defer w.teardown()
	e := newExecution(w, nil)
	l := w.awaitLeader(10 * time.Second)
	if err := w.setOption(l, options.OptDispatcherPaused, "true"); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		e.admitOne(l)
	}
	e.do(0, step{kind: stepSnapshotSave, b: l})
	if e.snapshot == nil {
		t.Fatal("no snapshot saved")
	}
	if err := w.setOption(l, options.OptDispatcherPaused, "false"); err != nil {
		t.Fatal(err)
	}
	e.settle(10*time.Second, 1500*time.Millisecond)
	e.do(1, step{kind: stepSnapshotRestor, b: w.awaitLeader(10 * time.Second)})
	e.resumeDispatcher()
	e.heal()
	e.converge()
	if vs := e.check(); len(vs) > 0 {
		var b strings.Builder
		for _, v := range vs {
			b.WriteString("  VIOLATION " + v.String() + "\n")
		}
		w.mu.Lock()
		for _, s := range w.log {
			b.WriteString("  " + s + "\n")
		}
		w.mu.Unlock()
		t.Errorf("%d violation(s):\n%s%s", len(vs), b.String(), e.summary())
	}
}
