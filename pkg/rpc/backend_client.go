package rpc

import (
	"context"
	"errors"

	"github.com/lancemaster/lancemaster/gen-go/wire"
)

// BackendClient is the only view the dispatcher and admission have of
// backends (wire.LanceBackendService). Tests swap in a fake; production uses
// NewThriftBackendClient; integration tests use it against
// rpctest.FakeBackend over loopback.
//
// Contract, for every implementation:
//   - Safe for concurrent use by any number of goroutines; calls are
//     independent of each other.
//   - Each call honours ctx: its deadline bounds the whole call and its
//     cancellation aborts it.
//   - A call is made at most once: an implementation never retries, and
//     never resends a Submit (DESIGN.md §7: send exactly once).
//   - A call returns a response or an error, never both nil. Every error is,
//     or wraps, a *SendError whose BytesMayHaveLeft says whether the backend
//     can have seen the request; IsUnknownMethod tells an UNKNOWN_METHOD
//     answer apart. A non-OK status in a response is not an error.
//   - Requests carry storage credentials: implementations never log them.
type BackendClient interface {
	// Submit sends one dispatch (submit_lance_index_job). An OK status means
	// the backend enqueued it exactly once.
	Submit(ctx context.Context, addr string, d *wire.TLanceIndexJobDispatch) (*wire.TStatus, error)
	// Heartbeat asks the backend for its process epoch and load.
	Heartbeat(ctx context.Context, addr string, req *wire.THeartbeatRequest) (*wire.THeartbeatResponse, error)
	// Inspect asks the backend for one pinned snapshot of a dataset.
	Inspect(ctx context.Context, addr string, req *wire.TInspectDatasetRequest) (*wire.TInspectDatasetResponse, error)
	// Query asks the backend what became of invocations (reconcile, §7).
	Query(ctx context.Context, addr string, req *wire.TQueryInvocationsRequest) (*wire.TQueryInvocationsResponse, error)
}

// NewThriftBackendClient returns the Thrift BackendClient. Each call opens a
// fresh connection and closes it when done: no pool to go stale (servers
// close idle connections after their SocketTimeout anyway), and no call can
// inherit another's broken stream. Backend calls are rare (one send per job,
// a heartbeat per backend per interval), so the connect cost is immaterial.
func NewThriftBackendClient(cfg Config) BackendClient {
	return &thriftBackendClient{cfg: cfg.withDefaults()}
}

type thriftBackendClient struct {
	cfg Config
}

const (
	methodSubmit    = "submit_lance_index_job"
	methodHeartbeat = "heartbeat"
	methodInspect   = "inspect_lance_dataset"
	methodQuery     = "query_lance_index_invocations"
)

func (b *thriftBackendClient) Submit(ctx context.Context, addr string, d *wire.TLanceIndexJobDispatch) (*wire.TStatus, error) {
	if d == nil {
		return nil, &SendError{Op: methodSubmit, Addr: addr, Err: ErrNilRequest}
	}
	var out *wire.TStatus
	err := b.call(ctx, addr, methodSubmit, func(c *wire.LanceBackendServiceClient) (err error) {
		out, err = c.SubmitLanceIndexJob(ctx, d)
		return err
	})
	return out, err
}

func (b *thriftBackendClient) Heartbeat(ctx context.Context, addr string, req *wire.THeartbeatRequest) (*wire.THeartbeatResponse, error) {
	if req == nil {
		return nil, &SendError{Op: methodHeartbeat, Addr: addr, Err: ErrNilRequest}
	}
	var out *wire.THeartbeatResponse
	err := b.call(ctx, addr, methodHeartbeat, func(c *wire.LanceBackendServiceClient) (err error) {
		out, err = c.Heartbeat(ctx, req)
		return err
	})
	return out, err
}

func (b *thriftBackendClient) Inspect(ctx context.Context, addr string, req *wire.TInspectDatasetRequest) (*wire.TInspectDatasetResponse, error) {
	if req == nil {
		return nil, &SendError{Op: methodInspect, Addr: addr, Err: ErrNilRequest}
	}
	var out *wire.TInspectDatasetResponse
	err := b.call(ctx, addr, methodInspect, func(c *wire.LanceBackendServiceClient) (err error) {
		out, err = c.InspectLanceDataset(ctx, req)
		return err
	})
	return out, err
}

func (b *thriftBackendClient) Query(ctx context.Context, addr string, req *wire.TQueryInvocationsRequest) (*wire.TQueryInvocationsResponse, error) {
	if req == nil {
		return nil, &SendError{Op: methodQuery, Addr: addr, Err: ErrNilRequest}
	}
	var out *wire.TQueryInvocationsResponse
	err := b.call(ctx, addr, methodQuery, func(c *wire.LanceBackendServiceClient) (err error) {
		out, err = c.QueryLanceIndexInvocations(ctx, req)
		return err
	})
	return out, err
}

// call dials, runs fn once and closes. An error that is not already a
// *SendError (the generated client's own MISSING_RESULT, raised after a
// reply arrived) is wrapped as one whose bytes may have left.
func (b *thriftBackendClient) call(ctx context.Context, addr, method string, fn func(*wire.LanceBackendServiceClient) error) error {
	conn, err := Dial(ctx, addr, b.cfg)
	if err != nil {
		return err
	}
	defer conn.Close()
	err = fn(wire.NewLanceBackendServiceClient(conn.Client()))
	if err == nil {
		return nil
	}
	var se *SendError
	if errors.As(err, &se) {
		return err
	}
	return &SendError{Op: method, Addr: addr, BytesMayHaveLeft: true, Err: err}
}
