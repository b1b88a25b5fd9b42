package dispatch

import (
	"context"
	"testing"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/job"
)

// What the resolve step asks a backend, and what it concludes from the
// answer (DESIGN.md §13.4): the dataset is read for this job's builds, and
// only an answer that is an outcome ends the job.

const (
	announcedUUID = "22222222-2222-4222-8222-222222222222"
	admittedUUID  = "33333333-3333-4333-8333-333333333333"
)

// resolvingReplace is a REPLACE of an index that existed at admission
// (admittedUUID), whose worker announced announcedUUID and ended without a
// result: RESOLVING, readable now.
func resolvingReplace(t *testing.T) (*env, *job.Record) {
	e := newEnv(t)
	b1 := e.addBackend("b1:9060", 1)
	id := e.admitWith(e.catalogID, testRoot, "items", func(r *job.Record) {
		r.MutationType, r.AdmittedIndexUUID = job.Replace, admittedUUID
	})
	e.markRunning(id, b1, 1, e.nowMs()+3_600_000, 3)
	r := e.resolving(id, e.nowMs(), func(p *journal.TProof) { p.IndexUUID = strPtr(announcedUUID) })
	e.heartbeat()
	return e, r
}

// The backend can only tell this job's builds apart by their uuids: the
// request carries the uuid the worker announced and the one the index had
// at admission.
func TestResolveAsksByTheJobsUUIDs(t *testing.T) {
	e, r := resolvingReplace(t)
	e.be.setResolve(resolveAnswer(wire.TLanceResolveOutcome_COMMITTED, "v8 lists it", announcedUUID))
	e.round()
	calls := e.be.resolved()
	if len(calls) != 1 {
		t.Fatalf("%d resolve calls", len(calls))
	}
	req := calls[0].req
	if req.GetIndexUUID() != announcedUUID || req.GetAdmittedIndexUUID() != admittedUUID ||
		req.MutationType != wire.TLanceIndexMutationType_REPLACE {
		t.Fatalf("resolve request: uuid %q, admitted %q, type %v", req.GetIndexUUID(), req.GetAdmittedIndexUUID(), req.MutationType)
	}
	e.wantState(r.JobID, job.Committed)
}

// A refusal is not evidence, whatever else the answer carries: the job stays
// RESOLVING and is asked again.
func TestResolveRefusalWithAnOutcomeProvesNothing(t *testing.T) {
	e, r := resolveEnv(t)
	e.be.setResolve(func(context.Context, string, *wire.TResolveJobRequest) (*wire.TResolveJobResponse, error) {
		out := wire.TLanceResolveOutcome_COMMITTED
		return &wire.TResolveJobResponse{Status: &wire.TStatus{StatusCode: wire.TStatusCode_RUNTIME_ERROR}, Outcome: &out}, nil
	})
	e.round()
	e.wantState(r.JobID, job.Resolving)
	e.round()
	if n := len(e.be.resolved()); n != 2 {
		t.Fatalf("%d resolve calls after two rounds, want 2", n)
	}
}

// The uuid a COMMITTED answer names is recorded in its canonical form, and
// one that is not a uuid is not recorded (the outcome still is).
func TestResolveRecordsOnlyACanonicalUUID(t *testing.T) {
	for _, tc := range []struct{ answered, want string }{
		{"AAAAAAAA-AAAA-4AAA-8AAA-AAAAAAAAAAAA", "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa"},
		{"not-a-uuid", ""},
	} {
		t.Run(tc.answered, func(t *testing.T) {
			e, r := resolveEnv(t)
			e.be.setResolve(resolveAnswer(wire.TLanceResolveOutcome_COMMITTED, "v8 lists it", tc.answered))
			e.round()
			if got := e.wantState(r.JobID, job.Committed); got.IndexUUID != tc.want {
				t.Fatalf("index uuid %q, want %q", got.IndexUUID, tc.want)
			}
		})
	}
}
