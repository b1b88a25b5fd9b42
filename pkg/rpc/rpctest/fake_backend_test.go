package rpctest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/certs"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/rpc"
)

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

func dispatch(inv string, epoch int64, term int64) *wire.TLanceIndexJobDispatch {
	return &wire.TLanceIndexJobDispatch{
		JobID: 1, DispatchRevision: 1, InvocationID: inv, BeProcessEpoch: epoch, DeadlineMs: 1,
		MutationType: wire.TLanceIndexMutationType_CREATE, IndexName: "i", ColumnName: "c", IndexType: "BTREE",
		DatasetURI: "s3://b/db/t.lance", SchemaContractJSON: "{}", LeaderTerm: &term,
		StorageOptions: map[string]string{"aws_access_key_id": "AKIA-" + inv},
	}
}

func TestFakeBackendSubmitRecordsAndFences(t *testing.T) {
	f := NewFakeBackend(t)
	f.SetEpoch(77)
	c := rpc.NewThriftBackendClient(rpc.DefaultConfig())

	st, err := c.Submit(ctx(t), f.Addr(), dispatch("a", 77, 5))
	if err != nil || st.StatusCode != wire.TStatusCode_OK {
		t.Fatalf("submit = %v, %v", st, err)
	}
	// Redelivery answers OK and is counted.
	if st, _ := c.Submit(ctx(t), f.Addr(), dispatch("a", 77, 5)); st.StatusCode != wire.TStatusCode_OK {
		t.Fatalf("redelivery = %v", st)
	}
	if st, _ := c.Submit(ctx(t), f.Addr(), dispatch("b", 76, 5)); st.StatusCode != wire.TStatusCode_STALE_EPOCH {
		t.Fatalf("wrong epoch = %v", st)
	}
	if st, _ := c.Submit(ctx(t), f.Addr(), dispatch("c", 77, 4)); st.StatusCode != wire.TStatusCode_STALE_LEADER_TERM {
		t.Fatalf("stale term = %v", st)
	}
	f.SetSubmitStatus(wire.TStatusCode_QUEUE_FULL, "queue full")
	if st, _ := c.Submit(ctx(t), f.Addr(), dispatch("d", 77, 6)); st.StatusCode != wire.TStatusCode_QUEUE_FULL || st.ErrorMsgs[0] != "queue full" {
		t.Fatalf("programmed status = %v", st)
	}

	counts := f.InvocationCounts()
	want := map[string]int{"a": 2, "b": 1, "c": 1, "d": 1}
	for k, v := range want {
		if counts[k] != v {
			t.Fatalf("counts = %v, want %v", counts, want)
		}
	}
	if f.SubmitCount("a") != 2 || len(f.Dispatches()) != 5 || f.HighestLeaderTerm() != 6 {
		t.Fatalf("dispatches %d, highest term %d", len(f.Dispatches()), f.HighestLeaderTerm())
	}
	seen := f.StorageOptionsSeen()
	if len(seen) != 5 || seen[0]["aws_access_key_id"] != "AKIA-a" || seen[4]["aws_access_key_id"] != "AKIA-d" {
		t.Fatalf("storage options seen = %v", seen)
	}

	// Query answers from the records.
	q, err := c.Query(ctx(t), f.Addr(), &wire.TQueryInvocationsRequest{LeaderTerm: 6, BeProcessEpoch: 77, InvocationIds: []string{"a", "d", "zz"}})
	if err != nil || q.Status.StatusCode != wire.TStatusCode_OK {
		t.Fatalf("query = %v, %v", q, err)
	}
	states := []wire.TLanceInvocationState{q.Invocations[0].State, q.Invocations[1].State, q.Invocations[2].State}
	if states[0] != wire.TLanceInvocationState_QUEUED || states[1] != wire.TLanceInvocationState_UNKNOWN_INVOCATION || states[2] != wire.TLanceInvocationState_UNKNOWN_INVOCATION {
		t.Fatalf("states = %v", states)
	}
	f.SetInvocation(&wire.TInvocationStatus{InvocationID: "a", State: wire.TLanceInvocationState_FINISHED,
		Result_: &wire.TLanceIndexJobReport{InvocationID: "a"}})
	q, _ = c.Query(ctx(t), f.Addr(), &wire.TQueryInvocationsRequest{LeaderTerm: 6, BeProcessEpoch: 77, InvocationIds: []string{"a"}})
	if q.Invocations[0].State != wire.TLanceInvocationState_FINISHED || q.Invocations[0].Result_ == nil {
		t.Fatalf("programmed invocation = %v", q.Invocations[0])
	}
	if q, _ := c.Query(ctx(t), f.Addr(), &wire.TQueryInvocationsRequest{LeaderTerm: 6, BeProcessEpoch: 1}); q.Status.StatusCode != wire.TStatusCode_STALE_EPOCH {
		t.Fatalf("query with a wrong epoch = %v", q.Status)
	}
}

