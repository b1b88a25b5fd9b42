// Package rpctest provides a fake backend for tests over loopback: a real
// rpc.Server on 127.0.0.1:0 serving wire.LanceBackendService, whose answers
// tests program and whose received requests tests inspect.
package rpctest

import (
	"context"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/job/jobwire"
	"github.com/lancemaster/lancemaster/pkg/rpc"
)

// ErrDropConnection, returned by a SubmitHook, makes the fake close the
// connection without answering: the client sees a failure after its bytes
// left (an ambiguous send).
var ErrDropConnection = thrift.ErrAbandonRequest

// SubmitHook, when set, decides the answer to every dispatch after it has
// been recorded. Returning ErrDropConnection drops the connection; any other
// error is answered as a TApplicationException INTERNAL_ERROR. It is called
// from the server's connection goroutines, concurrently.
type SubmitHook func(ctx context.Context, d *wire.TLanceIndexJobDispatch) (*wire.TStatus, error)

// FakeBackend is a scripted wire.LanceBackendService.
//
// Default behaviour, in the order a real backend checks (DESIGN.md §12):
//   - Submit records the dispatch (always, whatever the answer), then answers
//     STALE_EPOCH when be_process_epoch is not the fake's epoch, then
//     STALE_LEADER_TERM when leader_term is below the highest term seen, then
//     OK for a redelivered invocation id, then the status set by
//     SetSubmitStatus (OK by default). An OK answer marks the invocation as
//     accepted (Query reports it QUEUED).
//   - Heartbeat answers OK with the epoch and records the request.
//   - Inspect answers the snapshot set by SetDataset for the dataset_uri, or a
//     NOT_FOUND status for an unknown one.
//   - Query answers STALE_EPOCH / STALE_LEADER_TERM as Submit does, else one
//     entry per id: the status set by SetInvocation, else QUEUED for an
//     accepted invocation, else UNKNOWN_INVOCATION.
//
// Every storage_options map received (Submit and Inspect) is recorded so that
// tests can check credentials reached the wire. SetRecordReads(false) stops
// recording the reads (Heartbeat, Inspect, Query, Resolve and their
// storage_options) for a load that would otherwise keep every request.
//
// Concurrency: every method is safe for concurrent use, also while requests
// are being served. Returned requests are the decoded originals: read them,
// do not modify them.
type FakeBackend struct {
	srv *rpc.Server

	mu             sync.Mutex
	epoch          int64
	highestTerm    int64
	datasets       map[string]*wire.TInspectDatasetResponse
	submitStatus   *wire.TStatus
	submitHook     SubmitHook
	dispatches     []*wire.TLanceIndexJobDispatch
	counts         map[string]int
	accepted       map[string]bool
	invocations    map[string]*wire.TInvocationStatus
	heartbeats     []*wire.THeartbeatRequest
	inspects       []*wire.TInspectDatasetRequest
	queries        []*wire.TQueryInvocationsRequest
	resolves       []*wire.TResolveJobRequest
	resolveAnswer  func(*wire.TResolveJobRequest) *wire.TResolveJobResponse
	storageOptions []map[string]string
	jobLogHook     JobLogHook
	probeHook      ProbeStoreHook
	skipReads      bool // SetRecordReads(false)
}

// NewFakeBackend starts a fake backend on 127.0.0.1:0 with epoch 1; it is
// closed when the test ends.
func NewFakeBackend(t testing.TB) *FakeBackend {
	t.Helper()
	return NewFakeBackendWithConfig(t, rpc.DefaultConfig())
}

// NewFakeBackendWithConfig is NewFakeBackend serving with cfg: with
// cfg.Certs (a backend certificate) it speaks mutual TLS and authorizes
// calls as a real backend does (rpc.BackendPolicy: masters only).
func NewFakeBackendWithConfig(t testing.TB, cfg rpc.Config) *FakeBackend {
	t.Helper()
	f, err := StartFakeBackend(cfg)
	if err != nil {
		t.Fatalf("rpctest: %v", err)
	}
	t.Cleanup(f.Close)
	return f
}

