package rpc

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"go.uber.org/zap/zaptest"

	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/testkit"
)

// testBackend is a tiny wire.LanceBackendService; nil funcs answer OK.
type testBackend struct {
	submit    func(context.Context, *wire.TLanceIndexJobDispatch) (*wire.TStatus, error)
	heartbeat func(context.Context, *wire.THeartbeatRequest) (*wire.THeartbeatResponse, error)
	inspect   func(context.Context, *wire.TInspectDatasetRequest) (*wire.TInspectDatasetResponse, error)
}

func okStatus() *wire.TStatus { return &wire.TStatus{StatusCode: wire.TStatusCode_OK} }

func (b *testBackend) SubmitLanceIndexJob(ctx context.Context, d *wire.TLanceIndexJobDispatch) (*wire.TStatus, error) {
	if b.submit != nil {
		return b.submit(ctx, d)
	}
	return okStatus(), nil
}

func (b *testBackend) Heartbeat(ctx context.Context, r *wire.THeartbeatRequest) (*wire.THeartbeatResponse, error) {
	if b.heartbeat != nil {
		return b.heartbeat(ctx, r)
	}
	return &wire.THeartbeatResponse{Status: okStatus(), BeProcessEpoch: 42}, nil
}

func (b *testBackend) InspectLanceDataset(ctx context.Context, r *wire.TInspectDatasetRequest) (*wire.TInspectDatasetResponse, error) {
	if b.inspect != nil {
		return b.inspect(ctx, r)
	}
	v := int64(len(r.GetDatasetURI()))
	return &wire.TInspectDatasetResponse{Status: okStatus(), DatasetVersion: &v}, nil
}

func (b *testBackend) QueryLanceIndexInvocations(_ context.Context, r *wire.TQueryInvocationsRequest) (*wire.TQueryInvocationsResponse, error) {
	out := &wire.TQueryInvocationsResponse{Status: okStatus()}
	for _, id := range r.InvocationIds {
		out.Invocations = append(out.Invocations, &wire.TInvocationStatus{InvocationID: id, State: wire.TLanceInvocationState_UNKNOWN_INVOCATION})
	}
	return out, nil
}

// startServer serves processor on 127.0.0.1:0 until the test ends.
func startServer(t *testing.T, processor thrift.TProcessor, cfg Config) *Server {
	t.Helper()
	s, err := NewServer("127.0.0.1:0", processor, cfg, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Serve(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func startBackend(t *testing.T, b *testBackend, cfg Config) *Server {
	return startServer(t, wire.NewLanceBackendServiceProcessor(b), cfg)
}

// waitFor polls cond until it holds; the test fails after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, what, cond)
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func asSendError(t *testing.T, err error) *SendError {
	t.Helper()
	var se *SendError
	if !errors.As(err, &se) {
		t.Fatalf("error %v (%T) is not a *SendError", err, err)
	}
	return se
}

func testDispatch(invocationID string) *wire.TLanceIndexJobDispatch {
	return &wire.TLanceIndexJobDispatch{
		JobID: 1, DispatchRevision: 1, InvocationID: invocationID, BeProcessEpoch: 42,
		DeadlineMs: 1, MutationType: wire.TLanceIndexMutationType_CREATE, IndexName: "i",
		ColumnName: "c", IndexType: "BTREE", DatasetURI: "/d.lance", SchemaContractJSON: "{}",
	}
}

func (b *testBackend) GetLanceIndexJobLog(_ context.Context, _ *wire.TJobLogRequest) (*wire.TJobLogResponse, error) {
	return &wire.TJobLogResponse{Status: &wire.TStatus{StatusCode: wire.TStatusCode_NOT_IMPLEMENTED_ERROR}}, nil
}

func (b *testBackend) ProbeObjectStore(_ context.Context, _ *wire.TProbeStoreRequest) (*wire.TProbeStoreResponse, error) {
	return &wire.TProbeStoreResponse{Status: &wire.TStatus{StatusCode: wire.TStatusCode_NOT_IMPLEMENTED_ERROR}}, nil
}

func (b *testBackend) ResolveLanceIndexJob(_ context.Context, r *wire.TResolveJobRequest) (*wire.TResolveJobResponse, error) {
	return &wire.TResolveJobResponse{Status: &wire.TStatus{StatusCode: wire.TStatusCode_NOT_IMPLEMENTED_ERROR}}, nil
}
