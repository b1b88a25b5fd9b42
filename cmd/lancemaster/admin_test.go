package main

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
)

func TestCatalogsCreateSendsOnlyGivenFields(t *testing.T) {
	t.Parallel()
	f := &fakeMaster{catalog: &adminapi.TCatalog{CatalogID: thrift.Int64Ptr(4), Name: "lake"}}
	addr := serve(t, f)

	out := mustOK(t)(cli(t, addr, "catalogs", "create", "lake", "--root", "s3://bucket/wh", "--credentials", "lake-s3"))
	if out != "catalog lake created (id 4)\n" {
		t.Errorf("stdout = %q", out)
	}
	got := f.onlyCall(t, "CreateCatalog").(*adminapi.TCatalog)
	want := &adminapi.TCatalog{Name: "lake", RootURI: thrift.StringPtr("s3://bucket/wh"), CredentialsRef: thrift.StringPtr("lake-s3")}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("request = %s", got)
	}
}

func TestCatalogsUpdateSendsOnlyChangedFlags(t *testing.T) {
	t.Parallel()
	f := &fakeMaster{catalog: &adminapi.TCatalog{CatalogID: thrift.Int64Ptr(4), Name: "lake"}}
	addr := serve(t, f)

	// An explicit empty value is a change (it clears the field).
	out := mustOK(t)(cli(t, addr, "catalogs", "update", "lake", "--refresh", "WEBHOOK", "--refresh-url", "http://h/r", "--credentials", ""))
	if out != "catalog lake updated (id 4)\n" {
		t.Errorf("stdout = %q", out)
	}
	got := f.onlyCall(t, "UpdateCatalog").(*adminapi.TUpdateCatalogRequest)
	want := &adminapi.TUpdateCatalogRequest{Name: "lake", CredentialsRef: thrift.StringPtr(""),
		RefreshKind: thrift.StringPtr("webhook"), RefreshURL: thrift.StringPtr("http://h/r"), Actor: thrift.StringPtr("alice")}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("request = %s\nwant      %s", got, want)
	}
}

func TestCatalogsListAndRemove(t *testing.T) {
	t.Parallel()
	f := &fakeMaster{catalogs: []*adminapi.TCatalog{{
		CatalogID: thrift.Int64Ptr(1), Name: "lake", Provider: thrift.StringPtr("DIRECTORY"),
		RootURI: thrift.StringPtr("/data/lance"), RefreshKind: thrift.StringPtr("none"),
		UnresolvedJobs: thrift.Int32Ptr(2), UpdateTimeMs: thrift.Int64Ptr(1700000000000),
	}}}
	addr := serve(t, f)

	out := mustOK(t)(cli(t, addr, "catalogs", "list"))
	want := "" +
		"ID  NAME  PROVIDER   ROOT         CREDENTIALS  REFRESH  REFRESH TARGET  OPTIMIZE  UNRESOLVED  UPDATED\n" +
		"1   lake  DIRECTORY  /data/lance  -            none     -               off       2           3h25m\n"
	if out != want {
		t.Errorf("stdout =\n%s\nwant\n%s", out, want)
	}
	out = mustOK(t)(cli(t, addr, "-o", "json", "catalogs", "list"))
	if !strings.Contains(out, `"root_uri": "/data/lance"`) || !strings.Contains(out, `"unresolved_jobs": 2`) {
		t.Errorf("json = %s", out)
	}
	out = mustOK(t)(cli(t, addr, "catalogs", "remove", "lake"))
	if out != "catalog lake removed\n" {
		t.Errorf("stdout = %q", out)
	}
	if c := f.recordedCalls(); c[len(c)-1] != (recorded{"RemoveCatalog", "lake", "alice"}) {
		t.Errorf("last call = %+v", c[len(c)-1])
	}
}

