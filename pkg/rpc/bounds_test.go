package rpc_test

import (
	"testing"

	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/rpc"
)

// An external test package, so that pinning against pkg/job can never form
// an import cycle.
func TestFrameBoundMatchesDesign(t *testing.T) {
	if rpc.DefaultMaxFrameSize != job.MaxFrameBytes {
		t.Fatalf("frame bound %d differs from DESIGN.md §10 (job.MaxFrameBytes %d)", rpc.DefaultMaxFrameSize, job.MaxFrameBytes)
	}
}
