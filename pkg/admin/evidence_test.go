package admin

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/options"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
	"github.com/lancemaster/lancemaster/pkg/raftfsm/raftfsmtest"
)

// apply writes a command straight through the harness's proposer and wants OK.
func (h *harness) apply(ct raftfsm.CommandType, cmd thrift.TStruct) *journal.TApplyResponse {
	h.t.Helper()
	data, err := raftfsm.Encode(ct, cmd)
	if err != nil {
		h.t.Fatal(err)
	}
	resp, err := h.prop.Propose(context.Background(), data)
	if err != nil || resp.Code != journal.TApplyCode_OK {
		h.t.Fatalf("command %d: %v %v", ct, resp, err)
	}
	for _, it := range resp.Items {
		if it.Code != journal.TApplyCode_OK {
			h.t.Fatalf("command %d item: %v %q", ct, it.Code, it.GetMessage())
		}
	}
	return resp
}

// resolvingJob admits a job, dispatches it, records an announced uuid and
// phase, and ends its worker without a result: RESOLVING.
func (h *harness) resolvingJob() int64 {
	h.t.Helper()
	resp, err := h.srv.CreateIndex(context.Background(), createReq("items", "v", "vector", "IVF_PQ"))
	if err != nil {
		h.t.Fatal(err)
	}
	id := resp.GetJobID()
	rec, _ := h.fsm.State().Job(id)
	h.apply(raftfsm.CmdMarkRunningBatch, &journal.TMarkRunningBatch{NowMs: 1_700_000_001_000, Jobs: []*journal.TMarkRunning{{
		JobID: id, ExpectedRev: rec.Rev, BackendID: 1, ProcessEpoch: 9, InvocationID: "inv-1",
		InvocationSecret: "s3cr3t", DeadlineMs: 1_700_003_600_000, LeaderTerm: 2}}})
	h.apply(raftfsm.CmdReportBatch, &journal.TReportBatch{NowMs: 1_700_000_002_000, Reports: []*journal.TReportItem{{
		Progress: &journal.TProgress{JobID: id, DispatchRevision: 1, InvocationID: "inv-1", ProcessEpoch: 9,
			IndexUUID: thrift.StringPtr("0f8e2a4c-1b3d-4e5f-8a9b-0c1d2e3f4a5b"), Phase: thrift.StringPtr("training")}}}})
	h.apply(raftfsm.CmdReportBatch, &journal.TReportBatch{NowMs: 1_700_000_003_000, Reports: []*journal.TReportItem{{
		Proof: &journal.TProof{JobID: id, DispatchRevision: 1, InvocationID: "inv-1", ProcessEpoch: 9, BackendID: 1,
			Proof: journal.TTerminationProof_CHILD_REAPED, FinishedWithoutResult_: thrift.BoolPtr(true),
			Message: thrift.StringPtr("killed by the memory limit"), ResolveAfterMs: thrift.Int64Ptr(1_700_000_033_000)}}}})
	return id
}

// jobs show / list carry the evidence fields of §13, and RESOLVING is a
// state to filter on.
func TestJobViewCarriesTheEvidence(t *testing.T) {
	h := newHarness(t)
	id := h.resolvingJob()
	ctx := context.Background()
	v, err := h.srv.ShowJob(ctx, id, false)
	if err != nil {
		t.Fatal(err)
	}
	if v.GetMutationState() != "RESOLVING" || v.GetIndexUUID() != "0f8e2a4c-1b3d-4e5f-8a9b-0c1d2e3f4a5b" ||
		v.GetBuildPhase() != "training" || v.GetTerminationMessage() != "killed by the memory limit" ||
		v.GetResolveAfterMs() != 1_700_000_033_000 || !v.GetUnresolved() || v.GetHoldsSlot() {
		t.Fatalf("view %+v", v)
	}
	if v.IsSetDispatchAttempts() || v.IsSetAdmittedIndexUUID() {
		t.Fatalf("unset evidence shown: %+v", v)
	}
	list, err := h.srv.ListJobs(ctx, &adminapi.TListJobsRequest{State: thrift.StringPtr("resolving")})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Jobs) != 1 || list.Jobs[0].JobID != id {
		t.Fatalf("list --state RESOLVING = %+v", list.Jobs)
	}
	running, err := h.srv.ListJobs(ctx, &adminapi.TListJobsRequest{State: thrift.StringPtr("RUNNING")})
	if err != nil || len(running.Jobs) != 0 {
		t.Fatalf("list --state RUNNING = %+v, %v", running, err)
	}
}

