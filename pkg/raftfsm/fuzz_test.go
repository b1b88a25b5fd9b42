package raftfsm

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/hashicorp/raft"
	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
)

// FuzzApply feeds arbitrary bytes to CheckCommand and to Apply, on an empty
// FSM and on one holding a small fixture (catalogs, backends, and jobs in
// every mutation state). What must hold for every input:
//
//   - CheckCommand accepts it ⇒ Apply answers a *journal.TApplyResponse and
//     never calls OnFatal: forwardApply proposes exactly what CheckCommand
//     accepts, and a committed entry that is fatal stops every master;
//   - CheckCommand refuses it ⇒ Apply is fatal too, except for an unknown
//     ignorable type (which Apply skips and CheckCommand still refuses), so
//     no refused command could ever have been applied;
//   - Apply is deterministic (two replicas end in the same state) and never
//     writes to the State it started from (readers hold published States);
//   - an entry-level refusal (any code but OK) leaves the state unchanged;
//   - the books Apply maintains equal a recomputation, and the state
//     survives a snapshot and a restore byte for byte (a follower installing
//     the leader's snapshot gets the same state).
//
// The seed corpus (testdata/fuzz/FuzzApply) holds a valid encoding of every
// command type against the fixture and a few malformed entries; regenerate
// it with LANCEMASTER_WRITE_FUZZ_SEEDS=1 go test -run TestWriteFuzzApplySeeds.
func FuzzApply(f *testing.F) {
	starts := []struct {
		name  string
		state *State
		snap  []byte
	}{{name: "empty", state: newHarness(f).st()}, {name: "fixture", state: fuzzFixture(f).st()}}
	for i := range starts {
		starts[i].snap = snapshotBytes(f, starts[i].state)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkErr := CheckCommand(data)
		for _, start := range starts {
			// Every replica starts from the same published State: Apply must
			// copy what it changes, never write to it (readers hold it).
			a, aFatals := fuzzFSM(start.state)
			resp, ok := a.Apply(&raft.Log{Index: start.state.AppliedIndex() + 1, Term: 1, Type: raft.LogCommand, Data: data}).(*journal.TApplyResponse)
			if !ok || resp == nil {
				t.Fatalf("%s: Apply answered no *journal.TApplyResponse", start.name)
			}
			if !bytes.Equal(start.snap, snapshotBytes(t, start.state)) {
				t.Fatalf("%s: Apply modified the state it started from", start.name)
			}
			fatal := len(*aFatals) > 0
			switch {
			case checkErr == nil && fatal:
				t.Fatalf("%s: CheckCommand accepted the entry but Apply was fatal: %v", start.name, (*aFatals)[0])
			case checkErr != nil && !fatal && !ignorableUnknown(data):
				t.Fatalf("%s: CheckCommand refused the entry (%v) but Apply applied it (%v)", start.name, checkErr, resp.Code)
			}
			after := snapshotBytes(t, a.State())
			if (fatal || resp.Code != journal.TApplyCode_OK) && !bytes.Equal(start.snap, after) {
				t.Fatalf("%s: entry refused with %v (fatal %v) but the state changed", start.name, resp.Code, fatal)
			}
			if fatal {
				continue
			}
			// A second replica applying the same entry ends in the same state
			// with the same answer.
			b, _ := fuzzFSM(start.state)
			respB := b.Apply(&raft.Log{Index: start.state.AppliedIndex() + 1, Term: 1, Type: raft.LogCommand, Data: data}).(*journal.TApplyResponse)
			if !bytes.Equal(after, snapshotBytes(t, b.State())) {
				t.Fatalf("%s: two replicas diverged after the same entry", start.name)
			}
			if !fuzzSameResponse(resp, respB) {
				t.Fatalf("%s: two replicas answered differently: %v / %v", start.name, resp, respB)
			}
			if !equalBooks(a.State()) {
				t.Fatalf("%s: books differ from a recomputation after %v", start.name, resp.Code)
			}
			// The state survives a snapshot and a restore.
			var buf bytes.Buffer
			if err := a.State().WriteSnapshot(&buf); err != nil {
				t.Fatalf("%s: snapshot of the new state: %v", start.name, err)
			}
			c := New(zap.NewNop())
			if err := c.Restore(io.NopCloser(&buf)); err != nil {
				t.Fatalf("%s: the new state's snapshot does not restore: %v", start.name, err)
			}
			if !bytes.Equal(after, snapshotBytes(t, c.State())) {
				t.Fatalf("%s: the restored state differs from the applied one", start.name)
			}
		}
	})
}

