package raftfsm

import (
	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
)

// Operator commands on one job: Cancel (PENDING → CANCELLED, an Improvement
// of DESIGN.md §3) and ForceRelease (DESIGN.md §9). Both record who did it;
// both free the fence and quota through book, never by hand.

func init() {
	register(CommandSpec{Type: CmdCancel, Name: "cancel", Forward: ForwardFromFollower, Wake: WakeDispatcher}, journal.NewTCancelCommand, applyCancel)
	register(CommandSpec{Type: CmdForceRelease, Name: "force_release", Forward: ForwardFromFollower, Wake: WakeDispatcher}, journal.NewTForceReleaseCommand, applyForceRelease)
}

func applyCancel(t *tx, c *journal.TCancelCommand) (*journal.TApplyResponse, error) {
	if resp := checkAuditActor(c.Audit); resp != nil {
		return resp, nil
	}
	if err := job.ValidateActor("actor", c.Actor); err != nil {
		return respFail(journal.TApplyCode_INVALID, "%s", errMessage(err)), nil
	}
	r := t.job(c.JobID)
	switch {
	case r == nil:
		return respFail(journal.TApplyCode_NOT_FOUND, "job %d does not exist", c.JobID), nil
	case r.MutationState == job.Cancelled:
		return respFail(journal.TApplyCode_NOOP, "job %d is already CANCELLED", c.JobID), nil
	case r.MutationState != job.Pending:
		return respFail(journal.TApplyCode_CAS_FAILED,
			"job %d is %s; only a PENDING job can be cancelled (an UNKNOWN one can be force-released)", c.JobID, r.MutationState), nil
	}
	err := t.transition(r, func(n *job.Record) {
		n.MutationState = job.Cancelled
		n.CancelActor = t.strs.Get(c.Actor)
	})
	if err != nil {
		return nil, err
	}
	t.audit(c.Audit, AuditJobCancel, JobSubject(c.JobID), "mutation_state: PENDING → CANCELLED")
	return respID(c.JobID), nil
}

// applyForceRelease frees what an UNKNOWN job holds — fence, quota and slot —
// in one entry. The outcome stays UNKNOWN; the note, actor, time and the
// warning that the old worker may still touch the index are recorded.
// Retrying an already released job is a NOOP.
func applyForceRelease(t *tx, c *journal.TForceReleaseCommand) (*journal.TApplyResponse, error) {
	if c.Note == "" {
		return respFail(journal.TApplyCode_INVALID, "a force-release needs a comment"), nil
	}
	for _, f := range []struct {
		name, value string
		max         int
	}{
		{"actor", c.Actor, job.MaxNameBytes},
		{"comment", c.Note, job.MaxNoteBytes},
		{"warning", c.Warning, job.MaxNoteBytes},
	} {
		if err := job.CheckBytes(f.name, f.value, f.max); err != nil {
			return respFail(journal.TApplyCode_INVALID, "%s", errMessage(err)), nil
		}
	}
	if resp := checkAuditActor(c.Audit); resp != nil {
		return resp, nil
	}
	r := t.job(c.JobID)
	switch {
	case r == nil:
		return respFail(journal.TApplyCode_NOT_FOUND, "job %d does not exist", c.JobID), nil
	case r.ForceReleased:
		return respFail(journal.TApplyCode_NOOP, "job %d is already force-released", c.JobID), nil
	case r.MutationState != job.Unknown:
		return respFail(journal.TApplyCode_CAS_FAILED,
			"job %d is %s; only an UNKNOWN job can be force-released", c.JobID, r.MutationState), nil
	}
	err := t.transition(r, func(n *job.Record) {
		n.ForceReleased = true
		n.ForceActor = t.strs.Get(c.Actor)
		n.ForceTimeMs = t.now
		n.ForceNote = t.strs.Get(c.Note)
		n.ForceWarning = t.strs.Get(c.Warning)
	})
	if err != nil {
		return nil, err
	}
	t.audit(c.Audit, AuditJobForce, JobSubject(c.JobID), "force_released: false → true (state UNKNOWN; fence, quota and slot freed); comment: "+c.Note)
	return respID(c.JobID), nil
}
