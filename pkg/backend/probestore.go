package backend

import (
	"context"
	"errors"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/objstore"
)

// gateProbeTimeout bounds the probe a request waits for when the verdict
// is not cached: well under the masters' 30 s socket timeout, so a submit
// is answered before its caller gives up.
const gateProbeTimeout = 10 * time.Second

// ProbeObjectStore answers whether the object store of root_uri honours
// conditional PUT (If-None-Match: *), which Lance's commits rely on: for
// s3:// it writes a unique probe object under the root twice with
// If-None-Match: * and expects 412 on the second PUT, then deletes it
// (pkg/objstore). gs://, az:// and local roots answer true without a
// probe, with a detail that says why. The verdict is cached per
// (endpoint, bucket) for objstore.DefaultTTL, shared with the gate of
// inspect, submit and resolve.
//
// OK carries the verdict (conditional_put and detail). A probe that could
// not reach a verdict (the store unreachable, the credentials refused) is
// RUNTIME_ERROR; bad input INVALID_ARGUMENT; another cluster OTHER_CLUSTER.
// No message carries a storage option's value.
func (s *service) ProbeObjectStore(ctx context.Context, r *wire.TProbeStoreRequest) (*wire.TProbeStoreResponse, error) {
	a := s.a
	fail := func(code wire.TStatusCode, format string, args ...any) (*wire.TProbeStoreResponse, error) {
		return &wire.TProbeStoreResponse{Status: statusf(code, format, args...)}, nil
	}
	if r == nil {
		return fail(wire.TStatusCode_INVALID_ARGUMENT, "no request")
	}
	if err := job.CheckBytes("root_uri", r.RootURI, job.MaxURIBytes); err != nil || r.RootURI == "" {
		return fail(wire.TStatusCode_INVALID_ARGUMENT, "root_uri is missing, too long or not UTF-8")
	}
	if err := checkStorageOptions(r.StorageOptions); err != nil {
		return fail(wire.TStatusCode_INVALID_ARGUMENT, "%s", err)
	}
	a.mu.Lock()
	fenced := a.fenceClusterLocked(r.GetClusterID(), noLeaderTerm)
	a.mu.Unlock()
	if fenced != nil {
		return &wire.TProbeStoreResponse{Status: fenced}, nil
	}
	timeout := objstore.DefaultProbeTimeout
	if ms := r.GetTimeoutMs(); ms > 0 && time.Duration(ms)*time.Millisecond < timeout {
		timeout = time.Duration(ms) * time.Millisecond
	}
	scrub := probeScrubber(r.StorageOptions)
	res, err := a.stores.Check(ctx, r.RootURI, r.StorageOptions, timeout)
	if err != nil {
		code := wire.TStatusCode_INVALID_ARGUMENT
		var pe *objstore.ProbeError
		if errors.As(err, &pe) {
			code = wire.TStatusCode_RUNTIME_ERROR
		}
		msg := scrub.message(err.Error())
		a.log.Info("object store probe failed", zap.Stringer("status", code), zap.String("message", msg))
		return fail(code, "%s", msg)
	}
	detail := scrub.message(res.Detail)
	a.log.Info("object store probed", zap.Bool("conditional_put", res.ConditionalPut), zap.String("detail", detail))
	return &wire.TProbeStoreResponse{Status: okStatus(), ConditionalPut: thrift.BoolPtr(res.ConditionalPut),
		Detail: thrift.StringPtr(detail)}, nil
}

// storeGate is the first step of every request that opens a dataset on an
// s3:// store (inspect, submit, resolve): nil when the store is vouched
// for (or the dataset is not on S3), else the non-OK status to answer. A
// store that ignores If-None-Match is INVALID_ARGUMENT with the reason; a
// probe that could not reach a verdict RUNTIME_ERROR.
func (a *Agent) storeGate(ctx context.Context, uri string, opts map[string]string) *wire.TStatus {
	if objstore.Kind(uri) != objstore.KindS3 {
		return nil
	}
	err := a.stores.Require(ctx, uri, opts, gateProbeTimeout)
	if err == nil {
		return nil
	}
	code := wire.TStatusCode_INVALID_ARGUMENT
	var pe *objstore.ProbeError
	if errors.As(err, &pe) {
		code = wire.TStatusCode_RUNTIME_ERROR
	}
	msg := probeScrubber(opts).message(err.Error())
	a.log.Warn("request refused: the object store is not vouched for", zap.Stringer("status", code), zap.String("message", msg))
	return &wire.TStatus{StatusCode: code, ErrorMsgs: []string{msg}}
}

// probeScrubber removes from a probe's words every storage option value
// except the ones a probe message names on purpose (the endpoint, the
// region, allow_http and the addressing style): those say where the probe
// went and are no credentials. Keys are kept, so a message can name the
// option to fix.
func probeScrubber(opts map[string]string) scrubber {
	var values []string
	for k, v := range opts {
		if !objstore.IsDescriptiveOption(k) {
			values = append(values, v)
		}
	}
	return newScrubber(nil, values...)
}
