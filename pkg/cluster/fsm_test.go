package cluster

import (
	"fmt"
	"io"
	"sync/atomic"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// The tests run the real journal FSM with real encoded commands: command i
// registers backend "be-<i>.test:9050" (CmdAddBackend), so every command is
// distinct, a repeat answers ALREADY_EXISTS, and the number of registered
// backends counts the commands applied.

// testableFSM is what the tests need from the FSM under test.
type testableFSM interface {
	raft.FSM
	// Count is the number of distinct test commands applied.
	Count() int
	// Restores counts Restore calls (a local snapshot on start, or an install).
	Restores() int32
}

// testCmd is the i-th distinct test command.
func testCmd(i int) []byte {
	b, err := raftfsm.Encode(raftfsm.CmdAddBackend, &journal.TBackendCommand{
		NowMs:   1_700_000_000_000 + int64(i),
		Address: fmt.Sprintf("be-%d.test:9050", i),
	})
	if err != nil {
		panic(err)
	}
	return b
}

// newTestFSM returns a fresh real FSM whose fatal errors fail the test
// instead of exiting the process.
func newTestFSM(t *testing.T) testableFSM {
	f := &countingFSM{FSM: raftfsm.New(nil)}
	f.OnFatal = func(err error) { t.Errorf("FSM fatal error: %v", err) }
	return f
}

// countingFSM wraps raftfsm.FSM to count Restore calls.
type countingFSM struct {
	*raftfsm.FSM
	restores atomic.Int32
	// gate, while set, holds every Apply until it is closed: a replica
	// whose FSM trails the commit index.
	gate atomic.Pointer[chan struct{}]
}

func (f *countingFSM) Apply(l *raft.Log) interface{} {
	if g := f.gate.Load(); g != nil {
		<-*g
	}
	return f.FSM.Apply(l)
}

func (f *countingFSM) Restore(rc io.ReadCloser) error {
	f.restores.Add(1)
	return f.FSM.Restore(rc)
}

func (f *countingFSM) Count() int { return len(f.State().Backends()) }

func (f *countingFSM) Restores() int32 { return f.restores.Load() }
