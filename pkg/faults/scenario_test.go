package faults

import (
	"strings"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/pkg/options"
)

// A scripted schedule: jobs admitted while the dispatcher is paused are
// PENDING in an operator snapshot; they then run and finish; the snapshot is
// restored (the dispatcher stays paused) and the operator resumes the
// dispatcher without looking. Before restores were prepared against the
// journal they replace (raftfsm.PrepareRestore), every restored PENDING
// record was dispatched again with a fresh invocation and accepted a second
// time (at-most-once, 5 of 5 jobs). Now each keeps the record the journal
// had (COMMITTED), and nothing is dispatched again.
func TestScenarioRestoreNeverRerunsADispatchedJob(t *testing.T) {
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
