package dispatch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// Time: leader services read it from an injected clock, a func() time.Time
// (Deps' Clock fields; time.Now when unset; tests pass a
// clocktest.Clock's Now). Apply never reads a clock: time travels in
// commands.

// TermFunc returns the Raft term of the leadership that ctx belongs to (the
// fencing token, DESIGN.md §7). pkg/master wires cluster.LeaderTermFromContext
// (services.go).
type TermFunc func(ctx context.Context) (uint64, bool)

// Waker wakes the dispatch round at once (an admission, a report, a backend
// change), so nobody waits for the interval. Safe for concurrent use; Wake
// never blocks.
type Waker struct{ ch chan struct{} }

// NewWaker returns a Waker.
func NewWaker() *Waker { return &Waker{ch: make(chan struct{}, 1)} }

// Wake asks for a round; wakes that arrive while one is pending coalesce.
func (w *Waker) Wake() {
	select {
	case w.ch <- struct{}{}:
	default:
	}
}

// C is the channel the dispatcher waits on.
func (w *Waker) C() <-chan struct{} { return w.ch }

// Invocation is a fresh dispatch identity's random part.
type Invocation struct {
	ID     string // ≤ job.MaxInvocationIDBytes
	Secret string // journaled, sent once, echoed by reports; never logged or shown
}

// InvocationSource mints invocation ids and secrets on the leader, before the
// M1 command is proposed (the FSM never reads randomness).
type InvocationSource func() (Invocation, error)

// RandomInvocations mints 128-bit ids and 256-bit secrets from crypto/rand.
func RandomInvocations() (Invocation, error) {
	var b [48]byte
	if _, err := rand.Read(b[:]); err != nil {
		return Invocation{}, fmt.Errorf("dispatch: read random: %w", err)
	}
	return Invocation{ID: hex.EncodeToString(b[:16]), Secret: hex.EncodeToString(b[16:])}, nil
}

// propose encodes and proposes one command with the service's context (so a
// service whose term is over cannot write) and returns the Apply response.
func propose(ctx context.Context, p raftfsm.Proposer, t raftfsm.CommandType, cmd thrift.TStruct) (*journal.TApplyResponse, error) {
	data, err := raftfsm.Encode(t, cmd)
	if err != nil {
		return nil, err
	}
	return p.Propose(ctx, data)
}
