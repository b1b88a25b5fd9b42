package raftfsm

import (
	"github.com/lancemaster/lancemaster/pkg/job"
)

// An operator snapshot restore replaces the journal with a file's. The file
// knows a job as it was when the file was saved; the journal it replaces may
// know more: a dispatch, a result, a release. Forgetting a dispatch breaks
// the invariant of DESIGN.md §13.2 — at most one invocation of a job is ever
// accepted — because the restored PENDING job would be dispatched again with
// a fresh invocation that no backend can tell from a new job. So the state a
// restore installs is the file's, with what the replaced journal proves
// about the same jobs:
//
//   - Carried forward: the current journal has the same admission (job id,
//     admission index, create time, catalog, dataset and index name) at a
//     later revision, in the same Raft history (the same cluster id). Every
//     transition bumps the revision, so the current record is the file's
//     plus everything that happened to the job since: it replaces the file's
//     record whole (books moved as any transition moves them). Nothing is
//     lost: a dispatched job keeps its invocation (its report still
//     authenticates, reconcile still asks for it), a finished one its
//     outcome.
//   - Untouched: the same admission at the same revision. Nothing happened
//     to the job since the save.
//   - Held: a job PENDING, RUNNING or RESOLVING in the file that the current
//     journal cannot vouch for — another cluster's file (a restore into
//     fresh masters), a job the current journal no longer has (collected,
//     or lost to an earlier restore), or one it knows only at an older
//     revision. Its dispatch history after the save is unknown, so it is
//     held (RestoreHold): M1 refuses it and the dispatcher walks past it.
//     Reports, reconcile, the sweeps and the resolve step still settle it
//     from the invocation the file names; a PENDING one waits for an
//     operator (cancel it, then admit the work again: admission re-inspects
//     the dataset, so an index an earlier run built is seen).
//
// Terminal jobs the journal cannot vouch for are left as the file has them:
// they are never dispatched again, and refreshers are idempotent by job id.
// The transform runs on the leader before raft.Restore and the result is
// what raft installs on every replica, so it is one atomic step with the
// restore itself: no replica ever holds the file's state without it.

// RestoreEvidence is what PrepareRestore changed, in job id order.
type RestoreEvidence struct {
	CarriedForward []int64
	Held           []int64
}

// restoreHeldDetail is the HELD transition's detail.
const restoreHeldDetail = "snapshot restore: no record of its dispatches since the file was saved"

// PrepareRestore returns the state an operator restore of restored installs
// on a cluster whose journal is current (nil: none, every active job is
// held), and what it changed. nowMs is the leader's clock (update times and
// the timeline); the result is otherwise a function of the two states.
// Neither argument changes.
func PrepareRestore(restored, current *State, nowMs int64) (*State, RestoreEvidence, error) {
	var ev RestoreEvidence
	t := &tx{tableTxn: restored.t.txn(), m: *restored.m, now: nowMs}
	vouching := current != nil && current.m.clusterID != "" && current.m.clusterID == restored.m.clusterID
	type change struct {
		old, new *job.Record
	}
	var changes []change
	var fileRec, curRec job.Record
	restored.t.jobs[ixID].Ascend(nil, func(w *row) bool {
		f := w.recordInto(&fileRec)
		if vouching {
			if cw, ok := jobByID(current.t.jobs[ixID], f.JobID); ok {
				c := cw.recordInto(&curRec)
				if sameAdmission(f, c) && c.Rev >= f.Rev {
					if c.Rev > f.Rev {
						changes = append(changes, change{old: w.record(), new: cw.record().Clone()})
					}
					return true
				}
			}
		}
		if restoreHolds(f) {
			changes = append(changes, change{old: w.record()})
		}
		return true
	})
	for _, ch := range changes {
		var err error
		if ch.new != nil {
			err = t.put(ch.old, ch.new)
			ev.CarriedForward = append(ev.CarriedForward, ch.old.JobID)
		} else {
			err = t.transition(ch.old, func(r *job.Record) { r.RestoreHold = true })
			ev.Held = append(ev.Held, ch.old.JobID)
		}
		if err != nil {
			return nil, RestoreEvidence{}, err
		}
	}
	if t.bk != nil {
		t.m.books = t.bk.commit()
	}
	return &State{t: t.commit(), m: &t.m}, ev, nil
}

// restoreHolds: a file's record a restore holds when nothing vouches for
// it — one the dispatcher could dispatch (PENDING), or could send back to
// PENDING (RUNNING, RESOLVING: §13.2's return, an OPTIMIZE's retry), that
// is not held already.
func restoreHolds(r *job.Record) bool {
	switch r.MutationState {
	case job.Pending, job.Running, job.Resolving:
		return !r.RestoreHold
	}
	return false
}

// sameAdmission: a and b are one admission. Job ids alone are not: a
// restore gives the ids of the jobs it dropped to new jobs.
func sameAdmission(a, b *job.Record) bool {
	return a.JobID == b.JobID && a.AdmitIndex == b.AdmitIndex && a.CreateTimeMs == b.CreateTimeMs &&
		a.CatalogID == b.CatalogID && a.Locator == b.Locator && a.NormalizedIndexName == b.NormalizedIndexName &&
		a.MutationType == b.MutationType
}
