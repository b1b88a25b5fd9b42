package raftfsm

import (
	"bytes"
	"testing"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
)

func (h *harness) drain(id int64, drained bool, actor string) *journal.TApplyResponse {
	h.t.Helper()
	c := &journal.TDrainBackendCommand{NowMs: h.now, BackendID: id, Drained: drained}
	if actor != "" {
		c.Actor = &actor
	}
	return h.apply(CmdDrainBackend, c)
}

// Drain and undrain go through Apply, survive a snapshot and a restore,
// and leave the jobs and slots alone; a repeat is NOOP and changes nothing.
func TestDrainBackendThroughApply(t *testing.T) {
	h, id, be := pendingFixture(t)
	r := h.run(id, be) // a running job holds a slot there
	before := snapshotBytes(t, h.st())
	wantCode(t, h.drain(be, true, "alice"), journal.TApplyCode_OK)
	b, _ := h.st().Backend(be)
	if !b.Drained || b.DrainActor != "alice" || b.DrainTimeMs != h.now {
		t.Fatalf("after drain: %+v", b)
	}
	if h.st().HeldSlots(be) != 1 || h.job(id).MutationState != r.MutationState {
		t.Fatalf("drain touched the running job or its slot")
	}
	if bytes.Equal(before, snapshotBytes(t, h.st())) {
		t.Fatal("the snapshot does not carry the drain")
	}

	drained := h.st()
	wantCode(t, h.drain(be, true, "bob"), journal.TApplyCode_NOOP)
	h.unchanged(drained)

	// A snapshot keeps it: the restored replica is drained too.
	f := restored(t, snapshotBytes(t, h.st()))
	if rb, ok := f.State().Backend(be); !ok || !rb.Drained || rb.DrainActor != "alice" {
		t.Fatalf("restored backend: %+v", rb)
	}
	sameView(t, h.st(), f.State())

	h.now += 1000
	wantCode(t, h.drain(be, false, ""), journal.TApplyCode_OK)
	if b, _ := h.st().Backend(be); b.Drained || b.DrainTimeMs != h.now || b.DrainActor != "" {
		t.Fatalf("after undrain: %+v", b)
	}
	undrained := h.st()
	wantCode(t, h.drain(be, false, ""), journal.TApplyCode_NOOP)
	h.unchanged(undrained)
}

// A job running on a backend that is drained meanwhile completes as
// before: its result is applied and its termination proof releases the slot.
func TestDrainedBackendsRunningJobCompletes(t *testing.T) {
	h, id, be := pendingFixture(t)
	r := h.run(id, be)
	wantCode(t, h.drain(be, true, ""), journal.TApplyCode_OK)
	wantItem(t, h.complete(completion(r, job.NativeOK, false)), journal.TApplyCode_OK)
	wantItem(t, h.proof(proofCmd(r, job.ProofChildReaped)), journal.TApplyCode_OK)
	if h.st().HeldSlots(be) != 0 || h.job(id).MutationState != job.Committed {
		t.Fatalf("after the result: %d slots, job %s", h.st().HeldSlots(be), h.job(id).MutationState)
	}
}

func TestDrainBackendRefusals(t *testing.T) {
	h := newHarness(t)
	be := h.addBackend("10.0.0.1:9070")
	before := h.st()
	wantCode(t, h.drain(be+1, true, ""), journal.TApplyCode_NOT_FOUND)
	h.unchanged(before)
	wantCode(t, h.drain(be, true, string(make([]byte, 300))), journal.TApplyCode_INVALID)
	h.unchanged(before)
	// A removed backend is gone, drained or not.
	wantCode(t, h.drain(be, true, ""), journal.TApplyCode_OK)
	wantCode(t, h.apply(CmdRemoveBackend, &journal.TRemoveBackendCommand{NowMs: h.now, BackendID: be}), journal.TApplyCode_OK)
	wantCode(t, h.drain(be, false, ""), journal.TApplyCode_NOT_FOUND)
}
