package rpc

import (
	"context"
	"errors"
	"fmt"

	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/certs"
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
//   - A Submit is made at most once: an implementation never retries or
//     resends it (DESIGN.md §7: send exactly once). Heartbeat, Inspect and
//     Query only read; an implementation may make one of them a second
//     time, once, when the connection it used proved dead before any byte
//     of a reply arrived (a reused connection the peer had closed).
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
	// Resolve asks the backend to read a job's outcome from its dataset
	// (§13.4): a read-only walk of the retained versions, bounded by the
	// request's timeout.
	Resolve(ctx context.Context, addr string, req *wire.TResolveJobRequest) (*wire.TResolveJobResponse, error)
	// JobLog asks the backend for an invocation's redacted worker log
	// (jobs logs). A read.
	JobLog(ctx context.Context, addr string, req *wire.TJobLogRequest) (*wire.TJobLogResponse, error)
	// ProbeStore asks the backend whether an object store honours
	// conditional PUT. It writes and deletes two probe objects under the
	// root; nothing else is touched.
	ProbeStore(ctx context.Context, addr string, req *wire.TProbeStoreRequest) (*wire.TProbeStoreResponse, error)
}

// NewThriftBackendClient returns the Thrift BackendClient.
//
// Submit opens a fresh connection for every dispatch and closes it: a
// dispatch never shares a stream with another call, so whether its bytes may
// have left (SendError.BytesMayHaveLeft) is exactly what this one send did.
//
// The reads (Inspect, Heartbeat, Query, Resolve, JobLog; inspect is on
// every admission's path) share one MuxConn per address, with many calls in
// flight on it; Inspect and Resolve take one of DefaultMaxCallsPerAddr call
// slots first. A connection that has carried no call for under half of
// SocketTimeout (servers close connections idle for SocketTimeout; at most
// 2 s) is closed, and the next call dials a fresh one. A call that ends by
// its context or by an answer leaves the connection working; a broken
// stream fails the calls on it, and the next call dials again. When a
// connection that was already open breaks under a read before any reply
// arrived on it (the peer closed it just then), the read is made once more
// on a fresh connection.
func NewThriftBackendClient(cfg Config) BackendClient {
	cfg = cfg.withDefaults()
	return &thriftBackendClient{cfg: cfg, slots: newCallSlots(DefaultMaxCallsPerAddr), mux: NewMuxPool(cfg, certs.RoleBackend)}
}

type thriftBackendClient struct {
	cfg   Config
	slots *callSlots // bounded calls in flight per address
	mux   *MuxPool   // the shared connections of reads
}

const (
	methodSubmit    = "submit_lance_index_job"
	methodHeartbeat = "heartbeat"
	methodInspect   = "inspect_lance_dataset"
	methodQuery     = "query_lance_index_invocations"
	methodResolve   = "resolve_lance_index_job"
	methodJobLog    = "get_lance_index_job_log"
	methodProbe     = "probe_object_store"
)

