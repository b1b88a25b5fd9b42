package main

import (
	"strings"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
)

func TestAddressFromEnvironment(t *testing.T) {
	t.Parallel()
	f := &fakeMaster{job: &adminapi.TJobView{JobID: 1}}
	addr := serve(t, f)

	// No --address and no USER: LANCEMASTER_ADDR is used, --as is "operator".
	mustOK(t)(runCLI(t, map[string]string{envAddress: addr}, "jobs", "cancel", "1"))
	if req := f.onlyCall(t, "CancelJob").(*adminapi.TCancelRequest); req.GetActor() != defaultActor {
		t.Errorf("actor = %q, want %q", req.GetActor(), defaultActor)
	}
}

func TestFlagOverridesEnvironment(t *testing.T) {
	t.Parallel()
	f := &fakeMaster{job: &adminapi.TJobView{JobID: 1}}
	addr := serve(t, f)
	env := map[string]string{envAddress: deadAddress(t), "USER": "carol"}

	mustOK(t)(runCLI(t, env, "--address", addr, "jobs", "show", "1"))
	f.onlyCall(t, "ShowJob")
}

func TestFailoverToTheNextAddress(t *testing.T) {
	t.Parallel()
	f := &fakeMaster{admit: &adminapi.TAdmitResponse{JobID: thrift.Int64Ptr(3)}}
	live := serve(t, f)

	out := mustOK(t)(cli(t, deadAddress(t)+", "+live, "jobs", "drop-index", "c.d.t", "i"))
	if out != "job 3 admitted\n" {
		t.Errorf("stdout = %q", out)
	}
	f.onlyCall(t, "DropIndex")
}

func TestFollowsNotLeaderHint(t *testing.T) {
	t.Parallel()
	leader := &fakeMaster{backends: []*adminapi.TBackend{}}
	leaderAddr := serve(t, leader)
	follower := &fakeMaster{err: &adminapi.TAdminError{Code: adminapi.TErrorCode_NOT_LEADER,
		Message: "not the leader", LeaderAddress: thrift.StringPtr(leaderAddr)}}
	followerAddr := serve(t, follower)

	mustOK(t)(cli(t, followerAddr, "backends", "list"))
	follower.onlyCall(t, "ListBackends")
	leader.onlyCall(t, "ListBackends")
}

func TestNoMasterReachable(t *testing.T) {
	t.Parallel()
	a, b := deadAddress(t), deadAddress(t)

	out, errOut, code := cli(t, a+","+b, "jobs", "list")
	if code != exitUnreachable || out != "" {
		t.Fatalf("exit %d, stdout %q", code, out)
	}
	if !strings.HasPrefix(errOut, "Error: UNAVAILABLE: ") || !strings.Contains(errOut, a) || !strings.Contains(errOut, b) {
		t.Errorf("stderr = %q, want UNAVAILABLE and both addresses", errOut)
	}
	if strings.Count(errOut, "\n") != 1 || strings.Contains(errOut, "goroutine") {
		t.Errorf("stderr is not one line: %q", errOut)
	}
}

func TestTimeout(t *testing.T) {
	t.Parallel()
	f := &fakeMaster{block: make(chan struct{}), admit: &adminapi.TAdmitResponse{JobID: thrift.Int64Ptr(1)}}
	addr := serve(t, f)
	t.Cleanup(func() { close(f.block) }) // runs before the server stops

	_, errOut, code := cli(t, addr, "--timeout", "200ms", "jobs", "drop-index", "c.d.t", "i")
	if code != exitUnreachable {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	if !strings.HasPrefix(errOut, "Error: TIMEOUT: ") || !strings.Contains(errOut, addr) ||
		!strings.Contains(errOut, "may have reached a master") {
		t.Errorf("stderr = %q", errOut)
	}
}

func TestApplicationExceptionIsInternal(t *testing.T) {
	t.Parallel()
	addr := serve(t, &fakeMaster{err: thrift.NewTApplicationException(thrift.INTERNAL_ERROR, "handler panicked")})

	_, errOut, code := cli(t, addr, "backends", "list")
	if code != exitError || !strings.HasPrefix(errOut, "Error: INTERNAL: ") {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
}

func TestHelpExitsZero(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{}, {"--help"}, {"jobs"}, {"jobs", "create-index", "--help"}, {"operator", "raft"}} {
		out, errOut, code := runCLI(t, nil, args...)
		if code != exitOK || !strings.Contains(out, "Usage:") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}
}
