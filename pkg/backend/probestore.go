package backend

import (
	"context"

	"github.com/lancemaster/lancemaster/gen-go/wire"
)

// ProbeObjectStore checks that an object store honours conditional PUT.
// Not implemented yet: NOT_IMPLEMENTED_ERROR (the store is not vouched for).
func (s *service) ProbeObjectStore(_ context.Context, _ *wire.TProbeStoreRequest) (*wire.TProbeStoreResponse, error) {
	return &wire.TProbeStoreResponse{Status: &wire.TStatus{StatusCode: wire.TStatusCode_NOT_IMPLEMENTED_ERROR,
		ErrorMsgs: []string{"object store probes are not served by this backend"}}}, nil
}