func TestFakeBackendHeartbeatInspectAndHooks(t *testing.T) {
	f := NewFakeBackend(t)
	c := rpc.NewThriftBackendClient(rpc.DefaultConfig())
	term := int64(9)
	hb, err := c.Heartbeat(ctx(t), f.Addr(), &wire.THeartbeatRequest{MasterID: "m1", LeaderTerm: &term})
	if err != nil || hb.BeProcessEpoch != 1 || len(f.Heartbeats()) != 1 || f.HighestLeaderTerm() != 9 {
		t.Fatalf("heartbeat = %v, %v", hb, err)
	}

	f.SetDataset("s3://b/db/t.lance", job.Snapshot{
		Version: 12,
		Fields: []job.Field{
			{ID: 0, Name: "id", Type: "int32"},
			{ID: 1, Name: "vec", Type: "fixed_size_list", ListDimension: 128, ElementType: "float32", Nullable: true},
		},
		Indexes: []job.IndexInfo{{Name: "id_idx", IndexType: "BTREE", Columns: []string{"id"}}},
	})
	resp, err := c.Inspect(ctx(t), f.Addr(), &wire.TInspectDatasetRequest{DatasetURI: "s3://b/db/t.lance", StorageOptions: map[string]string{"k": "v"}})
	if err != nil || resp.Status.StatusCode != wire.TStatusCode_OK || resp.GetDatasetVersion() != 12 {
		t.Fatalf("inspect = %v, %v", resp, err)
	}
	if len(resp.Fields) != 2 || resp.Fields[1].GetListDimension() != 128 || resp.Fields[1].GetElementType() != "float32" ||
		len(resp.Indexes) != 1 || resp.Indexes[0].Columns[0] != "id" {
		t.Fatalf("inspect content = %v", resp)
	}
	if resp, _ := c.Inspect(ctx(t), f.Addr(), &wire.TInspectDatasetRequest{DatasetURI: "missing"}); resp.Status.StatusCode == wire.TStatusCode_OK {
		t.Fatal("unknown dataset answered OK")
	}
	if seen := f.StorageOptionsSeen(); len(seen) != 1 || seen[0]["k"] != "v" || len(f.Inspects()) != 2 {
		t.Fatalf("inspect records: %v", seen)
	}

	// Reads no longer recorded still get their answers; submits are
	// recorded whatever.
	f.SetRecordReads(false)
	if resp, err := c.Inspect(ctx(t), f.Addr(), &wire.TInspectDatasetRequest{DatasetURI: "s3://b/db/t.lance",
		StorageOptions: map[string]string{"k": "w"}}); err != nil || resp.GetDatasetVersion() != 12 {
		t.Fatalf("inspect not recorded = %v, %v", resp, err)
	}
	if _, err := c.Heartbeat(ctx(t), f.Addr(), &wire.THeartbeatRequest{MasterID: "m1", LeaderTerm: &term}); err != nil {
		t.Fatal(err)
	}
	if len(f.Inspects()) != 2 || len(f.StorageOptionsSeen()) != 1 || len(f.Heartbeats()) != 1 {
		t.Fatalf("reads recorded with recording off: %d inspects, %d storage options, %d heartbeats",
			len(f.Inspects()), len(f.StorageOptionsSeen()), len(f.Heartbeats()))
	}
	f.SetRecordReads(true)

	// A hook that drops the connection: the send is ambiguous.
	f.SetSubmitHook(func(context.Context, *wire.TLanceIndexJobDispatch) (*wire.TStatus, error) {
		return nil, ErrDropConnection
	})
	_, err = c.Submit(ctx(t), f.Addr(), dispatch("x", 1, 9))
	if err == nil || rpc.NotSent(err) {
		t.Fatalf("dropped submit = %v, want an error after bytes left", err)
	}
	if f.SubmitCount("x") != 1 {
		t.Fatal("a dropped dispatch was not recorded")
	}
	f.SetSubmitHook(nil)
	if st, err := c.Submit(ctx(t), f.Addr(), dispatch("y", 1, 9)); err != nil || st.StatusCode != wire.TStatusCode_OK {
		t.Fatalf("after the hook was removed: %v, %v", st, err)
	}
}

