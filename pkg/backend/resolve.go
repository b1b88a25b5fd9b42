package backend

import (
	"context"

	"github.com/lancemaster/lancemaster/gen-go/wire"
)

// ResolveLanceIndexJob reads a job's outcome from its dataset (DESIGN.md
// §13.4). Until the builder's resolve mode is wired, it answers
// NOT_IMPLEMENTED_ERROR: the master then treats the job as having no
// evidence (it never guesses an outcome from a refusal).
func (s *service) ResolveLanceIndexJob(_ context.Context, r *wire.TResolveJobRequest) (*wire.TResolveJobResponse, error) {
	return &wire.TResolveJobResponse{Status: statusf(wire.TStatusCode_NOT_IMPLEMENTED_ERROR,
		"this backend cannot resolve a job from its dataset")}, nil
}