// ignorableUnknown: an entry Apply skips although CheckCommand refuses it.
func ignorableUnknown(data []byte) bool {
	if len(data) == 0 {
		return false
	}
	ct := CommandType(data[0])
	_, known := registry[ct]
	return !known && ct&IgnorableFlag != 0
}

func fuzzSameResponse(a, b *journal.TApplyResponse) bool {
	x, errA := EncodeResponse(a)
	y, errB := EncodeResponse(b)
	return errA == nil && errB == nil && bytes.Equal(x, y)
}

// fuzzFSM is a fresh FSM publishing start, whose OnFatal records instead
// of exiting.
func fuzzFSM(start *State) (*FSM, *[]error) {
	fatals := new([]error)
	f := New(zap.NewNop())
	f.OnFatal = func(err error) { *fatals = append(*fatals, err) }
	f.state.Store(start)
	return f, fatals
}

// The fixture's ids, which the seeds name.
const (
	fzCatalog     = int64(1) // "lake", rooted at testRoot
	fzCatalog2    = int64(2) // "empty", no jobs
	fzBackend     = int64(1)
	fzBackend2    = int64(2) // holds no slot
	fzPending     = int64(1) // PENDING
	fzRunning     = int64(2) // RUNNING on fzBackend
	fzCommitted   = int64(3) // COMMITTED, slot released by a proof
	fzHeld        = int64(4) // COMMITTED, slot still held (no proof yet)
	fzCancelled   = int64(5) // CANCELLED
	fzForced      = int64(6) // UNKNOWN, force-released
	fzRefreshable = int64(7) // COMMITTED, released, refresh due
	fzUnknown     = int64(8) // UNKNOWN, slot held
)

// fuzzFixture builds the fixture through Apply, as a leader would.
func fuzzFixture(tb testing.TB) *harness {
	h := newHarness(tb)
	if id := h.createCatalog("lake", testRoot); id != fzCatalog {
		tb.Fatalf("catalog id %d", id)
	}
	if id := h.createCatalog("empty", "s3://bucket/empty"); id != fzCatalog2 {
		tb.Fatalf("catalog id %d", id)
	}
	if id := h.addBackend("10.0.0.1:9070"); id != fzBackend {
		tb.Fatalf("backend id %d", id)
	}
	if id := h.addBackend("10.0.0.2:9070"); id != fzBackend2 {
		tb.Fatalf("backend id %d", id)
	}
	h.setOption("lance_index_job_max_unresolved_global", "1000")
	for i := int64(1); i <= fzUnknown; i++ {
		if id := h.admit(fzCatalog, "db", fmt.Sprintf("t%d", i), fmt.Sprintf("idx%d", i)); id != i {
			tb.Fatalf("job id %d, want %d", id, i)
		}
	}
	for _, id := range []int64{fzRunning, fzCommitted, fzHeld, fzForced, fzRefreshable, fzUnknown} {
		h.run(id, fzBackend)
	}
	for _, id := range []int64{fzForced, fzUnknown} {
		wantItem(tb, h.complete(completion(h.job(id), job.NoTrustedResult, false)), journal.TApplyCode_OK)
	}
	for _, id := range []int64{fzCommitted, fzHeld, fzRefreshable} {
		wantItem(tb, h.complete(completion(h.job(id), job.NativeOK, true)), journal.TApplyCode_OK)
	}
	for _, id := range []int64{fzCommitted, fzRefreshable} {
		wantItem(tb, h.proof(proofCmd(h.job(id), job.ProofChildReaped)), journal.TApplyCode_OK)
	}
	wantCode(tb, h.cancel(fzCancelled), journal.TApplyCode_OK)
	wantCode(tb, h.forceRelease(fzForced, "stuck"), journal.TApplyCode_OK)
	return h
}

