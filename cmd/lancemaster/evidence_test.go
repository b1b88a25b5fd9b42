package main

import (
	"strings"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
)

// §13.6: a write whose fate is unknown exits 3 with OUTCOME_UNKNOWN, never
// 1 with INTERNAL.
func TestOutcomeUnknownExits3(t *testing.T) {
	t.Parallel()
	f := &fakeMaster{err: &adminapi.TAdminError{Code: adminapi.TErrorCode_OUTCOME_UNKNOWN,
		Message: "the change may or may not have been applied (the leader changed): check its effect before retrying"}}
	addr := serve(t, f)
	for _, args := range [][]string{
		{"config", "set", "lance_index_job_dispatcher_paused", "true"},
		{"jobs", "create-index", "lake.db.items", "v", "--column", "vector", "--type", "IVF_PQ"},
		{"catalogs", "remove", "lake"},
	} {
		out, errOut, code := cli(t, addr, args...)
		if code != 3 {
			t.Fatalf("%v: exit %d, want 3", args, code)
		}
		if out != "" || !strings.HasPrefix(errOut, "Error: OUTCOME_UNKNOWN: ") || !strings.Contains(errOut, "check its effect") {
			t.Fatalf("%v: stdout %q stderr %q", args, out, errOut)
		}
	}
	// A write provably not applied is an ordinary error answer: exit 1.
	f2 := &fakeMaster{err: &adminapi.TAdminError{Code: adminapi.TErrorCode_UNAVAILABLE,
		Message: "the change was not applied (nothing was written); it is safe to retry"}}
	if _, errOut, code := cli(t, serve(t, f2), "config", "set", "lance_index_job_dispatcher_paused", "true"); code != exitError ||
		!strings.Contains(errOut, "safe to retry") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}

// jobs show prints the evidence of §13; resolve_after is a time.
func TestJobsShowEvidence(t *testing.T) {
	t.Parallel()
	f := &fakeMaster{job: &adminapi.TJobView{
		JobID: 7, MutationState: thrift.StringPtr("RESOLVING"),
		DispatchAttempts:   thrift.Int32Ptr(2),
		IndexUUID:          thrift.StringPtr("0f8e2a4c-1b3d-4e5f-8a9b-0c1d2e3f4a5b"),
		AdmittedIndexUUID:  thrift.StringPtr("11111111-2222-3333-4444-555555555555"),
		TerminationMessage: thrift.StringPtr("killed by the memory limit"),
		BuildPhase:         thrift.StringPtr("training"),
		ResolveAfterMs:     thrift.Int64Ptr(1700000030000),
	}}
	out := mustOK(t)(cli(t, serve(t, f), "jobs", "show", "7"))
	want := "" +
		"job_id:              7\n" +
		"mutation_state:      RESOLVING\n" +
		"dispatch_attempts:   2\n" +
		"index_uuid:          0f8e2a4c-1b3d-4e5f-8a9b-0c1d2e3f4a5b\n" +
		"admitted_index_uuid: 11111111-2222-3333-4444-555555555555\n" +
		"termination_message: killed by the memory limit\n" +
		"build_phase:         training\n" +
		"resolve_after:       2023-11-14T22:13:50.000Z\n"
	if out != want {
		t.Errorf("stdout =\n%s\nwant\n%s", out, want)
	}
}

// jobs list --state RESOLVING is sent as is; --restored lists the RUNNING
// jobs dispatched under another term than the current one.
func TestJobsListRestoredAndResolving(t *testing.T) {
	t.Parallel()
	running := func(id, term int64) *adminapi.TJobView {
		return &adminapi.TJobView{JobID: id, MutationState: thrift.StringPtr("RUNNING"), LeaderTerm: thrift.Int64Ptr(term),
			InvocationID: thrift.StringPtr("inv")}
	}
	f := &fakeMaster{
		pages: map[int64]*adminapi.TListJobsResponse{0: {Jobs: []*adminapi.TJobView{running(1, 3), running(2, 5), running(3, 9)}}},
		peers: &adminapi.TRaftPeersResponse{Peers: []*adminapi.TRaftPeer{}, Term: thrift.Int64Ptr(5)},
	}
	addr := serve(t, f)
	out := mustOK(t)(cli(t, addr, "jobs", "list", "--restored"))
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[1], "1 ") || !strings.HasPrefix(lines[2], "3 ") {
		t.Fatalf("--restored listed:\n%s\nwant jobs 1 and 3 (term 5 is the current one)", out)
	}
	calls := f.recordedCalls()
	if len(calls) != 2 || calls[0].method != "ListPeers" || calls[1].method != "ListJobs" ||
		calls[1].req.(*adminapi.TListJobsRequest).GetState() != "RUNNING" {
		t.Fatalf("calls = %+v", calls)
	}

	if _, errOut, code := cli(t, addr, "jobs", "list", "--restored", "--state", "PENDING"); code != exitUsage ||
		!strings.Contains(errOut, "--restored") {
		t.Fatalf("--restored --state PENDING: exit %d, stderr %q", code, errOut)
	}

	f2 := &fakeMaster{}
	mustOK(t)(cli(t, serve(t, f2), "jobs", "list", "--state", "resolving"))
	if req := f2.onlyCall(t, "ListJobs").(*adminapi.TListJobsRequest); req.GetState() != "RESOLVING" {
		t.Fatalf("state sent = %q", req.GetState())
	}
}