func TestBackends(t *testing.T) {
	t.Parallel()
	f := &fakeMaster{
		backend: &adminapi.TBackend{BackendID: 3, Address: "10.0.0.21:7301"},
		backends: []*adminapi.TBackend{
			{BackendID: 3, Address: "10.0.0.21:7301", Alive: thrift.BoolPtr(true), ProcessEpoch: thrift.Int64Ptr(1700000000000000000), HeldSlots: thrift.Int32Ptr(1),
				LastHeardMs: thrift.Int64Ptr(1700000000000), Version: thrift.StringPtr("v0.3.0 (d4eb1c96e706)")},
			{BackendID: 4, Address: "10.0.0.22:7301", HeldSlots: thrift.Int32Ptr(0), Drained: thrift.BoolPtr(true)},
			{BackendID: 5, Address: "127.0.0.1:22003", Alive: thrift.BoolPtr(false), HeldSlots: thrift.Int32Ptr(0)},
		},
	}
	addr := serve(t, f)

	if out := mustOK(t)(cli(t, addr, "backends", "add", "10.0.0.21:7301")); out != "backend 3 added (10.0.0.21:7301)\n" {
		t.Errorf("add stdout = %q", out)
	}
	out := mustOK(t)(cli(t, addr, "backends", "list"))
	want := "" +
		"ID  ADDRESS          ALIVE  EPOCH                LAST HEARD  HELD SLOTS  DRAINED  VERSION\n" +
		"3   10.0.0.21:7301   yes    1700000000000000000  3h25m       1           no       v0.3.0 (d4eb1c96e706)\n" +
		"4   10.0.0.22:7301   -      -                    -           0           yes      -\n" +
		"5   127.0.0.1:22003  no     -                    never       0           no       -\n"
	if out != want {
		t.Errorf("list stdout =\n%s\nwant\n%s", out, want)
	}
	out = mustOK(t)(cli(t, addr, "-o", "json", "backends", "list"))
	var got []map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil || len(got) != 3 {
		t.Fatalf("json = %s (%v)", out, err)
	}
	if _, ok := got[1]["alive"]; ok || got[0]["alive"] != true || got[0]["held_slots"] != 1.0 || got[2]["alive"] != false {
		t.Errorf("json = %v", got)
	}
	mustOK(t)(cli(t, addr, "backends", "remove", "4"))
	mustOK(t)(cli(t, addr, "backends", "remove", "10.0.0.21:7301"))
	calls := f.recordedCalls()
	wantCalls := []recorded{
		{"AddBackend", "10.0.0.21:7301", "alice"}, {"ListBackends", nil, ""}, {"ListBackends", nil, ""},
		{"RemoveBackend", "4", "alice"}, {"RemoveBackend", "10.0.0.21:7301", "alice"},
	}
	if !reflect.DeepEqual(calls, wantCalls) {
		t.Errorf("calls = %+v", calls)
	}
}

func TestConfig(t *testing.T) {
	t.Parallel()
	f := &fakeMaster{
		option: &adminapi.TOption{Key: "lance_index_job_dispatcher_paused", Value: "true", DefaultValue: "false"},
		options: []*adminapi.TOption{
			{Key: "enable_lance_index_mutation", Value: "true", DefaultValue: "true", IsDefault: true},
			{Key: "lance_index_job_dispatcher_paused", Value: "true", DefaultValue: "false"},
		},
	}
	addr := serve(t, f)

	out := mustOK(t)(cli(t, addr, "config", "set", "lance_index_job_dispatcher_paused", "true"))
	want := "" +
		"KEY                                VALUE  DEFAULT  CHANGED  CHANGED BY\n" +
		"lance_index_job_dispatcher_paused  true   false    *        \n"
	if out != want {
		t.Errorf("set stdout =\n%s\nwant\n%s", out, want)
	}
	out = mustOK(t)(cli(t, addr, "config", "list"))
	want = "" +
		"KEY                                VALUE  DEFAULT  CHANGED  CHANGED BY\n" +
		"enable_lance_index_mutation        true   true              \n" +
		"lance_index_job_dispatcher_paused  true   false    *        \n"
	if out != want {
		t.Errorf("list stdout =\n%q\nwant\n%q", out, want)
	}
	out = mustOK(t)(cli(t, addr, "-o", "json", "config", "get", "lance_index_job_dispatcher_paused"))
	var got map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil || got["is_default"] != false || got["default_value"] != "false" {
		t.Errorf("json = %s (%v)", out, err)
	}
	wantCalls := []recorded{
		{"SetOption", [2]string{"lance_index_job_dispatcher_paused", "true"}, "alice"},
		{"ListOptions", nil, ""},
		{"GetOption", "lance_index_job_dispatcher_paused", ""},
	}
	if calls := f.recordedCalls(); !reflect.DeepEqual(calls, wantCalls) {
		t.Errorf("calls = %+v", calls)
	}
}

