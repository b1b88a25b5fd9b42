package dispatch

import (
	"context"
	"errors"
	"io"
	"sync"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/rpc"
)

// ---- the backend client seam -----------------------------------------------------------

type submitCall struct {
	addr string
	d    *wire.TLanceIndexJobDispatch
}

// fakeBackends is an in-process rpc.BackendClient whose answers tests
// program per address.
type fakeBackends struct {
	mu         sync.Mutex
	epochs     map[string]int64 // heartbeat answers; a missing address fails (not sent)
	heartbeats []*wire.THeartbeatRequest
	// hbTweak changes an address's OK heartbeat answer (accepting, cluster
	// id, outbox, status); it runs under the lock.
	hbTweak map[string]func(*wire.THeartbeatResponse)
	// hbGate, when set, runs before a heartbeat is answered, without the
	// lock (a heartbeat in flight).
	hbGate   func(addr string)
	submits  []submitCall
	queries  []*wire.TQueryInvocationsRequest
	resolves []resolveCall
	// submit answers a dispatch (default OK); it runs without the lock, with
	// the call's context (a hung backend waits on it).
	submit func(ctx context.Context, addr string, d *wire.TLanceIndexJobDispatch) (*wire.TStatus, error)
	// query answers a reconcile query (default: not sent).
	query func(addr string, req *wire.TQueryInvocationsRequest) (*wire.TQueryInvocationsResponse, error)
	// resolve answers a resolve request (default: not sent); without the lock.
	resolve func(ctx context.Context, addr string, req *wire.TResolveJobRequest) (*wire.TResolveJobResponse, error)
}

type resolveCall struct {
	addr string
	req  *wire.TResolveJobRequest
}

func newFakeBackends() *fakeBackends {
	return &fakeBackends{epochs: map[string]int64{}, hbTweak: map[string]func(*wire.THeartbeatResponse){}}
}

func notSentErr(addr string) error {
	return &rpc.SendError{Op: rpc.OpDial, Addr: addr, Err: errors.New("connection refused")}
}

func bytesLeftErr(addr string) error {
	return &rpc.SendError{Op: "submit_lance_index_job", Addr: addr, BytesMayHaveLeft: true, Err: io.ErrUnexpectedEOF}
}

func unknownMethodErr(addr string) error {
	return &rpc.SendError{Op: "submit_lance_index_job", Addr: addr, BytesMayHaveLeft: true,
		Err: thrift.NewTApplicationException(thrift.UNKNOWN_METHOD, "Unknown function submit_lance_index_job")}
}

func (f *fakeBackends) setEpoch(addr string, epoch int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if epoch == 0 {
		delete(f.epochs, addr)
		return
	}
	f.epochs[addr] = epoch
}

func (f *fakeBackends) setSubmit(fn func(addr string, d *wire.TLanceIndexJobDispatch) (*wire.TStatus, error)) {
	if fn == nil {
		f.setSubmitCtx(nil) // back to OK
		return
	}
	f.setSubmitCtx(func(_ context.Context, addr string, d *wire.TLanceIndexJobDispatch) (*wire.TStatus, error) {
		return fn(addr, d)
	})
}

func (f *fakeBackends) setSubmitCtx(fn func(ctx context.Context, addr string, d *wire.TLanceIndexJobDispatch) (*wire.TStatus, error)) {
	f.mu.Lock()
	f.submit = fn
	f.mu.Unlock()
}

// setHeartbeat changes how an address answers heartbeats (nil: plain OK).
func (f *fakeBackends) setHeartbeat(addr string, tweak func(*wire.THeartbeatResponse)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if tweak == nil {
		delete(f.hbTweak, addr)
		return
	}
	f.hbTweak[addr] = tweak
}

func (f *fakeBackends) setResolve(fn func(ctx context.Context, addr string, req *wire.TResolveJobRequest) (*wire.TResolveJobResponse, error)) {
	f.mu.Lock()
	f.resolve = fn
	f.mu.Unlock()
}

func (f *fakeBackends) resolved() []resolveCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]resolveCall(nil), f.resolves...)
}

