package dispatch

import (
	"bytes"
	"strings"
	"testing"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// Every send outcome, classified from typed facts only (DESIGN.md §7).
func TestSendClassification(t *testing.T) {
	const leak = "LEAK-request-echo"
	cases := []struct {
		name      string
		answer    func(addr string) (*wire.TStatus, error)
		state     job.MutationState
		slot      bool // still holds the possible-live slot
		proof     job.TerminationProof
		code      job.ResultCode
		msgHas    string
		journaled bool
		refused   bool // M2″: back to PENDING, the refusal in termination_message
	}{
		{name: "OK waits for the report", state: job.Running, slot: true, proof: job.ProofNone,
			answer: func(string) (*wire.TStatus, error) { return &wire.TStatus{StatusCode: wire.TStatusCode_OK}, nil }},
		{name: "never sent (clean error)", state: job.Pending, proof: job.ProofNotEnqueued, journaled: true, refused: true,
			code: job.PreInvocationResourceRejected, msgHas: "never sent",
			answer: func(a string) (*wire.TStatus, error) { return nil, notSentErr(a) }},
		{name: "UNKNOWN_METHOD", state: job.Pending, proof: job.ProofNotEnqueued, journaled: true, refused: true,
			code: job.PreInvocationResourceRejected, msgHas: "UNKNOWN_METHOD",
			answer: func(a string) (*wire.TStatus, error) { return nil, unknownMethodErr(a) }},
		{name: "non-OK status", state: job.Pending, proof: job.ProofNotEnqueued, journaled: true, refused: true,
			code: job.PreInvocationResourceRejected, msgHas: "QUEUE_FULL",
			answer: func(string) (*wire.TStatus, error) {
				return &wire.TStatus{StatusCode: wire.TStatusCode_QUEUE_FULL, ErrorMsgs: []string{leak}}, nil
			}},
		{name: "failure after bytes left", state: job.Unknown, slot: true, proof: job.ProofNone, journaled: true,
			code: job.NoTrustedResult, msgHas: "bytes may have left",
			answer: func(a string) (*wire.TStatus, error) { return nil, bytesLeftErr(a) }},
		{name: "no status", state: job.Unknown, slot: true, proof: job.ProofNone, journaled: true,
			code: job.NoTrustedResult, msgHas: "no status",
			answer: func(string) (*wire.TStatus, error) { return nil, nil }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			b1 := e.addBackend("b1:9060", 1)
			ids := e.admit(1)
			e.heartbeat()
			e.be.setSubmit(func(addr string, _ *wire.TLanceIndexJobDispatch) (*wire.TStatus, error) { return tc.answer(addr) })
			mark := e.prop.count()
			e.round()
			r := e.wantState(ids[0], tc.state)
			if r.HoldsPossibleLiveSlot() != tc.slot || r.TerminationProof != tc.proof {
				t.Fatalf("slot %v proof %s, want %v %s", r.HoldsPossibleLiveSlot(), r.TerminationProof, tc.slot, tc.proof)
			}
			if held := e.fsm.State().HeldSlots(b1); (held == 1) != tc.slot {
				t.Fatalf("backend holds %d slots", held)
			}
			want := []raftfsm.CommandType{raftfsm.CmdMarkRunningBatch}
			if tc.journaled {
				want = append(want, raftfsm.CmdCompleteBatch)
				msg := r.Result.Message
				if tc.refused {
					msg = r.TerminationMessage
					if r.DispatchAttempts != 1 {
						t.Fatalf("attempts %d, want 1", r.DispatchAttempts)
					}
					if s, _ := e.pool.Status(b1); !s.Refused {
						t.Fatal("the refusing backend is not marked refused")
					}
				} else if r.Result.Code != tc.code {
					t.Fatalf("result %s, want %s", r.Result.Code, tc.code)
				}
				if !strings.Contains(msg, tc.msgHas) {
					t.Fatalf("message %q, want one containing %q", msg, tc.msgHas)
				}
				if strings.Contains(msg, leak) {
					t.Fatal("the message carries the backend's error text")
				}
			}
			wantTypes(t, e.prop.TypesSince(mark), want...)
			if n := len(e.be.submitted()); n != 1 {
				t.Fatalf("sent %d times", n)
			}
			// Never resent: more rounds send nothing more.
			e.round()
			if n := len(e.be.submitted()); n != 1 {
				t.Fatalf("resent: %d sends", n)
			}
		})
	}
}