// fuzzApplySeeds are the seed entries: a valid encoding of every command
// type against the fixture (most of them applicable), and malformed ones.
func fuzzApplySeeds(tb testing.TB) map[string][]byte {
	h := fuzzFixture(tb)
	enc := func(ct CommandType, cmd thrift.TStruct) []byte {
		b, err := Encode(ct, cmd)
		if err != nil {
			tb.Fatalf("encode %d: %v", ct, err)
		}
		return b
	}
	now := h.now + 1000
	admit := newJob(fzCatalog, testRoot, "db", "fresh", "new_idx", job.Create)
	drop := newJob(fzCatalog, testRoot, "db", "t5", "idx5", job.Drop)
	running, held := h.job(fzRunning), h.job(fzHeld)
	pending, refreshable := h.job(fzPending), h.job(fzRefreshable)
	seeds := map[string][]byte{
		"admit":      enc(CmdAdmit, &journal.TAdmitCommand{NowMs: now, Job: RecordToThrift(admit)}),
		"admit-drop": enc(CmdAdmit, &journal.TAdmitCommand{NowMs: now, Job: RecordToThrift(drop)}),
		"admit-batch": enc(CmdAdmitBatch, &journal.TAdmitBatch{NowMs: now, Jobs: []*journal.TJobRecord{
			RecordToThrift(admit), RecordToThrift(newJob(fzCatalog, testRoot, "db", "fresh", "other_idx", job.Replace))}}),
		"mark-running": enc(CmdMarkRunningBatch, &journal.TMarkRunningBatch{NowMs: now,
			Jobs: []*journal.TMarkRunning{markCmd(pending, fzBackend2)}}),
		"complete": enc(CmdCompleteBatch, &journal.TCompleteBatch{NowMs: now,
			Completions: []*journal.TCompletion{completion(running, job.NativeOK, true)}}),
		"complete-never-enqueued": enc(CmdCompleteBatch, &journal.TCompleteBatch{NowMs: now, Completions: []*journal.TCompletion{
			func() *journal.TCompletion {
				c := completion(running, job.PreInvocationResourceRejected, false)
				c.NeverEnqueued = thrift.BoolPtr(true)
				return c
			}()}}),
		"proof": enc(CmdRecordProofBatch, &journal.TRecordProofBatch{NowMs: now,
			Proofs: []*journal.TProof{proofCmd(held, job.ProofChildReaped)}}),
		"report": enc(CmdReportBatch, &journal.TReportBatch{NowMs: now, Reports: []*journal.TReportItem{
			{Proof: proofCmd(held, job.ProofChildReaped), Completion: completion(running, job.NativeOK, true)},
			{Proof: proofCmd(held, job.ProofChildReaped)}, {}}}),
		"member-address": enc(CmdSetMemberAddress, &journal.TMemberAddressCommand{NowMs: now, NodeID: "m4", RPCAddress: "10.0.0.4:9090"}),
		"member-forget":  enc(CmdSetMemberAddress, &journal.TMemberAddressCommand{NowMs: now, NodeID: "m4"}),
		"cluster-id":     enc(CmdSetClusterID, &journal.TClusterIDCommand{NowMs: now, ClusterID: "c-1f2e3d4c"}),
		"refresh": enc(CmdRefreshBatch, &journal.TRefreshBatch{NowMs: now, Transitions: []*journal.TRefreshTransition{
			{JobID: refreshable.JobID, ExpectedRev: refreshable.Rev, ToState: journal.TRefreshState(job.RefreshRunning)}}}),
		"cancel":        enc(CmdCancel, &journal.TCancelCommand{NowMs: now, JobID: fzPending, Actor: "ops"}),
		"force-release": enc(CmdForceRelease, &journal.TForceReleaseCommand{NowMs: now, JobID: fzUnknown, Actor: "ops", Note: "n", Warning: "w"}),
		"gc":            enc(CmdGC, &journal.TGCCommand{NowMs: now, CutoffMs: now, JobIds: []int64{fzCommitted, fzCancelled, 99}}),
		"create-catalog": enc(CmdCreateCatalog, &journal.TCatalogCommand{NowMs: now,
			Catalog: &journal.TCatalogRecord{Name: "c2", RootURI: thrift.StringPtr("/data/c2"), CredentialsRef: thrift.StringPtr("creds")}}),
		"update-catalog": enc(CmdUpdateCatalog, &journal.TCatalogCommand{NowMs: now,
			Catalog: &journal.TCatalogRecord{Name: "lake", CredentialsRef: thrift.StringPtr("rotated")}}),
		"remove-catalog": enc(CmdRemoveCatalog, &journal.TRemoveCatalogCommand{NowMs: now, Name: "empty"}),
		"add-backend":    enc(CmdAddBackend, &journal.TBackendCommand{NowMs: now, Address: "10.0.0.3:9070"}),
		"remove-backend": enc(CmdRemoveBackend, &journal.TRemoveBackendCommand{NowMs: now, BackendID: fzBackend2}),
		"drain-backend":  enc(CmdDrainBackend, &journal.TDrainBackendCommand{NowMs: now, BackendID: fzBackend2, Drained: true, Actor: thrift.StringPtr("ops")}),
		"set-option":     enc(CmdSetOption, &journal.TSetOptionCommand{NowMs: now, Key: "lance_index_job_max_dispatch_per_round", Value: "7"}),
		"audit": enc(CmdAudit, &journal.TAuditCommand{NowMs: now, Kind: AuditRaftAddVoter, Subject: "m4",
			Actor: &journal.TAuditActor{Actor: "alice", Claimed: thrift.StringPtr("bob"), Verified: thrift.BoolPtr(true)}}),
		"set-option-audited": enc(CmdSetOption, &journal.TSetOptionCommand{NowMs: now, Key: "audit_retention_count", Value: "2",
			Audit: &journal.TAuditActor{Actor: "alice"}}),
		// Malformed: nothing, an unknown type, an unknown ignorable type, a
		// known type with a truncated or empty body, a body of another type.
		"empty":             {},
		"unknown-type":      {0x7f, 0x15, 0x02, 0x00},
		"ignorable-unknown": {byte(IgnorableFlag | 0x3f), 1, 2, 3},
		"type-only":         {byte(CmdAdmit)},
		"stop-only":         {byte(CmdSetOption), 0x00},
	}
	whole := seeds["admit"]
	seeds["truncated-admit"] = whole[:len(whole)/2]
	swapped := bytes.Clone(seeds["set-option"])
	swapped[0] = byte(CmdCancel)
	seeds["wrong-type"] = swapped
	return seeds
}