// StartFakeBackend is NewFakeBackendWithConfig outside a test (the
// benchmark's): the caller closes it.
func StartFakeBackend(cfg rpc.Config) (*FakeBackend, error) {
	f := &FakeBackend{
		epoch:        1,
		datasets:     make(map[string]*wire.TInspectDatasetResponse),
		submitStatus: &wire.TStatus{StatusCode: wire.TStatusCode_OK},
		counts:       make(map[string]int),
		accepted:     make(map[string]bool),
		invocations:  make(map[string]*wire.TInvocationStatus),
	}
	srv, err := rpc.NewServer("127.0.0.1:0", wire.NewLanceBackendServiceProcessor(handler{f}), cfg, zap.NewNop(),
		rpc.WithPolicy(rpc.BackendPolicy()))
	if err != nil {
		return nil, err
	}
	if err := srv.Serve(); err != nil {
		return nil, err
	}
	f.srv = srv
	return f, nil
}

// SetRecordReads says whether the reads a backend serves (Heartbeat,
// Inspect, Query, Resolve) are recorded for Heartbeats, Inspects, Queries,
// Resolves and StorageOptionsSeen; they are by default. The benchmark turns
// it off: a fake serving a long load in the masters' process would keep
// every request in their heap. Submits are always recorded.
func (f *FakeBackend) SetRecordReads(on bool) { f.mu.Lock(); f.skipReads = !on; f.mu.Unlock() }

// Addr returns the fake's host:port.
func (f *FakeBackend) Addr() string { return f.srv.Addr().String() }

// Close stops the fake; connections in flight are dropped. Idempotent.
func (f *FakeBackend) Close() { f.srv.Close() }

// SetEpoch sets the process epoch (a restarted backend has a new one).
func (f *FakeBackend) SetEpoch(epoch int64) { f.mu.Lock(); f.epoch = epoch; f.mu.Unlock() }

// Epoch returns the process epoch.
func (f *FakeBackend) Epoch() int64 { f.mu.Lock(); defer f.mu.Unlock(); return f.epoch }

// HighestLeaderTerm returns the highest leader term seen in any request.
func (f *FakeBackend) HighestLeaderTerm() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.highestTerm
}

// SetDataset makes Inspect of uri answer snap.
func (f *FakeBackend) SetDataset(uri string, snap job.Snapshot) {
	f.SetInspectResponse(uri, jobwire.InspectResponse(&snap))
}

// SetInspectResponse makes Inspect of uri answer resp as is (for example a
// non-OK status).
func (f *FakeBackend) SetInspectResponse(uri string, resp *wire.TInspectDatasetResponse) {
	f.mu.Lock()
	f.datasets[uri] = resp
	f.mu.Unlock()
}

// SetSubmitStatus sets the status answered to a new, valid dispatch.
func (f *FakeBackend) SetSubmitStatus(code wire.TStatusCode, msgs ...string) {
	f.mu.Lock()
	f.submitStatus = &wire.TStatus{StatusCode: code, ErrorMsgs: msgs}
	f.mu.Unlock()
}

// SetSubmitHook replaces the default Submit answer (nil restores it). The
// dispatch is recorded before the hook runs.
func (f *FakeBackend) SetSubmitHook(h SubmitHook) { f.mu.Lock(); f.submitHook = h; f.mu.Unlock() }

// SetInvocation makes Query answer st for its invocation id (for example
// FINISHED with a result, or RUNNING).
func (f *FakeBackend) SetInvocation(st *wire.TInvocationStatus) {
	f.mu.Lock()
	f.invocations[st.InvocationID] = st
	f.mu.Unlock()
}

// Dispatches returns every dispatch received, in arrival order.
func (f *FakeBackend) Dispatches() []*wire.TLanceIndexJobDispatch {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*wire.TLanceIndexJobDispatch(nil), f.dispatches...)
}