// Each classification of a round is journaled once, in CompleteBatch
// entries it may share with others (group commit), never with the M1.
func TestClassificationsJournaledOnce(t *testing.T) {
	e := newEnv(t)
	e.addBackend("b1:9060", 1)
	e.setOption("lance_index_job_max_inflight_per_backend", "10")
	ids := e.admit(4)
	e.heartbeat()
	e.be.setSubmit(func(addr string, d *wire.TLanceIndexJobDispatch) (*wire.TStatus, error) {
		switch d.JobID {
		case ids[0]:
			return nil, notSentErr(addr)
		case ids[1]:
			return nil, bytesLeftErr(addr)
		case ids[2]:
			return &wire.TStatus{StatusCode: wire.TStatusCode_STALE_EPOCH}, nil
		}
		return &wire.TStatus{StatusCode: wire.TStatusCode_OK}, nil
	})
	mark := e.prop.count()
	e.round()
	entries := e.prop.since(mark)
	if raftfsm.CommandType(entries[0][0]) != raftfsm.CmdMarkRunningBatch {
		t.Fatalf("first entry type %d", entries[0][0])
	}
	seen := map[int64]int{}
	for _, entry := range entries[1:] {
		if raftfsm.CommandType(entry[0]) != raftfsm.CmdCompleteBatch {
			t.Fatalf("entry type %d after the M1", entry[0])
		}
		for _, c := range decodeEntry(t, entry, journal.NewTCompleteBatch()).Completions {
			seen[c.JobID]++
		}
	}
	if len(seen) != 3 || seen[ids[0]] != 1 || seen[ids[1]] != 1 || seen[ids[2]] != 1 {
		t.Fatalf("completions per job %v, want one for each of the first three", seen)
	}
	e.wantState(ids[0], job.Pending)
	e.wantState(ids[1], job.Unknown)
	e.wantState(ids[2], job.Pending)
	e.wantState(ids[3], job.Running)
}

// Every field of the dispatch (DESIGN.md §10) is filled from the record,
// the M1 and the options.
func TestDispatchRequestFields(t *testing.T) {
	e := newEnv(t)
	b1 := e.addBackend("b1:9060", 1)
	ids := e.admit(1)
	e.heartbeat()
	e.round()
	r := e.wantState(ids[0], job.Running)
	s := e.be.submitted()
	if len(s) != 1 || s[0].addr != "b1:9060" {
		t.Fatalf("submits %v", s)
	}
	d := s[0].d
	checks := map[string]bool{
		"job_id":           d.JobID == r.JobID,
		"dispatch_rev":     d.DispatchRevision == r.DispatchRevision && r.DispatchRevision == r.Rev,
		"invocation":       d.InvocationID == r.InvocationID && d.GetInvocationSecret() == r.InvocationSecret,
		"epoch":            d.BeProcessEpoch == 1 && r.ProcessEpoch == 1 && r.BackendID == b1,
		"deadline":         d.DeadlineMs == r.DeadlineMs && r.DeadlineMs == e.nowMs()+3600_000,
		"mutation":         d.MutationType == wire.TLanceIndexMutationType_CREATE,
		"index":            d.IndexName == r.DisplayIndexName && d.ColumnName == "id" && d.IndexType == job.IndexBTree,
		"properties":       d.GetPropertiesJSON() == "{}" && d.IsSetIfNotExists() && d.IsSetIfExists(),
		"dataset":          d.DatasetURI == r.Locator && d.AdmittedDatasetVersion == 7 && d.SchemaContractJSON == r.SchemaContract,
		"limits":           d.GetMaxNumPartitions() == 4096 && d.GetMaxNumSubVectors() == 256,
		"term":             d.GetLeaderTerm() == testTerm && r.LeaderTerm == testTerm,
		"storage_options":  d.StorageOptions["aws_secret_access_key"] == canarySecret,
		"possible-live":    r.HoldsPossibleLiveSlot(),
		"journaled secret": r.InvocationSecret != "",
	}
	for name, ok := range checks {
		if !ok {
			t.Errorf("dispatch field %s is wrong: %+v", name, d)
		}
	}
}

