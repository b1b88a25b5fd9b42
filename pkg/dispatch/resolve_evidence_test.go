package dispatch

import (
	"context"
	"testing"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
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
	loc, err := job.DatasetLocator(testRoot, "db", "items")
	if err != nil {
		t.Fatal(err)
	}
	rec := &job.Record{Creator: "alice", CatalogID: e.catalogID, DB: "db", Table: "items",
		Provider: job.ProviderDirectory, Locator: loc, DisplayIndexName: "Idx_items",
		NormalizedIndexName: job.NormalizeIndexName("Idx_items"), MutationType: job.Replace,
		AdmittedDatasetVersion: 7, AdmittedIndexUUID: admittedUUID, IndexType: job.IndexBTree, Column: "id",
		PropertiesJSON: "{}", SchemaContract: `{"v":1,"fields":[{"id":0,"name":"id","type":"int64","nullable":false}]}`}
	resp := e.propose(raftfsm.CmdAdmit, &journal.TAdmitCommand{NowMs: e.nowMs(), Job: raftfsm.RecordToThrift(rec)})
	if resp.Code != journal.TApplyCode_OK {
		t.Fatalf("admit: %v %s", resp.Code, resp.GetMessage())
	}
	id := resp.GetID()
	r := e.markRunning(id, b1, 1, e.nowMs()+3_600_000, 3)
	p := recordIdentity(r).proof(r.BackendID, job.ProofChildReaped)
	after := e.nowMs()
	p.FinishedWithoutResult_, p.ResolveAfterMs, p.IndexUUID = boolPtr(true), &after, strPtr(announcedUUID)
	if resp := e.propose(raftfsm.CmdRecordProofBatch, &journal.TRecordProofBatch{NowMs: e.nowMs(), Proofs: []*journal.TProof{p}}); resp.Items[0].Code != journal.TApplyCode_OK {
		t.Fatalf("P finished: %v %s", resp.Items[0].Code, resp.Items[0].GetMessage())
	}
	e.heartbeat()
	return e, e.wantState(id, job.Resolving)
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
