package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
)

// The fake master's backends show and drain (the rest is in fake_test.go).

func (f *fakeMaster) ShowBackend(_ context.Context, ref string) (*adminapi.TBackend, error) {
	return f.backend, f.record("ShowBackend", ref)
}

func (f *fakeMaster) DrainBackend(_ context.Context, r *adminapi.TDrainBackendRequest) (*adminapi.TDrainBackendResponse, error) {
	if err := f.record("DrainBackend", r); err != nil {
		return nil, err
	}
	b := *f.backend
	b.Drained = thrift.BoolPtr(r.Drained)
	return &adminapi.TDrainBackendResponse{Backend: &b, Unchanged: thrift.BoolPtr(r.Backend == "9")}, nil
}

func shownBackend() *adminapi.TBackend {
	target, idx, inv := "lake.db.t", "vec_idx", "inv-7"
	return &adminapi.TBackend{BackendID: 3, Address: "10.0.0.21:7301", AddTimeMs: thrift.Int64Ptr(1700000000000),
		Alive: thrift.BoolPtr(true), ProcessEpoch: thrift.Int64Ptr(1700000000000000000), HeldSlots: thrift.Int32Ptr(1),
		LastHeardMs: thrift.Int64Ptr(1700000001000), Version: thrift.StringPtr("v0.3.0 (d4eb1c96e706)"),
		Drained: thrift.BoolPtr(true), DrainTimeMs: thrift.Int64Ptr(1700000002000), DrainActor: thrift.StringPtr("alice"),
		Accepting: thrift.BoolPtr(true), Capacity: thrift.Int32Ptr(4), Dispatchable: thrift.BoolPtr(false),
		Invocations: []*adminapi.TBackendInvocation{{JobID: 7, MutationState: thrift.StringPtr("RUNNING"),
			MutationType: thrift.StringPtr("CREATE"), Target: &target, IndexName: &idx, InvocationID: &inv,
			ProcessEpoch: thrift.Int64Ptr(1700000000000000000), DispatchTimeMs: thrift.Int64Ptr(1700000001500),
			BuildPhase: thrift.StringPtr("training")}}}
}

func TestBackendsShow(t *testing.T) {
	t.Parallel()
	f := &fakeMaster{backend: shownBackend()}
	addr := serve(t, f)
	out := mustOK(t)(cli(t, addr, "backends", "show", "10.0.0.21:7301"))
	for _, want := range []string{
		"address:       10.0.0.21:7301",
		"added:         3h25m ago",
		"drained:       yes (drained 3h24m ago by alice)",
		"dispatchable:  no",
		"accepting:     yes",
		"process epoch: 1700000000000000000",
		"version:       v0.3.0 (d4eb1c96e706)",
		"last heard:    3h24m ago",
		"slots:         1 held of 4",
		"JOB  STATE    MUTATION  TABLE      INDEX    INVOCATION  EPOCH                DISPATCHED  PHASE",
		"7    RUNNING  CREATE    lake.db.t  vec_idx  inv-7       1700000000000000000  3h24m       training",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("show lacks %q:\n%s", want, out)
		}
	}
	js := mustOK(t)(cli(t, addr, "-o", "json", "backends", "show", "3"))
	var v struct {
		Drained     bool `json:"drained"`
		Invocations []struct {
			JobID int64 `json:"job_id"`
		} `json:"invocations"`
	}
	if err := json.Unmarshal([]byte(js), &v); err != nil || !v.Drained || len(v.Invocations) != 1 || v.Invocations[0].JobID != 7 {
		t.Fatalf("json %s (%v)", js, err)
	}
	if _, stderr, code := cli(t, addr, "backends", "show", "nonsense"); code != exitUsage || !strings.Contains(stderr, "ID or HOST:PORT") {
		t.Fatalf("a bad reference: exit %d, stderr %q", code, stderr)
	}
	if calls := f.recordedCalls(); len(calls) != 2 || calls[0].req != "10.0.0.21:7301" || calls[1].req != "3" {
		t.Fatalf("calls %+v", calls)
	}
	// --verbose: the exact times.
	out = mustOK(t)(cli(t, addr, "--verbose", "backends", "show", "3"))
	for _, want := range []string{"drained:       yes (drained 2023-11-14T22:13:22.000Z by alice)",
		"last heard:    2023-11-14T22:13:21.000Z", "1700000000000000000  2023-11-14T22:13:21.500Z  training"} {
		if !strings.Contains(out, want) {
			t.Errorf("--verbose show lacks %q:\n%s", want, out)
		}
	}
}

func TestBackendsDrainAndUndrain(t *testing.T) {
	t.Parallel()
	f := &fakeMaster{backend: shownBackend()}
	addr := serve(t, f)
	out := mustOK(t)(cli(t, addr, "--as", "bob", "backends", "drain", "3"))
	if out != "backend 3 (10.0.0.21:7301) drained\n1 jobs still hold its slots; wait until `lancemaster backends show 3` lists none\n" {
		t.Errorf("drain stdout %q", out)
	}
	if out := mustOK(t)(cli(t, addr, "backends", "drain", "9")); !strings.Contains(out, "was already drained; nothing changed") {
		t.Errorf("repeated drain stdout %q", out)
	}
	if out := mustOK(t)(cli(t, addr, "backends", "undrain", "10.0.0.21:7301")); out != "backend 3 (10.0.0.21:7301) undrained\n" {
		t.Errorf("undrain stdout %q", out)
	}
	calls := f.recordedCalls()
	if len(calls) != 3 {
		t.Fatalf("calls %+v", calls)
	}
	first := calls[0].req.(*adminapi.TDrainBackendRequest)
	last := calls[2].req.(*adminapi.TDrainBackendRequest)
	if first.Backend != "3" || !first.Drained || first.GetActor() != "bob" || last.Backend != "10.0.0.21:7301" || last.Drained {
		t.Fatalf("requests %+v, %+v", first, last)
	}
	if _, _, code := cli(t, addr, "backends", "drain"); code != exitUsage {
		t.Fatalf("drain without a backend: exit %d", code)
	}
}
