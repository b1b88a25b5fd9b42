package admin

import (
	"context"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
)

// OptimizeDataset admits an OPTIMIZE job (§14). Not implemented yet.
func (s *Server) OptimizeDataset(_ context.Context, _ *adminapi.TOptimizeRequest) (*adminapi.TAdmitResponse, error) {
	return nil, adminError(adminapi.TErrorCode_INVALID, "OPTIMIZE is not supported by this master yet")
}
