// Package raftfsmtest holds test kits around the journal FSM.
package raftfsmtest

import (
	"context"
	"errors"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// Proposer applies every proposed command straight to an FSM, as a
// single-node leader would, at the next journal index. It is a
// raftfsm.Proposer that always leads (term 1). Safe for concurrent use.
type Proposer struct {
	FSM   *raftfsm.FSM
	mu    sync.Mutex
	index uint64
}

// Propose applies cmd and answers the FSM's response with its index.
func (p *Proposer) Propose(_ context.Context, cmd []byte) (*journal.TApplyResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.index++
	resp, ok := p.FSM.Apply(&raft.Log{Index: p.index, Term: 1, Type: raft.LogCommand, Data: cmd}).(*journal.TApplyResponse)
	if !ok {
		return nil, errors.New("raftfsmtest: unexpected FSM response")
	}
	idx := int64(p.index)
	resp.Index = &idx
	return resp, nil
}

// IsLeader is always true.
func (p *Proposer) IsLeader() bool { return true }

// LeaderTerm is always 1.
func (p *Proposer) LeaderTerm() uint64 { return 1 }

// Index is the last index applied.
func (p *Proposer) Index() uint64 { p.mu.Lock(); defer p.mu.Unlock(); return p.index }
