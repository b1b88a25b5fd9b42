package backend

import (
	"context"
	"time"

	"github.com/lancemaster/lancemaster/pkg/backend/frame"
	"github.com/lancemaster/lancemaster/pkg/backend/supervisor"
)

// Runner runs one worker (the builder) for one request: build or inspect.
// The supervisor (pkg/backend/supervisor) is the production Runner; tests
// use a fake.
//
// Concurrency contract: Run is called from many goroutines at once (up to
// Config.Concurrency builds plus the inspects in flight) and must be safe for
// that. Run returns when the worker and everything it started is gone, or
// when it can say no more: it enforces the deadline itself (TERM, then KILL)
// and ends early when ctx is cancelled (agent shutdown, or an inspect whose
// caller hung up). The request carries storage credentials: a Runner hands
// them to the worker on stdin only, never logs them, and never returns them.
// Verified is called on every dispatch and must be cheap.
type Runner interface {
	Run(ctx context.Context, req *frame.Request, deadline time.Time) Outcome
	// Verified reports whether the configured isolation was verified at
	// start-up. With Isolation "required", a false refuses every dispatch
	// and inspect (NOT_READY).
	Verified() bool
}

// Outcome is what one Run ended with; Proof what it proves about the
// worker. They are the supervisor's own types, so *supervisor.Supervisor is
// a Runner as is.
type (
	Outcome = supervisor.Outcome
	Proof   = supervisor.Proof
)

// The proofs a Runner can give (DESIGN.md §12).
const (
	// ProofNone: nothing is proven; the worker may still run somewhere.
	ProofNone = supervisor.ProofNone
	// ProofChildReaped: the worker and everything it started are gone.
	ProofChildReaped = supervisor.ProofChildReaped
	// ProofNeverLaunched: the worker provably never started.
	ProofNeverLaunched = supervisor.ProofNeverLaunched
)

var _ Runner = (*supervisor.Supervisor)(nil)
