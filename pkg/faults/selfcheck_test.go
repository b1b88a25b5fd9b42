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

// A result counts as held by a backend's outbox until a master answered OK
// to its report; once a snapshot restore ran after that answer, nothing on
// the backend holds it (the process that ran it is gone, its successor on
// the same outbox dropped the report). Without a restore, or with a
// restore before the answer, the outbox still counts.
func TestHeldAtAfterATakenReportAndARestore(t *testing.T) {
	slot := &backendSlot{history: []incarnation{
		{epoch: 17, dir: 0, startMs: 0, endMs: 1000}, // ran the build, then crashed
		{epoch: 18, dir: 0, startMs: 2000},           // same outbox, still up
	}}
	e := &execution{w: &world{backends: []*backendSlot{slot}}}
	inv := invocation{backend: 0, epoch: 17, dir: 0, takenMs: 2500}
	decidedAt := &job.Record{UpdateTimeMs: 5000}
	if !e.heldAt(inv, decidedAt, decidedAt.UpdateTimeMs) {
		t.Fatal("no restore: the outbox's process counts as holding the result")
	}
	e.restores = []span{{startMs: 1500, endMs: 1600}}
	if !e.heldAt(inv, decidedAt, decidedAt.UpdateTimeMs) {
		t.Fatal("a restore before the OK answer rewinds nothing the answer journaled")
	}
	e.restores = append(e.restores, span{startMs: 3000, endMs: 3200})
	if e.heldAt(inv, decidedAt, decidedAt.UpdateTimeMs) {
		t.Fatal("the report was taken, then the journal rewound: no backend holds the result")
	}
	inv.takenMs = 0
	if !e.heldAt(inv, decidedAt, decidedAt.UpdateTimeMs) {
		t.Fatal("a report never taken stays in the outbox")
	}
	inv.epoch, inv.takenMs = 18, 2500
	if !e.heldAt(inv, decidedAt, decidedAt.UpdateTimeMs) {
		t.Fatal("the process that ran the build and is still up holds its result")
	}
	// ... until its Grace after the deadline has passed: then it forgets
	// the finished entry (FORGOTTEN proves nothing), and only the outbox,
	// rewound here, could have held the result.
	if e.heldAt(inv, &job.Record{DeadlineMs: 1000}, 1000+agentGrace.Milliseconds()+1) {
		t.Fatal("a process past its Grace still counted as holding the result")
	}
}

// A job is judged at the time it became UNKNOWN, not at its last
// transition: seeds 36064 and 36083 gave a job up while its backend was
// down, and recorded PROCESS_EPOCH_GONE once the backend's new process, its
// outbox holding the result, was heard.
func TestBecameUnknownIsReadOffTheTimeline(t *testing.T) {
	r := &job.Record{MutationState: job.Unknown, UpdateTimeMs: 9000, Timeline: job.EncodeTimeline([]job.Transition{
		{Kind: job.TransitionDispatched, TimeMs: 100}, {Kind: job.TransitionUnknown, TimeMs: 4000},
		{Kind: job.TransitionSlotReleased, TimeMs: 9000, Detail: "PROCESS_EPOCH_GONE"}})}
	if got := becameUnknownMs(r); got != 4000 {
		t.Fatalf("became UNKNOWN at %d, want 4000", got)
	}
	slot := &backendSlot{history: []incarnation{
		{epoch: 17, dir: 0, startMs: 0, endMs: 3000}, // ran the build, then crashed
		{epoch: 18, dir: 0, startMs: 5000},           // same outbox, back after the give-up
	}}
	e := &execution{w: &world{backends: []*backendSlot{slot}}}
	inv := invocation{backend: 0, epoch: 17, dir: 0}
	if e.heldAt(inv, r, becameUnknownMs(r)) {
		t.Fatal("the outbox's process was down when the job became UNKNOWN, yet counted as holding the result")
	}
	if !e.heldAt(inv, r, r.UpdateTimeMs) {
		t.Fatal("at the last transition the outbox's process is up: the case the old check got wrong")
	}
	if got := becameUnknownMs(&job.Record{UpdateTimeMs: 7}); got != 7 {
		t.Fatalf("a record without a timeline: %d, want its update time", got)
	}
}
