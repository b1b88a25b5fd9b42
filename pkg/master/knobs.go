package master

import (
	"time"

	"github.com/lancemaster/lancemaster/pkg/dispatch"
)

// Knobs are what only tests and the benchmark turn: fault-injection points
// and periods shorter than production's. `lancemaster serve` never sets
// them (Options.Knobs is nil); a zero field keeps the production value.
type Knobs struct {
	// DispatchHooks are the dispatcher's fault-injection points.
	DispatchHooks dispatch.Hooks
	// HeartbeatInterval overrides the pool's heartbeat period.
	HeartbeatInterval time.Duration
	// OptimizePolicyInterval overrides the OPTIMIZE policy's pass period
	// (default dispatch.DefaultOptimizePolicyInterval).
	OptimizePolicyInterval time.Duration
	// ReadyMaxApplyLag is /readyz's allowance of committed entries not yet
	// applied (default DefaultReadyMaxApplyLag).
	ReadyMaxApplyLag uint64
}
