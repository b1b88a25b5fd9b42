package raftfsm

import (
	"strings"
	"testing"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
)

func TestCancel(t *testing.T) {
	h, id, _ := pendingFixture(t)
	h.now = 4000
	wantCode(t, h.cancel(id), journal.TApplyCode_OK)
	got := h.job(id)
	if got.MutationState != job.Cancelled || got.CancelActor != "ops" || got.Rev != 1 || got.UpdateTimeMs != 4000 {
		t.Fatalf("cancel: %+v", got)
	}
	if got.Unresolved() || h.st().Books().Global != 0 {
		t.Fatalf("cancel kept the fence or quota")
	}
	before := h.st()
	wantCode(t, h.cancel(id), journal.TApplyCode_NOOP)
	h.unchanged(before)
}

func TestCancelGuards(t *testing.T) {
	h, id, be := pendingFixture(t)
	h.run(id, be)
	before := h.st()
	resp := h.cancel(id)
	wantCode(t, resp, journal.TApplyCode_CAS_FAILED)
	if !strings.Contains(resp.GetMessage(), "RUNNING") {
		t.Fatalf("message %q does not name the state", resp.GetMessage())
	}
	wantCode(t, h.cancel(99), journal.TApplyCode_NOT_FOUND)
	wantCode(t, h.apply(CmdCancel, &journal.TCancelCommand{NowMs: 1, JobID: id, Actor: strings.Repeat("a", job.MaxNameBytes+1)}),
		journal.TApplyCode_INVALID)
	h.unchanged(before)
}

// unknownFixture: one job UNKNOWN (a deadline gave up), still holding its slot.
func unknownFixture(t *testing.T) (h *harness, id, be int64) {
	h, id, be = pendingFixture(t)
	wantItem(t, h.complete(completion(h.run(id, be), job.NoTrustedResult, false)), journal.TApplyCode_OK)
	return h, id, be
}

func TestForceRelease(t *testing.T) {
	h, id, be := unknownFixture(t)
	if h.st().HeldSlots(be) != 1 || h.st().Books().Global != 1 {
		t.Fatalf("fixture does not hold slot and quota")
	}
	h.now = 5000
	wantCode(t, h.forceRelease(id, "checked by hand"), journal.TApplyCode_OK)
	got := h.job(id)
	if !got.ForceReleased || got.ForceActor != "ops" || got.ForceTimeMs != 5000 || got.ForceNote != "checked by hand" ||
		got.ForceWarning == "" || got.MutationState != job.Unknown {
		t.Fatalf("force-release: %+v", got)
	}
	b := h.st().Books()
	if h.st().HeldSlots(be) != 0 || b.Global != 0 || len(b.Fence) != 0 || len(h.st().SlotHolders(be)) != 0 {
		t.Fatalf("force-release kept something: %+v", b)
	}
	before := h.st()
	wantCode(t, h.forceRelease(id, "again"), journal.TApplyCode_NOOP)
	h.unchanged(before)
	// Released and slot-free: retention may now collect it.
	if len(h.st().GCEligible(h.now+1, 0)) != 1 {
		t.Fatalf("force-released job is not GC eligible")
	}
}

func TestForceReleaseGuards(t *testing.T) {
	long := strings.Repeat("n", job.MaxNoteBytes+1)
	cases := []struct {
		name string
		cmd  func(id int64) *journal.TForceReleaseCommand
		code journal.TApplyCode
	}{
		{"no comment", func(id int64) *journal.TForceReleaseCommand {
			return &journal.TForceReleaseCommand{JobID: id, Actor: "ops"}
		}, journal.TApplyCode_INVALID},
		{"long comment", func(id int64) *journal.TForceReleaseCommand {
			return &journal.TForceReleaseCommand{JobID: id, Actor: "ops", Note: long}
		}, journal.TApplyCode_INVALID},
		{"long actor", func(id int64) *journal.TForceReleaseCommand {
			return &journal.TForceReleaseCommand{JobID: id, Actor: long, Note: "n"}
		}, journal.TApplyCode_INVALID},
		{"long warning", func(id int64) *journal.TForceReleaseCommand {
			return &journal.TForceReleaseCommand{JobID: id, Actor: "ops", Note: "n", Warning: long}
		}, journal.TApplyCode_INVALID},
		{"unknown job", func(int64) *journal.TForceReleaseCommand {
			return &journal.TForceReleaseCommand{JobID: 99, Actor: "ops", Note: "n"}
		}, journal.TApplyCode_NOT_FOUND},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h, id, _ := unknownFixture(t)
			before := h.st()
			wantCode(t, h.apply(CmdForceRelease, c.cmd(id)), c.code)
			h.unchanged(before)
		})
	}
	for _, state := range []string{"PENDING", "RUNNING", "COMMITTED"} {
		t.Run("state "+state, func(t *testing.T) {
			h, id, be := pendingFixture(t)
			if state != "PENDING" {
				r := h.run(id, be)
				if state == "COMMITTED" {
					wantItem(t, h.complete(completion(r, job.NativeOK, false)), journal.TApplyCode_OK)
				}
			}
			before := h.st()
			resp := h.forceRelease(id, "n")
			wantCode(t, resp, journal.TApplyCode_CAS_FAILED)
			if !strings.Contains(resp.GetMessage(), state) {
				t.Fatalf("message %q does not name %s", resp.GetMessage(), state)
			}
			h.unchanged(before)
		})
	}
}
