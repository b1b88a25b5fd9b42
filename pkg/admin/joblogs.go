package admin

import (
	"context"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
)

// JobLogs answers a job's worker log (jobs logs). Not implemented yet.
func (s *Server) JobLogs(_ context.Context, _ int64, _ int32) (*adminapi.TJobLogs, error) {
	return nil, adminError(adminapi.TErrorCode_INVALID, "job logs are not supported by this master yet")
}
