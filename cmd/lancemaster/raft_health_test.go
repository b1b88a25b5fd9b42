package main

import (
	"context"
	"strings"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
)

// The fake master's health and promote methods (the rest is in
// fake_test.go): healthMaster answers raftHealth.

func (f *fakeMaster) RaftHealth(context.Context) (*adminapi.TRaftHealthResponse, error) {
	return nil, unknownMethod()
}

func (f *fakeMaster) RaftMemberStatus(context.Context) (*adminapi.TRaftMemberStatus, error) {
	return nil, unknownMethod()
}

func (f *fakeMaster) Promote(_ context.Context, r *adminapi.TPromoteRequest) (*adminapi.TRaftPeersResponse, error) {
	return f.peers, f.record("Promote", r)
}

type healthMaster struct {
	*fakeMaster
	health *adminapi.TRaftHealthResponse
}

func (h *healthMaster) RaftHealth(context.Context) (*adminapi.TRaftHealthResponse, error) {
	return h.health, h.record("RaftHealth", nil)
}

func TestRaftHealthTable(t *testing.T) {
	st := func(id, state string, applied int64, age *int64) *adminapi.TRaftMemberStatus {
		return &adminapi.TRaftMemberStatus{NodeID: id, State: &state, Term: thrift.Int64Ptr(4), CommitIndex: thrift.Int64Ptr(120),
			AppliedIndex: &applied, LastContactAgeMs: age, Version: thrift.StringPtr("v1.2.0 (abc)"), HearsLeader: thrift.BoolPtr(true)}
	}
	voter, nonvoter := thrift.StringPtr("Voter"), thrift.StringPtr("Nonvoter")
	h := &healthMaster{fakeMaster: &fakeMaster{}, health: &adminapi.TRaftHealthResponse{
		Members: []*adminapi.TRaftMemberHealth{
			{ID: "m1", Suffrage: voter, Reachable: true, Status: st("m1", "Leader", 120, thrift.Int64Ptr(0)), Lag: thrift.Int64Ptr(0),
				Healthy: thrift.BoolPtr(true), IsLeader: thrift.BoolPtr(true)},
			{ID: "m2", Suffrage: voter, Reachable: true, Status: st("m2", "Follower", 118, thrift.Int64Ptr(35)), Lag: thrift.Int64Ptr(2),
				Healthy: thrift.BoolPtr(true), IsLeader: thrift.BoolPtr(false)},
			{ID: "m3", Suffrage: voter, Reachable: false, Error: thrift.StringPtr("no answer from 10.0.0.3:7201 within 2s: EOF"),
				Healthy: thrift.BoolPtr(false), LeaderContact: thrift.StringPtr("unreachable")},
			{ID: "m4", Suffrage: nonvoter, Reachable: true, Status: st("m4", "Follower", 20, thrift.Int64Ptr(1500)), Lag: thrift.Int64Ptr(100),
				Healthy: thrift.BoolPtr(true)},
		},
		LeaderID: thrift.StringPtr("m1"), AnsweredBy: thrift.StringPtr("m2"), Voters: thrift.Int32Ptr(3), Quorum: thrift.Int32Ptr(2),
		HealthyVoters: thrift.Int32Ptr(2), FailureTolerance: thrift.Int32Ptr(0), Healthy: thrift.BoolPtr(true),
	}}
	addr := serve(t, h)
	out, errOut, code := cli(t, addr, "operator", "raft", "health")
	out = mustOK(t)(out, errOut, code)
	want := "" +
		"ID  SUFFRAGE  LEADER  REACHABLE  HEALTHY  STATE     TERM  LAST CONTACT  COMMIT  APPLIED  LAG  VERSION\n" +
		"m1  Voter     *       yes        yes      Leader    4     0s            120     120      0    v1.2.0 (abc)\n" +
		"m2  Voter             yes        yes      Follower  4     35ms          120     118      2    v1.2.0 (abc)\n" +
		"m3  Voter             no         no       -         -     -             -       -        -    -\n" +
		"m4  Nonvoter          yes        yes      Follower  4     1.5s          120     20       100  v1.2.0 (abc)\n" +
		"\nfailure tolerance 0 (3 voters, quorum 2, 2 healthy), leader m1, as seen by m2\n"
	if out != want {
		t.Errorf("stdout =\n%s\nwant\n%s", out, want)
	}
	if errOut != "warning: m3 is unreachable: no answer from 10.0.0.3:7201 within 2s: EOF\n" {
		t.Errorf("stderr = %q", errOut)
	}
	out = mustOK(t)(cli(t, addr, "-o", "json", "operator", "raft", "health"))
	for _, s := range []string{`"failure_tolerance": 0`, `"reachable": false`, `"applied_index": 118`, `"answered_by": "m2"`} {
		if !strings.Contains(out, s) {
			t.Errorf("json lacks %s:\n%s", s, out)
		}
	}

	// Quorum lost says so.
	h.health.HealthyVoters, h.health.Healthy = thrift.Int32Ptr(1), thrift.BoolPtr(false)
	out = mustOK(t)(cli(t, addr, "operator", "raft", "health"))
	if !strings.HasSuffix(out, "\nQUORUM LOST: 1 of 3 voters healthy, quorum 2, leader m1, as seen by m2\n") {
		t.Errorf("stdout = %s", out)
	}
}

func TestAddNonVoterAndPromote(t *testing.T) {
	f := &fakeMaster{peers: &adminapi.TRaftPeersResponse{Peers: []*adminapi.TRaftPeer{
		{ID: "m4", RaftAddress: "10.0.0.4:7000", Suffrage: thrift.StringPtr("Voter")}}}}
	addr := serve(t, f)
	mustOK(t)(cli(t, addr, "operator", "raft", "add-voter", "m4", "10.0.0.4:7000", "--rpc-address", "10.0.0.4:9090", "--non-voter"))
	req := f.onlyCall(t, "AddVoter").(*adminapi.TAddVoterRequest)
	if req.ID != "m4" || !req.GetNonVoter() || req.GetRPCAddress() != "10.0.0.4:9090" {
		t.Fatalf("request %+v", req)
	}

	f = &fakeMaster{peers: f.peers}
	addr = serve(t, f)
	out := mustOK(t)(cli(t, addr, "operator", "raft", "promote", "m4"))
	if r := f.onlyCall(t, "Promote").(*adminapi.TPromoteRequest); r.ID != "m4" || !strings.Contains(out, "m4") {
		t.Fatalf("request %+v, stdout %s", r, out)
	}
	// Without the flag it is a voter; an empty id is a usage error.
	f = &fakeMaster{peers: f.peers}
	addr = serve(t, f)
	mustOK(t)(cli(t, addr, "operator", "raft", "add-voter", "m4", "10.0.0.4:7000"))
	if r := f.onlyCall(t, "AddVoter").(*adminapi.TAddVoterRequest); r.IsSetNonVoter() {
		t.Fatalf("non_voter set without the flag: %+v", r)
	}
	if _, _, code := cli(t, addr, "operator", "raft", "promote", " "); code != exitUsage {
		t.Fatalf("promote ' ' exit %d", code)
	}

	// A refusal keeps its code.
	f = &fakeMaster{err: &adminapi.TAdminError{Code: adminapi.TErrorCode_UNAVAILABLE, Message: `"m4" is not promoted: it is 300 entries behind`}}
	addr = serve(t, f)
	_, errOut, code := cli(t, addr, "operator", "raft", "promote", "m4")
	if code != exitError || !strings.Contains(errOut, "UNAVAILABLE: \"m4\" is not promoted") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}