// Storage credentials reach the wire and nothing else: no entry, no
// snapshot, no log line.
func TestCredentialsOnlyOnTheWire(t *testing.T) {
	e := newEnv(t)
	e.addBackend("b1:9060", 1)
	e.setOption("lance_index_job_max_inflight_per_backend", "10")
	ids := e.admit(3)
	e.heartbeat()
	e.be.setSubmit(func(addr string, d *wire.TLanceIndexJobDispatch) (*wire.TStatus, error) {
		switch d.JobID {
		case ids[0]:
			return nil, bytesLeftErr(addr) // error paths log too
		case ids[1]:
			return &wire.TStatus{StatusCode: wire.TStatusCode_INVALID_ARGUMENT, ErrorMsgs: []string{"bad"}}, nil
		}
		return &wire.TStatus{StatusCode: wire.TStatusCode_OK}, nil
	})
	e.round()
	if len(e.be.submitted()) != 3 {
		t.Fatal("not sent")
	}
	for _, s := range e.be.submitted() {
		if s.d.StorageOptions["aws_secret_access_key"] != canarySecret {
			t.Fatal("the storage secret did not reach the wire")
		}
	}
	for i, entry := range e.prop.since(0) {
		if bytes.Contains(entry, []byte(canarySecret)) {
			t.Fatalf("entry %d (type %d) carries the storage secret", i, entry[0])
		}
	}
	if bytes.Contains(e.snapshot(), []byte(canarySecret)) {
		t.Fatal("the snapshot carries the storage secret")
	}
	logs := e.logText()
	if e.logs.Len() == 0 {
		t.Fatal("expected log lines to search")
	}
	for _, forbidden := range []string{canarySecret, e.job(ids[2]).Locator, e.job(ids[2]).InvocationSecret} {
		if strings.Contains(logs, forbidden) {
			t.Fatalf("a log line carries %q:\n%s", forbidden, logs)
		}
	}
}

// A credentials failure leaves the job PENDING and writes nothing.
func TestPrepareFailureWritesNothing(t *testing.T) {
	e := newEnv(t)
	e.addBackend("b1:9060", 1)
	other := e.propose(raftfsm.CmdCreateCatalog, &journal.TCatalogCommand{NowMs: e.nowMs(),
		Catalog: &journal.TCatalogRecord{Name: "broken", RootURI: strPtr("s3://other/root"), CredentialsRef: strPtr("missing-ref")}}).GetID()
	bad := e.admitIn(other, "s3://other/root", "t1")
	good := e.admit(1)[0]
	e.heartbeat()
	mark := e.prop.count()
	e.round()
	e.wantState(bad, job.Pending)
	r := e.wantState(good, job.Running)
	m1 := decodeEntry(t, e.prop.since(mark)[0], journal.NewTMarkRunningBatch())
	if len(m1.Jobs) != 1 || m1.Jobs[0].JobID != good || r.JobID != good {
		t.Fatalf("M1 holds %d jobs", len(m1.Jobs))
	}
	if !strings.Contains(e.logText(), "credentials") {
		t.Fatal("the failure kind is not logged")
	}
}

func strPtr(s string) *string { return &s }