func (b *thriftBackendClient) Submit(ctx context.Context, addr string, d *wire.TLanceIndexJobDispatch) (*wire.TStatus, error) {
	if d == nil {
		return nil, &SendError{Op: methodSubmit, Addr: addr, Err: ErrNilRequest}
	}
	var out *wire.TStatus
	err := b.callFresh(ctx, addr, methodSubmit, func(c *wire.LanceBackendServiceClient) (err error) {
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
	err := b.callPooled(ctx, addr, methodHeartbeat, false, func(c *wire.LanceBackendServiceClient) (err error) {
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
	err := b.callPooled(ctx, addr, methodInspect, true, func(c *wire.LanceBackendServiceClient) (err error) {
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
	err := b.callPooled(ctx, addr, methodQuery, false, func(c *wire.LanceBackendServiceClient) (err error) {
		out, err = c.QueryLanceIndexInvocations(ctx, req)
		return err
	})
	return out, err
}

// Resolve is a read (nothing is written to the dataset) that may take
// seconds: it takes one of the address's connection slots like Inspect.
func (b *thriftBackendClient) Resolve(ctx context.Context, addr string, req *wire.TResolveJobRequest) (*wire.TResolveJobResponse, error) {
	if req == nil {
		return nil, &SendError{Op: methodResolve, Addr: addr, Err: ErrNilRequest}
	}
	var out *wire.TResolveJobResponse
	err := b.callPooled(ctx, addr, methodResolve, true, func(c *wire.LanceBackendServiceClient) (err error) {
		out, err = c.ResolveLanceIndexJob(ctx, req)
		return err
	})
	return out, err
}

// JobLog is a read of the backend's memory.
func (b *thriftBackendClient) JobLog(ctx context.Context, addr string, req *wire.TJobLogRequest) (*wire.TJobLogResponse, error) {
	if req == nil {
		return nil, &SendError{Op: methodJobLog, Addr: addr, Err: ErrNilRequest}
	}
	var out *wire.TJobLogResponse
	err := b.callPooled(ctx, addr, methodJobLog, false, func(c *wire.LanceBackendServiceClient) (err error) {
		out, err = c.GetLanceIndexJobLog(ctx, req)
		return err
	})
	return out, err
}

// ProbeStore writes to the store, so it is not retried on a stale pooled
// connection: it runs on a fresh one, as Submit does.
func (b *thriftBackendClient) ProbeStore(ctx context.Context, addr string, req *wire.TProbeStoreRequest) (*wire.TProbeStoreResponse, error) {
	if req == nil {
		return nil, &SendError{Op: methodProbe, Addr: addr, Err: ErrNilRequest}
	}
	var out *wire.TProbeStoreResponse
	err := b.callFresh(ctx, addr, methodProbe, func(c *wire.LanceBackendServiceClient) (err error) {
		out, err = c.ProbeObjectStore(ctx, req)
		return err
	})
	return out, err
}

// callFresh dials, runs fn once and closes.
func (b *thriftBackendClient) callFresh(ctx context.Context, addr, method string, fn func(*wire.LanceBackendServiceClient) error) error {
	conn, err := dial(ctx, addr, b.cfg, certs.RoleBackend)
	if err != nil {
		return err
	}
	defer conn.Close()
	return sendError(method, addr, fn(wire.NewLanceBackendServiceClient(conn.Client())))
}

// callPooled runs fn, a read, on the address's shared connection (a
// MuxConn; the MuxPool dials one when there is none). When a connection that
// was already open fails under the call before any reply frame arrived on
// it, other than by the reply timeout, an answer or ctx, the peer had
// closed it (a backend restarted): fn runs once more on a fresh connection.
//
// bounded calls (Inspect, one per admission; Resolve) first take one of the
// address's call slots, waiting within ctx. Heartbeat and Query, a few per
// second per master, never wait: a backend busy with inspects must not look
// dead, nor stall reconcile.
func (b *thriftBackendClient) callPooled(ctx context.Context, addr, method string, bounded bool,
	fn func(*wire.LanceBackendServiceClient) error) error {
	if err := ctx.Err(); err != nil {
		return &SendError{Op: method, Addr: addr, Err: err}
	}
	if bounded {
		if err := b.slots.acquire(ctx, addr); err != nil {
			return &SendError{Op: method, Addr: addr, Err: fmt.Errorf("waiting for a call slot: %w", err)}
		}
		defer b.slots.release(addr)
	}
	conn, fresh, err := b.mux.Get(ctx, addr)
	if err != nil {
		return sendError(method, addr, err)
	}
	read := conn.FramesRead()
	err = fn(wire.NewLanceBackendServiceClient(conn))
	if err == nil || fresh || !staleFailure(ctx, err, conn, read) {
		return sendError(method, addr, err)
	}
	staleMayHaveLeft := !NotSent(err) // the stale attempt's bytes may have reached the peer
	if conn, _, err = b.mux.Get(ctx, addr); err == nil {
		err = fn(wire.NewLanceBackendServiceClient(conn))
	}
	if staleMayHaveLeft && NotSent(err) {
		// The retry sent nothing, but the first attempt may have.
		return &SendError{Op: method, Addr: addr, BytesMayHaveLeft: true,
			Err: fmt.Errorf("after a reused connection failed: %w", err)}
	}
	return sendError(method, addr, err)
}

// staleFailure reports whether a call on a reused connection failed the way
// a connection the peer closed while it sat idle fails: the connection
// broke (not by the reply timeout), no reply frame arrived on it since the
// call began, no answer, ctx still live.
func staleFailure(ctx context.Context, err error, conn *MuxConn, framesBefore int64) bool {
	if ctx.Err() != nil || isApplicationException(err) || conn.FramesRead() != framesBefore {
		return false
	}
	cerr := conn.Err()
	return cerr != nil && !errors.Is(cerr, errReplyTimeout)
}

// sendError returns nil for nil. An error that is not already a *SendError
// (the generated client's own MISSING_RESULT, raised after a reply arrived)
// is wrapped as one whose bytes may have left.
func sendError(method, addr string, err error) error {
	if err == nil {
		return nil
	}
	var se *SendError
	if errors.As(err, &se) {
		return err
	}
	return &SendError{Op: method, Addr: addr, BytesMayHaveLeft: true, Err: err}
}
