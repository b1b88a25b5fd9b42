package faults

import (
	"testing"

	"github.com/lancemaster/lancemaster/pkg/job"
)

// The checks can fail: after a short undisturbed schedule, the harness's
// own records are tampered with (a second accepted invocation, an
// acknowledged admission the cluster never saw, a COMMITTED job whose
// worker answered otherwise) and each must be reported under its name.
func TestChecksCanFail(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	w := newWorld(t, 7, *flagVerbose)
	w.setup()
	defer w.teardown()
	e := newExecution(w, []step{{kind: stepAdmit, a: 4, b: 0}, {kind: stepReleaseHeld}})
	e.run()
	e.heal()
	e.converge()
	if vs := e.check(); len(vs) != 0 {
		t.Fatalf("an undisturbed schedule has violations: %v", vs)
	}
	var committed *job.Record
	forJobs(w.master(w.leader()).FSM().State(), func(r *job.Record) {
		if committed == nil && r.MutationState == job.Committed {
			committed = r
		}
	})
	if committed == nil {
		t.Fatal("no COMMITTED job to tamper with")
	}
	now := w.clock.nowMs()
	w.ledger.runStarted(1, 42, 0, "tampered-second-invocation", committed.DisplayIndexName, committed.JobID, now)
	w.ledger.runEnded(committed.InvocationID, now, "NATIVE_IO", "CHILD_REAPED", false)
	e.admissions = append(e.admissions, &admission{name: "ghost", jobID: 99999, acked: true})
	got := map[string]bool{}
	for _, v := range e.check() {
		got[v.invariant] = true
		t.Logf("reported: %s", v)
	}
	for _, want := range []string{invAtMostOnce, invAdmissions, invCommitted} {
		if !got[want] {
			t.Errorf("tampering was not reported as %s", want)
		}
	}
}
