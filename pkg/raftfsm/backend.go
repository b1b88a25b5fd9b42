package raftfsm

import (
	"fmt"
	"net"
	"strconv"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
)

// Backend registration (DESIGN.md §1): the operator adds agents by address,
// like Doris's ALTER SYSTEM ADD BACKEND. Ids are allocated here and never
// reused, so a job's backend_id always names the agent that ran it.

func init() {
	register(CommandSpec{Type: CmdAddBackend, Name: "add_backend", Forward: ForwardFromFollower, Wake: WakeDispatcher}, journal.NewTBackendCommand, applyAddBackend)
	register(CommandSpec{Type: CmdRemoveBackend, Name: "remove_backend", Forward: ForwardFromFollower, Wake: WakeDispatcher}, journal.NewTRemoveBackendCommand, applyRemoveBackend)
	register(CommandSpec{Type: CmdDrainBackend, Name: "drain_backend", Forward: ForwardFromFollower, Wake: WakeDispatcher}, journal.NewTDrainBackendCommand, applyDrainBackend)
}

func applyAddBackend(t *tx, c *journal.TBackendCommand) (*journal.TApplyResponse, error) {
	if resp := checkAuditActor(c.Audit); resp != nil {
		return resp, nil
	}
	if err := validateBackendAddress(c.Address); err != nil {
		return respFail(journal.TApplyCode_INVALID, "%s", errMessage(err)), nil
	}
	if b, ok := byFold(t.backendAddrs.Version(), c.Address); ok {
		return respFail(journal.TApplyCode_ALREADY_EXISTS, "backend %s is already registered as id %d", b.Address, b.ID), nil
	}
	t.m.lastBackendID++
	b := &Backend{ID: t.m.lastBackendID, Address: c.Address, AddTimeMs: t.now}
	t.putBackend(b)
	t.m.backends++
	t.audit(c.Audit, AuditBackendAdd, BackendSubject(b.ID, b.Address), "registered")
	return respID(b.ID), nil
}

// applyRemoveBackend refuses while the backend holds a possible-live slot: a
// worker may still run there, and only a termination proof (or a
// force-release) says otherwise (DESIGN.md §4.3).
func applyRemoveBackend(t *tx, c *journal.TRemoveBackendCommand) (*journal.TApplyResponse, error) {
	if resp := checkAuditActor(c.Audit); resp != nil {
		return resp, nil
	}
	b, ok := backendByID(t.backends.Version(), c.BackendID)
	if !ok {
		return respFail(journal.TApplyCode_NOT_FOUND, "backend %d is not registered", c.BackendID), nil
	}
	if n := t.books().slotCount(c.BackendID); n > 0 {
		return respFail(journal.TApplyCode_BACKEND_IN_USE,
			"backend %d holds %d possible-live slots; it can be removed once their workers are proven gone", c.BackendID, n), nil
	}
	t.deleteBackend(b)
	t.m.backends--
	t.audit(c.Audit, AuditBackendRemove, BackendSubject(b.ID, b.Address), "removed")
	return respID(c.BackendID), nil
}

// applyDrainBackend sets or clears a backend's drained flag. The leader's
// dispatcher picks no drained backend for a new dispatch; nothing the FSM
// applies reads the flag (an older master skips the command: type 147), so
// its jobs, slots and reports are untouched. Already so: NOOP.
func applyDrainBackend(t *tx, c *journal.TDrainBackendCommand) (*journal.TApplyResponse, error) {
	if c.Actor != nil {
		if err := job.ValidateActor("actor", c.GetActor()); err != nil {
			return respFail(journal.TApplyCode_INVALID, "%s", errMessage(err)), nil
		}
	}
	if resp := checkAuditActor(c.Audit); resp != nil {
		return resp, nil
	}
	b, ok := backendByID(t.backends.Version(), c.BackendID)
	if !ok {
		return respFail(journal.TApplyCode_NOT_FOUND, "backend %d is not registered", c.BackendID), nil
	}
	if b.Drained == c.Drained {
		word := "drained"
		if !c.Drained {
			word = "not drained"
		}
		return respFail(journal.TApplyCode_NOOP, "backend %d is already %s", c.BackendID, word), nil
	}
	n := *b
	n.Drained, n.DrainTimeMs, n.DrainActor = c.Drained, t.now, c.GetActor()
	t.putBackend(&n)
	kind := AuditBackendDrain
	if !c.Drained {
		kind = AuditBackendUndrain
	}
	t.audit(c.Audit, kind, BackendSubject(b.ID, b.Address), fmt.Sprintf("drained: %t → %t", b.Drained, c.Drained))
	return respID(b.ID), nil
}

// validateBackendAddress wants HOST:PORT with a port in 1..65535.
func validateBackendAddress(addr string) error {
	if err := job.CheckBytes("backend address", addr, job.MaxNameBytes); err != nil {
		return err
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return job.Errorf(job.CodeInvalid, "backend address %q is not HOST:PORT", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return job.Errorf(job.CodeInvalid, "backend address %q has no valid port", addr)
	}
	return nil
}