func TestFakeBackendConcurrentSubmits(t *testing.T) {
	f := NewFakeBackend(t)
	c := rpc.NewThriftBackendClient(rpc.DefaultConfig())
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			inv := string(rune('a' + i))
			if _, err := c.Submit(ctx(t), f.Addr(), dispatch(inv, 1, 1)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if !f.WaitForSubmits(20, time.Second) || len(f.InvocationCounts()) != 20 {
		t.Fatalf("counts = %v", f.InvocationCounts())
	}
	f.Close()
	if _, err := c.Heartbeat(ctx(t), f.Addr(), &wire.THeartbeatRequest{MasterID: "m"}); !rpc.NotSent(err) {
		t.Fatalf("heartbeat to a closed fake = %v, want not sent", err)
	}
}

// devConfig is a Config with role's certificate from a development PKI in
// dir.
func devConfig(t *testing.T, dir string, role certs.Role) rpc.Config {
	t.Helper()
	ca, cert, key := certs.DevFiles(dir, role)
	c, err := rpc.TLSFiles{CA: ca, Cert: cert, Key: key}.Load(role, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := rpc.DefaultConfig()
	cfg.Certs = c
	return cfg
}

func TestFakeBackendWithMutualTLS(t *testing.T) {
	dir := t.TempDir()
	if _, err := certs.WriteDevCerts(dir, certs.DevOptions{Hosts: []string{"127.0.0.1"}, Validity: time.Hour}); err != nil {
		t.Fatal(err)
	}
	f := NewFakeBackendWithConfig(t, devConfig(t, dir, certs.RoleBackend))
	st, err := rpc.NewThriftBackendClient(devConfig(t, dir, certs.RoleMaster)).Submit(ctx(t), f.Addr(), dispatch("a", 1, 1))
	if err != nil || st.StatusCode != wire.TStatusCode_OK {
		t.Fatalf("master submit = %v, %v", st, err)
	}
	st, err = rpc.NewThriftBackendClient(devConfig(t, dir, certs.RoleOperator)).Submit(ctx(t), f.Addr(), dispatch("b", 1, 1))
	if err != nil || st.StatusCode != wire.TStatusCode_NOT_AUTHORIZED {
		t.Fatalf("operator submit = %v, %v", st, err)
	}
	if _, err := rpc.NewThriftBackendClient(rpc.DefaultConfig()).Submit(ctx(t), f.Addr(), dispatch("c", 1, 1)); err == nil {
		t.Fatal("a plaintext submit to a TLS fake succeeded")
	}
	if n := len(f.Dispatches()); n != 1 {
		t.Fatalf("%d dispatches recorded; only the master's may be", n)
	}
}