func TestOperatorRaft(t *testing.T) {
	t.Parallel()
	f := &fakeMaster{
		peers: &adminapi.TRaftPeersResponse{
			Peers: []*adminapi.TRaftPeer{
				{ID: "m1", RaftAddress: "10.0.0.1:7202", RPCAddress: thrift.StringPtr("10.0.0.1:7201"), Suffrage: thrift.StringPtr("Voter"), IsLeader: thrift.BoolPtr(true),
					Health: thrift.StringPtr("healthy"), LastContactMs: thrift.Int64Ptr(1700000000000)},
				{ID: "m2", RaftAddress: "10.0.0.2:7202", Suffrage: thrift.StringPtr("Voter"),
					Health: thrift.StringPtr("unreachable"), LastContactMs: thrift.Int64Ptr(1699999990000), LastError: thrift.StringPtr("dial tcp 10.0.0.2:7202: i/o timeout")},
			},
			LeaderID: thrift.StringPtr("m1"), Term: thrift.Int64Ptr(4), CommitIndex: thrift.Int64Ptr(120), AppliedIndex: thrift.Int64Ptr(119),
			AnsweredBy: thrift.StringPtr("m1"),
		},
		leader: "m2",
	}
	addr := serve(t, f)

	out, errOut, code := cli(t, addr, "operator", "raft", "list-peers")
	out = mustOK(t)(out, errOut, code)
	want := "" +
		"ID  RAFT ADDRESS   RPC ADDRESS    SUFFRAGE  LEADER  HEALTH       LAST CONTACT  VERSION\n" +
		"m1  10.0.0.1:7202  10.0.0.1:7201  Voter     *       healthy      3h25m         ?\n" +
		"m2  10.0.0.2:7202  -              Voter             unreachable  3h25m         ?\n" +
		"\nas seen by m1 (the leader), term 4, commit index 120, applied index 119\n"
	if out != want {
		t.Errorf("stdout =\n%q\nwant\n%q", out, want)
	}
	if !strings.Contains(errOut, "warning: m2 is unreachable from the leader: dial tcp 10.0.0.2:7202: i/o timeout") {
		t.Errorf("stderr = %q", errOut)
	}
	out = mustOK(t)(cli(t, addr, "-o", "json", "operator", "raft", "list-peers"))
	if !strings.Contains(out, `"leader_id": "m1"`) || !strings.Contains(out, `"raft_address": "10.0.0.2:7202"`) {
		t.Errorf("json = %s", out)
	}
	if out = mustOK(t)(cli(t, addr, "operator", "raft", "transfer-leader", "--to", "m2")); out != "leadership transferred to m2\n" {
		t.Errorf("stdout = %q", out)
	}
	mustOK(t)(cli(t, addr, "operator", "raft", "transfer-leader"))
	calls := f.recordedCalls()
	if !reflect.DeepEqual(calls[2:], []recorded{{"TransferLeader", "m2", "alice"}, {"TransferLeader", "", "alice"}}) {
		t.Errorf("calls = %+v", calls)
	}
}