// SubmitCount returns how many times a dispatch with invocationID arrived.
func (f *FakeBackend) SubmitCount(invocationID string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.counts[invocationID]
}

// InvocationCounts returns, per invocation id, how many dispatches arrived.
// A "never twice" check is: every value is 1.
func (f *FakeBackend) InvocationCounts() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.counts)
}

// Heartbeats returns every heartbeat request received, in order.
func (f *FakeBackend) Heartbeats() []*wire.THeartbeatRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*wire.THeartbeatRequest(nil), f.heartbeats...)
}

// Inspects returns every inspect request received, in order.
func (f *FakeBackend) Inspects() []*wire.TInspectDatasetRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*wire.TInspectDatasetRequest(nil), f.inspects...)
}

// Queries returns every query request received, in order.
func (f *FakeBackend) Queries() []*wire.TQueryInvocationsRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*wire.TQueryInvocationsRequest(nil), f.queries...)
}

// StorageOptionsSeen returns a copy of every storage_options map received
// (Submit and Inspect, in arrival order; a request without options adds
// nothing).
func (f *FakeBackend) StorageOptionsSeen() []map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]map[string]string, len(f.storageOptions))
	for i, m := range f.storageOptions {
		out[i] = maps.Clone(m)
	}
	return out
}

// WaitForSubmits waits until n dispatches have arrived or timeout passes,
// and reports whether they did.
func (f *FakeBackend) WaitForSubmits(n int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		f.mu.Lock()
		got := len(f.dispatches)
		f.mu.Unlock()
		if got >= n {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
}

// fenceLocked applies the epoch and term checks shared by Submit and Query;
// it returns a non-nil status when the request is refused.
func (f *FakeBackend) fenceLocked(epoch int64, term *int64) *wire.TStatus {
	if epoch != f.epoch {
		return &wire.TStatus{StatusCode: wire.TStatusCode_STALE_EPOCH, ErrorMsgs: []string{"wrong process epoch"}}
	}
	if term != nil {
		if *term < f.highestTerm {
			return &wire.TStatus{StatusCode: wire.TStatusCode_STALE_LEADER_TERM, ErrorMsgs: []string{"a higher leader term has been seen"}}
		}
		f.highestTerm = *term
	}
	return nil
}

func (f *FakeBackend) seeTermLocked(term *int64) {
	if term != nil && *term > f.highestTerm {
		f.highestTerm = *term
	}
}

// handler implements the service for a FakeBackend.
type handler struct{ f *FakeBackend }

func (h handler) SubmitLanceIndexJob(ctx context.Context, d *wire.TLanceIndexJobDispatch) (*wire.TStatus, error) {
	f := h.f
	f.mu.Lock()
	if d == nil {
		f.mu.Unlock()
		return &wire.TStatus{StatusCode: wire.TStatusCode_INVALID_ARGUMENT}, nil
	}
	f.dispatches = append(f.dispatches, d)
	f.counts[d.InvocationID]++
	if d.StorageOptions != nil {
		f.storageOptions = append(f.storageOptions, maps.Clone(d.StorageOptions))
	}
	hook := f.submitHook
	f.mu.Unlock()
	if hook != nil {
		return hook(ctx, d)
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	if st := f.fenceLocked(d.BeProcessEpoch, d.LeaderTerm); st != nil {
		return st, nil
	}
	if f.accepted[d.InvocationID] {
		return &wire.TStatus{StatusCode: wire.TStatusCode_OK}, nil
	}
	st := &wire.TStatus{StatusCode: f.submitStatus.StatusCode, ErrorMsgs: append([]string(nil), f.submitStatus.ErrorMsgs...)}
	if st.StatusCode == wire.TStatusCode_OK {
		f.accepted[d.InvocationID] = true
	}
	return st, nil
}

func (h handler) Heartbeat(_ context.Context, r *wire.THeartbeatRequest) (*wire.THeartbeatResponse, error) {
	f := h.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.skipReads {
		f.heartbeats = append(f.heartbeats, r)
	}
	if r != nil {
		f.seeTermLocked(r.LeaderTerm)
	}
	capacity := int32(2)
	return &wire.THeartbeatResponse{Status: &wire.TStatus{StatusCode: wire.TStatusCode_OK}, BeProcessEpoch: f.epoch, Capacity: &capacity}, nil
}

func (h handler) InspectLanceDataset(_ context.Context, r *wire.TInspectDatasetRequest) (*wire.TInspectDatasetResponse, error) {
	f := h.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.skipReads {
		f.inspects = append(f.inspects, r)
	}
	if r == nil {
		return &wire.TInspectDatasetResponse{Status: &wire.TStatus{StatusCode: wire.TStatusCode_INVALID_ARGUMENT}}, nil
	}
	if r.StorageOptions != nil && !f.skipReads {
		f.storageOptions = append(f.storageOptions, maps.Clone(r.StorageOptions))
	}
	if resp, ok := f.datasets[r.DatasetURI]; ok {
		return resp, nil
	}
	return &wire.TInspectDatasetResponse{Status: &wire.TStatus{
		StatusCode: wire.TStatusCode_NOT_FOUND, ErrorMsgs: []string{"dataset not found"},
	}}, nil
}

func (h handler) QueryLanceIndexInvocations(_ context.Context, r *wire.TQueryInvocationsRequest) (*wire.TQueryInvocationsResponse, error) {
	f := h.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.skipReads {
		f.queries = append(f.queries, r)
	}
	if r == nil {
		return &wire.TQueryInvocationsResponse{Status: &wire.TStatus{StatusCode: wire.TStatusCode_INVALID_ARGUMENT}}, nil
	}
	term := r.LeaderTerm
	if st := f.fenceLocked(r.BeProcessEpoch, &term); st != nil {
		return &wire.TQueryInvocationsResponse{Status: st}, nil
	}
	out := &wire.TQueryInvocationsResponse{
		Status:      &wire.TStatus{StatusCode: wire.TStatusCode_OK},
		Invocations: []*wire.TInvocationStatus{},
	}
	for _, id := range r.InvocationIds {
		switch st, ok := f.invocations[id]; {
		case ok:
			out.Invocations = append(out.Invocations, st)
		case f.accepted[id]:
			out.Invocations = append(out.Invocations, &wire.TInvocationStatus{InvocationID: id, State: wire.TLanceInvocationState_QUEUED})
		default:
			out.Invocations = append(out.Invocations, &wire.TInvocationStatus{InvocationID: id, State: wire.TLanceInvocationState_UNKNOWN_INVOCATION})
		}
	}
	return out, nil
}

// SetResolve programs the answer to resolve_lance_index_job; nil (the
// default) answers NOT_IMPLEMENTED_ERROR, which proves nothing.
func (f *FakeBackend) SetResolve(fn func(*wire.TResolveJobRequest) *wire.TResolveJobResponse) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.resolveAnswer = fn
}

// Resolves returns the resolve requests received, in order.
func (f *FakeBackend) Resolves() []*wire.TResolveJobRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*wire.TResolveJobRequest(nil), f.resolves...)
}

func (h handler) ResolveLanceIndexJob(_ context.Context, r *wire.TResolveJobRequest) (*wire.TResolveJobResponse, error) {
	f := h.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.skipReads {
		f.resolves = append(f.resolves, r)
	}
	if r != nil && f.resolveAnswer != nil {
		if resp := f.resolveAnswer(r); resp != nil {
			return resp, nil
		}
	}
	return &wire.TResolveJobResponse{Status: &wire.TStatus{StatusCode: wire.TStatusCode_NOT_IMPLEMENTED_ERROR,
		ErrorMsgs: []string{"fake backend: no resolve answer programmed"}}}, nil
}
