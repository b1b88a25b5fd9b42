package raftfsm

import (
	"testing"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
)

// committedFixture: one job COMMITTED with refresh REQUIRED.
func committedFixture(t *testing.T) (h *harness, id int64) {
	h, id, be := pendingFixture(t)
	wantItem(t, h.complete(completion(h.run(id, be), job.NativeOK, false)), journal.TApplyCode_OK)
	return h, id
}

func TestRefreshLifecycle(t *testing.T) {
	h, id := committedFixture(t)
	if due := h.st().RefreshDue(0); len(due) != 1 || due[0].JobID != id {
		t.Fatalf("refresh due = %v", due)
	}
	step := func(to job.RefreshState) *job.Record {
		t.Helper()
		r := h.job(id)
		h.now += 10
		wantItem(t, h.refresh(id, r.Rev, to), journal.TApplyCode_OK)
		got := h.job(id)
		if got.RefreshState != to || got.Rev != r.Rev+1 || got.UpdateTimeMs != h.now {
			t.Fatalf("R → %s: %+v", to, got)
		}
		return got
	}
	step(job.RefreshRunning) // R1
	if len(h.st().RefreshRunning()) != 1 || len(h.st().RefreshDue(0)) != 0 {
		t.Fatalf("refresh indexes not moved")
	}
	step(job.RefreshRequired) // R4
	step(job.RefreshRunning)  // R1
	failed := step(job.RefreshFailed)
	if failed.RefreshFailureTimeMs != h.now || !failed.Unresolved() {
		t.Fatalf("R3 must stamp the failure time and keep the fence")
	}
	step(job.RefreshRunning) // R1 from FAILED
	done := step(job.RefreshDone)
	if done.Unresolved() || len(h.st().UnresolvedForFence(done.Fence())) != 0 || h.st().Books().Global != 0 {
		t.Fatalf("R2 must release fence and quota")
	}
}

func TestRefreshGuards(t *testing.T) {
	cases := []struct {
		name  string
		setup func(h *harness, id int64)
		rev   func(r *job.Record) int64
		to    job.RefreshState
		code  journal.TApplyCode
	}{
		{"stale rev", nil, func(r *job.Record) int64 { return r.Rev - 1 }, job.RefreshRunning, journal.TApplyCode_CAS_FAILED},
		{"done from required", nil, nil, job.RefreshDone, journal.TApplyCode_CAS_FAILED},
		{"failed from required", nil, nil, job.RefreshFailed, journal.TApplyCode_CAS_FAILED},
		{"required from required", nil, nil, job.RefreshRequired, journal.TApplyCode_CAS_FAILED},
		{"to not required", nil, nil, job.RefreshNotRequired, journal.TApplyCode_INVALID},
		{"to unknown state", nil, nil, 42, journal.TApplyCode_INVALID},
		{"running twice", func(h *harness, id int64) {
			wantItem(h.t, h.refresh(id, h.job(id).Rev, job.RefreshRunning), journal.TApplyCode_OK)
		}, nil, job.RefreshRunning, journal.TApplyCode_CAS_FAILED},
		{"running after done", func(h *harness, id int64) {
			wantItem(h.t, h.refresh(id, h.job(id).Rev, job.RefreshRunning), journal.TApplyCode_OK)
			wantItem(h.t, h.refresh(id, h.job(id).Rev, job.RefreshDone), journal.TApplyCode_OK)
		}, nil, job.RefreshRunning, journal.TApplyCode_CAS_FAILED},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h, id := committedFixture(t)
			if c.setup != nil {
				c.setup(h, id)
			}
			r := h.job(id)
			rev := r.Rev
			if c.rev != nil {
				rev = c.rev(r)
			}
			before := h.st()
			wantItem(t, h.refresh(id, rev, c.to), c.code)
			h.unchanged(before)
		})
	}
	t.Run("not an outcome", func(t *testing.T) {
		h, id, _ := pendingFixture(t)
		// A PENDING job whose refresh is REQUIRED (hand-made): only the
		// outcome guard stands between it and R1.
		h.restoreWith(t, func(rs []*job.Record) []*job.Record {
			rs[0] = rs[0].Clone()
			rs[0].RefreshState = job.RefreshRequired
			return rs
		})
		before := h.st()
		wantItem(t, h.refresh(id, 0, job.RefreshRunning), journal.TApplyCode_CAS_FAILED)
		h.unchanged(before)
	})
	t.Run("force-released", func(t *testing.T) {
		h, id, be := pendingFixture(t)
		wantItem(t, h.complete(completion(h.run(id, be), job.NativeIO, false)), journal.TApplyCode_OK)
		// An UNKNOWN outcome with a refresh still REQUIRED (hand-made), then released.
		h.restoreWith(t, func(rs []*job.Record) []*job.Record {
			rs[0] = rs[0].Clone()
			rs[0].RefreshState = job.RefreshRequired
			return rs
		})
		wantCode(t, h.forceRelease(id, "gone"), journal.TApplyCode_OK)
		before := h.st()
		wantItem(t, h.refresh(id, h.job(id).Rev, job.RefreshRunning), journal.TApplyCode_CAS_FAILED)
		h.unchanged(before)
	})
	t.Run("unknown job", func(t *testing.T) {
		h, _ := committedFixture(t)
		wantItem(t, h.refresh(99, 0, job.RefreshRunning), journal.TApplyCode_NOT_FOUND)
	})
}