// Item 11: after an operator restore the dispatcher is paused and the
// cluster keeps its own cluster id (the file's is replaced), both
// journaled by the restoring leader before it hands leadership over.
func TestRestoreLeavesTheDispatcherPausedAndKeepsTheClusterID(t *testing.T) {
	ctx := context.Background()
	// The file: another history, its own cluster id, the dispatcher running.
	file := raftfsm.New(nil)
	fp := &raftfsmtest.Proposer{FSM: file}
	for _, c := range []struct {
		t   raftfsm.CommandType
		cmd thrift.TStruct
	}{
		{raftfsm.CmdSetClusterID, &journal.TClusterIDCommand{NowMs: 1, ClusterID: "file-cluster"}},
		{raftfsm.CmdSetOption, &journal.TSetOptionCommand{NowMs: 1, Key: options.OptDispatcherPaused, Value: "false"}},
	} {
		data, _ := raftfsm.Encode(c.t, c.cmd)
		if resp, err := fp.Propose(ctx, data); err != nil || resp.Code != journal.TApplyCode_OK {
			t.Fatalf("file fixture: %v %v", resp, err)
		}
	}
	var snap bytes.Buffer
	if err := file.State().WriteSnapshot(&snap); err != nil {
		t.Fatal(err)
	}

	cl := &opsCluster{restoreFile: snap.Bytes()}
	s := newOpsServer(t, cl, true)
	fsm := s.d.Reader.(*raftfsm.FSM)
	cl.restoreInto = fsm
	data, _ := raftfsm.Encode(raftfsm.CmdSetClusterID, &journal.TClusterIDCommand{NowMs: 1, ClusterID: "live-cluster"})
	if _, err := cl.ApplyLocal(ctx, data); err != nil {
		t.Fatal(err)
	}
	// The local dispatcher is held from before the restore until the pause
	// is journaled: no round dispatches from the restored state meanwhile.
	holds, released := 0, 0
	s.d.HoldDispatch = func() func() {
		holds++
		if got := fsm.State().ClusterID(); got != "live-cluster" {
			t.Errorf("held after the restore (cluster id %q)", got)
		}
		return func() {
			released++
			if !fsm.State().Options().DispatcherPaused {
				t.Error("the hold was released before the pause was journaled")
			}
		}
	}

	tr, err := s.BeginSnapshotRestore(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.WriteSnapshotChunk(ctx, &adminapi.TSnapshotChunk{TransferID: tr.TransferID, Data: []byte("abc")}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.FinishSnapshotRestore(ctx, tr.TransferID, ""); err != nil {
		t.Fatal(err)
	}
	st := fsm.State()
	if got := st.ClusterID(); got != "live-cluster" {
		t.Fatalf("cluster id after the restore = %q, want the pre-restore live-cluster", got)
	}
	if !st.Options().DispatcherPaused {
		t.Fatal("the dispatcher is not paused after the restore")
	}
	if holds != 1 || released != 1 {
		t.Fatalf("dispatch held %d times, released %d", holds, released)
	}
}

// A restore whose pause could not be journaled says so: the operator must
// pause by hand before anything is dispatched.
func TestRestoreWithoutThePauseSaysSo(t *testing.T) {
	ctx := context.Background()
	cl := &opsCluster{applyErr: errors.New("cluster: apply on m1: not the leader")}
	s := newOpsServer(t, cl, true)
	tr, err := s.BeginSnapshotRestore(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.WriteSnapshotChunk(ctx, &adminapi.TSnapshotChunk{TransferID: tr.TransferID, Data: []byte("abc")}); err != nil {
		t.Fatal(err)
	}
	_, err = s.FinishSnapshotRestore(ctx, tr.TransferID, "")
	if errCode(t, err) != adminapi.TErrorCode_UNAVAILABLE ||
		!strings.Contains(err.Error(), "config set lance_index_job_dispatcher_paused true") ||
		!strings.Contains(err.Error(), "was restored") {
		t.Fatalf("err = %v", err)
	}
}
