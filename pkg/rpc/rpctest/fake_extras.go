package rpctest

import (
	"context"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/gen-go/wire"
)

// JobLogHook, when set with SetJobLogHook, answers get_lance_index_job_log.
type JobLogHook func(*wire.TJobLogRequest) *wire.TJobLogResponse

// ProbeStoreHook, when set with SetProbeStoreHook, answers probe_object_store.
type ProbeStoreHook func(*wire.TProbeStoreRequest) *wire.TProbeStoreResponse

// SetJobLogHook programs get_lance_index_job_log (nil: NOT_IMPLEMENTED_ERROR).
func (f *FakeBackend) SetJobLogHook(h JobLogHook) { f.mu.Lock(); f.jobLogHook = h; f.mu.Unlock() }

// SetProbeStoreHook programs probe_object_store (nil: conditional_put true).
func (f *FakeBackend) SetProbeStoreHook(h ProbeStoreHook) {
	f.mu.Lock()
	f.probeHook = h
	f.mu.Unlock()
}

func (h handler) GetLanceIndexJobLog(_ context.Context, r *wire.TJobLogRequest) (*wire.TJobLogResponse, error) {
	h.f.mu.Lock()
	hook := h.f.jobLogHook
	h.f.mu.Unlock()
	if hook != nil && r != nil {
		if resp := hook(r); resp != nil {
			return resp, nil
		}
	}
	return &wire.TJobLogResponse{Status: &wire.TStatus{StatusCode: wire.TStatusCode_NOT_IMPLEMENTED_ERROR,
		ErrorMsgs: []string{"fake backend: no job log programmed"}}}, nil
}

func (h handler) ProbeObjectStore(_ context.Context, r *wire.TProbeStoreRequest) (*wire.TProbeStoreResponse, error) {
	h.f.mu.Lock()
	hook := h.f.probeHook
	h.f.mu.Unlock()
	if hook != nil && r != nil {
		if resp := hook(r); resp != nil {
			return resp, nil
		}
	}
	return &wire.TProbeStoreResponse{Status: &wire.TStatus{StatusCode: wire.TStatusCode_OK},
		ConditionalPut: thrift.BoolPtr(true), Detail: thrift.StringPtr("fake backend: conditional PUT assumed")}, nil
}
