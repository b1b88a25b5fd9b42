package backend

import (
	"context"

	"github.com/lancemaster/lancemaster/gen-go/wire"
)

// GetLanceIndexJobLog answers a build's redacted stderr ring (jobs logs).
// Not implemented yet: NOT_IMPLEMENTED_ERROR, which the master reads as
// "no log from the backend" and falls back to the journal's tail.
func (s *service) GetLanceIndexJobLog(_ context.Context, _ *wire.TJobLogRequest) (*wire.TJobLogResponse, error) {
	return &wire.TJobLogResponse{Status: &wire.TStatus{StatusCode: wire.TStatusCode_NOT_IMPLEMENTED_ERROR,
		ErrorMsgs: []string{"job logs are not served by this backend"}}}, nil
}
