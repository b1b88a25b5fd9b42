package admin

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// dispatched admits a BTREE job on db.<table> and marks it RUNNING on the
// harness's backend at now_ms 1234.
func (h *harness) dispatched(table string) *job.Record {
	h.t.Helper()
	if table != "items" {
		h.setDataset("/data/lake/db/"+table+".lance", 3)
	}
	resp, err := h.srv.CreateIndex(context.Background(), createReq(table, "ix", "id", "BTREE"))
	if err != nil {
		h.t.Fatal(err)
	}
	r, _ := h.fsm.State().Job(resp.GetJobID())
	b, _ := h.fsm.State().BackendByAddress(h.backend.Addr())
	h.apply(raftfsm.CmdMarkRunningBatch, &journal.TMarkRunningBatch{NowMs: 1234, Jobs: []*journal.TMarkRunning{{
		JobID: r.JobID, ExpectedRev: r.Rev, BackendID: b.ID, ProcessEpoch: 9, InvocationID: "inv-logs-" + table,
		InvocationSecret: "sec-logs-1", DeadlineMs: 1_800_000_000_000, LeaderTerm: 1}}})
	r, _ = h.fsm.State().Job(r.JobID)
	return r
}

// The leader asks the backend of the job's dispatch (with the cluster id
// and its term) and answers its log; when the backend cannot answer, the
// journal's tail with a note; with neither, source none.
func TestJobLogsBackendThenJournal(t *testing.T) {
	h := newHarness(t)
	rec := h.dispatched("items")
	var mu sync.Mutex
	var asked []*wire.TJobLogRequest
	h.backend.SetJobLogHook(func(r *wire.TJobLogRequest) *wire.TJobLogResponse {
		mu.Lock()
		asked = append(asked, r)
		mu.Unlock()
		running := wire.TLanceInvocationState_RUNNING
		return &wire.TJobLogResponse{Status: &wire.TStatus{StatusCode: wire.TStatusCode_OK}, State: &running,
			Log: thrift.StringPtr("line 1\nline 2 " + canarySecret + "\n"), Truncated: thrift.BoolPtr(false),
			Phase: thrift.StringPtr("shuffling"), ElapsedMs: thrift.Int64Ptr(900)}
	})
	ctx := context.Background()
	got, err := h.srv.JobLogs(ctx, rec.JobID, 0)
	// The catalog's credential is removed again, even if the backend failed to.
	if err != nil || got.Source != LogSourceBackend || got.Log != "line 1\nline 2 [redacted]\n" || got.GetPhase() != "shuffling" ||
		got.GetElapsedMs() != 900 || got.IsSetNote() {
		t.Fatalf("backend: %+v %v", got, err)
	}
	mu.Lock()
	if len(asked) != 1 || asked[0].InvocationID != "inv-logs-items" || asked[0].GetLeaderTerm() != 1 || asked[0].GetMaxBytes() != MaxJobLogBytes ||
		asked[0].GetClusterID() != h.fsm.State().ClusterID() {
		t.Fatalf("asked %+v", asked)
	}
	mu.Unlock()

	// The backend no longer holds it: the journal's tail.
	h.backend.SetJobLogHook(func(r *wire.TJobLogRequest) *wire.TJobLogResponse {
		forgotten := wire.TLanceInvocationState_FORGOTTEN
		return &wire.TJobLogResponse{Status: &wire.TStatus{StatusCode: wire.TStatusCode_OK}, State: &forgotten}
	})
	c := &journal.TCompletion{JobID: rec.JobID, DispatchRevision: rec.DispatchRevision, InvocationID: rec.InvocationID,
		ProcessEpoch: rec.ProcessEpoch, Result_: &journal.TJobResult_{Code: ptrCode(job.NativeOK)},
		LogTail: thrift.StringPtr("kept tail\n")}
	h.apply(raftfsm.CmdCompleteBatch, &journal.TCompleteBatch{NowMs: 2000, Completions: []*journal.TCompletion{c}})
	got, err = h.srv.JobLogs(ctx, rec.JobID, 4)
	if err != nil || got.Source != LogSourceJournal || got.Log != "ail\n" || !got.GetTruncated() ||
		!strings.Contains(got.GetNote(), "no longer holds the invocation (FORGOTTEN)") {
		t.Fatalf("journal: %+v %v", got, err)
	}

	// An older backend (NOT_IMPLEMENTED) and no tail: none.
	h.backend.SetJobLogHook(nil)
	rec2 := h.dispatched("more")
	got, err = h.srv.JobLogs(ctx, rec2.JobID, 0)
	if err != nil || got.Source != LogSourceNone || got.Log != "" || !strings.Contains(got.GetNote(), "older version") {
		t.Fatalf("none: %+v %v", got, err)
	}
}