func (f *fakeBackends) setQuery(fn func(addr string, req *wire.TQueryInvocationsRequest) (*wire.TQueryInvocationsResponse, error)) {
	f.mu.Lock()
	f.query = fn
	f.mu.Unlock()
}

func (f *fakeBackends) Submit(ctx context.Context, addr string, d *wire.TLanceIndexJobDispatch) (*wire.TStatus, error) {
	f.mu.Lock()
	f.submits = append(f.submits, submitCall{addr, d})
	fn := f.submit
	f.mu.Unlock()
	if fn != nil {
		return fn(ctx, addr, d)
	}
	return &wire.TStatus{StatusCode: wire.TStatusCode_OK}, nil
}

func (f *fakeBackends) Heartbeat(_ context.Context, addr string, req *wire.THeartbeatRequest) (*wire.THeartbeatResponse, error) {
	f.mu.Lock()
	gate := f.hbGate
	f.mu.Unlock()
	if gate != nil {
		gate(addr) // the answer is computed after the gate: what holds then
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.heartbeats = append(f.heartbeats, req)
	epoch, ok := f.epochs[addr]
	if !ok {
		return nil, notSentErr(addr)
	}
	capacity, version := int32(4), "v1.2.3 (abcdef012345)"
	resp := &wire.THeartbeatResponse{Status: &wire.TStatus{StatusCode: wire.TStatusCode_OK}, BeProcessEpoch: epoch, Capacity: &capacity,
		Version: &version}
	if tweak := f.hbTweak[addr]; tweak != nil {
		tweak(resp)
	}
	return resp, nil
}

func (f *fakeBackends) Inspect(_ context.Context, addr string, _ *wire.TInspectDatasetRequest) (*wire.TInspectDatasetResponse, error) {
	return nil, notSentErr(addr)
}

func (f *fakeBackends) Query(_ context.Context, addr string, req *wire.TQueryInvocationsRequest) (*wire.TQueryInvocationsResponse, error) {
	f.mu.Lock()
	f.queries = append(f.queries, req)
	fn := f.query
	f.mu.Unlock()
	if fn != nil {
		return fn(addr, req)
	}
	return nil, notSentErr(addr)
}

func (f *fakeBackends) JobLog(_ context.Context, addr string, _ *wire.TJobLogRequest) (*wire.TJobLogResponse, error) {
	return nil, notSentErr(addr)
}

func (f *fakeBackends) ProbeStore(_ context.Context, addr string, _ *wire.TProbeStoreRequest) (*wire.TProbeStoreResponse, error) {
	return nil, notSentErr(addr)
}

func (f *fakeBackends) Resolve(ctx context.Context, addr string, req *wire.TResolveJobRequest) (*wire.TResolveJobResponse, error) {
	f.mu.Lock()
	f.resolves = append(f.resolves, resolveCall{addr, req})
	fn := f.resolve
	f.mu.Unlock()
	if fn != nil {
		return fn(ctx, addr, req)
	}
	return nil, notSentErr(addr)
}

func (f *fakeBackends) submitted() []submitCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]submitCall(nil), f.submits...)
}

func (f *fakeBackends) queried() []*wire.TQueryInvocationsRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*wire.TQueryInvocationsRequest(nil), f.queries...)
}

// queryAnswer answers every asked id with the state states[id] gives
// (UNKNOWN_INVOCATION when absent).
func queryAnswer(states map[string]*wire.TInvocationStatus) func(string, *wire.TQueryInvocationsRequest) (*wire.TQueryInvocationsResponse, error) {
	return func(_ string, req *wire.TQueryInvocationsRequest) (*wire.TQueryInvocationsResponse, error) {
		out := &wire.TQueryInvocationsResponse{Status: &wire.TStatus{StatusCode: wire.TStatusCode_OK}}
		for _, id := range req.InvocationIds {
			st, ok := states[id]
			if !ok {
				st = &wire.TInvocationStatus{InvocationID: id, State: wire.TLanceInvocationState_UNKNOWN_INVOCATION}
			}
			out.Invocations = append(out.Invocations, st)
		}
		return out, nil
	}
}
