package main

import (
	"strings"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
)

// list-peers' VERSION is each member's own answer, as raft health asks it:
// a member that did not answer shows "?", and the command still succeeds.
func TestListPeersShowsEveryMembersVersion(t *testing.T) {
	t.Parallel()
	peer := func(id string) *adminapi.TRaftPeer {
		return &adminapi.TRaftPeer{ID: id, RaftAddress: id + ":7202", Suffrage: thrift.StringPtr("Voter")}
	}
	h := &healthMaster{
		fakeMaster: &fakeMaster{peers: &adminapi.TRaftPeersResponse{Peers: []*adminapi.TRaftPeer{peer("m1"), peer("m2"), peer("m3")},
			LeaderID: thrift.StringPtr("m1")}},
		health: &adminapi.TRaftHealthResponse{Members: []*adminapi.TRaftMemberHealth{
			{ID: "m1", Reachable: true, Status: &adminapi.TRaftMemberStatus{NodeID: "m1", Version: thrift.StringPtr("v1.4.0 (abc)")}},
			{ID: "m2", Reachable: false, Error: thrift.StringPtr("i/o timeout")},
		}},
	}
	addr := serve(t, h)
	out := mustOK(t)(cli(t, addr, "operator", "raft", "list-peers"))
	for _, want := range []string{"LAST CONTACT  VERSION\n", "m1  m1:7202       -            Voter     *       -       -             v1.4.0 (abc)\n",
		"m2  m2:7202       -            Voter             -       -             ?\n", "m3  m3:7202       -            Voter             -       -             ?\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("list-peers lacks %q:\n%s", want, out)
		}
	}
	calls := h.recordedCalls()
	if len(calls) != 2 || calls[0].method != "ListPeers" || calls[1].method != "RaftHealth" {
		t.Errorf("calls %+v", calls)
	}
	// -o json is the configuration as the master answers it: no second call.
	mustOK(t)(cli(t, addr, "-o", "json", "operator", "raft", "list-peers"))
	if calls := h.recordedCalls(); len(calls) != 3 {
		t.Errorf("-o json asked for versions: %+v", calls)
	}
}
