package master

import (
	"context"
	"time"

	"github.com/lancemaster/lancemaster/pkg/backend"
	"github.com/lancemaster/lancemaster/pkg/backend/frame"
)

// OKRunner (for this package's tests, internal and external) stands in for the supervisor: every inspect finds a table with
// an int32 "id" column, every build succeeds.
type OKRunner struct{}

func (OKRunner) Verified() bool { return true }

func (OKRunner) Run(_ context.Context, req *frame.Request, _ time.Time) backend.Outcome {
	if req.Mode == frame.ModeInspect {
		return backend.Outcome{Proof: backend.ProofChildReaped, Result: &frame.Result{Protocol: frame.Protocol,
			Mode: frame.ModeInspect, OK: true, DatasetVersion: 3, Fields: []frame.Field{{FieldID: 0, Name: "id", DataType: "int32"}}}}
	}
	return backend.Outcome{Proof: backend.ProofChildReaped, Result: &frame.Result{Protocol: frame.Protocol,
		Mode: frame.ModeBuild, ResultCode: "NATIVE_OK", Message: "built", NewDatasetVersion: 4}}
}