func ptrCode(c job.ResultCode) *journal.TResultCode { v := journal.TResultCode(c); return &v }

// Bad input is a typed error; a job never dispatched has no log.
func TestJobLogsInputs(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	for _, n := range []int32{-1, MaxJobLogBytes + 1} {
		if _, err := h.srv.JobLogs(ctx, 1, n); errCode(t, err) != adminapi.TErrorCode_INVALID {
			t.Fatalf("max bytes %d: %v", n, err)
		}
	}
	if _, err := h.srv.JobLogs(ctx, 99, 0); errCode(t, err) != adminapi.TErrorCode_NOT_FOUND {
		t.Fatalf("unknown job: %v", err)
	}
	resp, _ := h.srv.CreateIndex(ctx, createReq("items", "ix", "id", "BTREE"))
	got, err := h.srv.JobLogs(ctx, resp.GetJobID(), 0)
	if err != nil || got.Source != LogSourceNone || !strings.Contains(got.GetNote(), "not been dispatched") {
		t.Fatalf("%+v %v", got, err)
	}
}

// jobs show's view carries the build fields (TJobView 47-55).
func TestViewCarriesBuildInfo(t *testing.T) {
	h := newHarness(t)
	rec := h.dispatched("items")
	h.apply(raftfsm.CmdReportBatch, &journal.TReportBatch{NowMs: 1500, Reports: []*journal.TReportItem{{Progress: &journal.TProgress{
		JobID: rec.JobID, DispatchRevision: rec.DispatchRevision, InvocationID: rec.InvocationID, ProcessEpoch: rec.ProcessEpoch,
		IndexUUID: thrift.StringPtr("0b5d6f9e-3c1a-4e2b-9f7d-1a2b3c4d5e6f"), Phase: thrift.StringPtr("merging"), ElapsedMs: thrift.Int64Ptr(0)}}}})
	c := &journal.TCompletion{JobID: rec.JobID, DispatchRevision: rec.DispatchRevision, InvocationID: rec.InvocationID,
		ProcessEpoch: rec.ProcessEpoch, Result_: &journal.TJobResult_{Code: ptrCode(job.NativeCommitConflict)},
		Resources: raftfsm.ResourcesToThrift(&job.Resources{StartTimeMs: 1300, FinishTimeMs: 1900, WallMs: 550, PeakMemoryBytes: 64 << 20,
			PeakMemorySource: job.PeakFromRusage})}
	h.apply(raftfsm.CmdCompleteBatch, &journal.TCompleteBatch{NowMs: 2000, Completions: []*journal.TCompletion{c}})
	v, err := h.srv.ShowJob(context.Background(), rec.JobID, false)
	if err != nil {
		t.Fatal(err)
	}
	if v.GetLeftoverIndexUUID() != "0b5d6f9e-3c1a-4e2b-9f7d-1a2b3c4d5e6f" || v.GetDispatchTimeMs() != 1234 || v.GetStartTimeMs() != 1300 ||
		v.GetFinishTimeMs() != 1900 || v.GetWallMs() != 550 || v.GetPeakMemoryBytes() != 64<<20 || v.GetPeakMemorySource() != "rusage" ||
		!v.IsSetBuildElapsedMs() || v.GetBuildElapsedMs() != 0 || v.GetProgressTimeMs() != 1500 {
		t.Fatalf("%+v", v)
	}
}

// A follower never asks a backend: it forwards to the leader and, when the
// leader cannot be asked, answers from its own journal and says why.
func TestJobLogsOnAFollower(t *testing.T) {
	h := newHarness(t)
	rec := h.dispatched("items")
	var asked atomic.Int32
	h.backend.SetJobLogHook(func(*wire.TJobLogRequest) *wire.TJobLogResponse { asked.Add(1); return nil })
	forwarded := 0
	follower := New(Deps{Proposer: followerProposer{h.prop}, Reader: h.fsm, Cluster: fakeCluster{h.prop},
		Backends: h.srv.d.Backends, Credentials: h.srv.d.Credentials,
		LeaderCall: func(context.Context, string, func(context.Context, *adminapi.LanceMasterServiceClient) error) error {
			forwarded++
			return errors.New("leader unreachable")
		}})
	got, err := follower.JobLogs(context.Background(), rec.JobID, 0)
	if err != nil || got.Source != LogSourceNone || forwarded != 1 || asked.Load() != 0 ||
		!strings.Contains(got.GetNote(), "the leader could not be asked") {
		t.Fatalf("%+v %v (forwarded %d, backend asked %d)", got, err, forwarded, asked.Load())
	}
}