// TestWriteFuzzApplySeeds (re)writes the committed seed corpus when
// LANCEMASTER_WRITE_FUZZ_SEEDS=1; either way it checks the seeds: the
// malformed ones fail CheckCommand, the others pass it, and every command
// type has one.
func TestWriteFuzzApplySeeds(t *testing.T) {
	seeds := fuzzApplySeeds(t)
	malformed := map[string]bool{"empty": true, "unknown-type": true, "ignorable-unknown": true, "type-only": true,
		"stop-only": true, "truncated-admit": true, "wrong-type": true}
	types := map[CommandType]bool{}
	for name, data := range seeds {
		err := CheckCommand(data)
		if malformed[name] != (err != nil) {
			t.Errorf("seed %s: CheckCommand = %v", name, err)
		}
		if err == nil {
			types[CommandType(data[0])] = true
		}
	}
	for ct := range registry {
		if !types[ct] {
			t.Errorf("no seed for command type %d", ct)
		}
	}
	if os.Getenv("LANCEMASTER_WRITE_FUZZ_SEEDS") != "1" {
		return
	}
	writeFuzzCorpus(t, "FuzzApply", seeds)
}

// writeFuzzCorpus writes one []byte corpus file per seed, in the format go
// test -fuzz reads.
func writeFuzzCorpus(t *testing.T, target string, seeds map[string][]byte) {
	t.Helper()
	dir := filepath.Join("testdata", "fuzz", target)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range seeds {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
