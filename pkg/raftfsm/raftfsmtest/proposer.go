// Package raftfsmtest holds test kits around the journal FSM.
package raftfsmtest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// Proposer applies every proposed command straight to an FSM, as a
// single-node leader would, at the next journal index. It is a
// raftfsm.Proposer. Its zero value (with FSM set) leads at term 1 and keeps
// no entries; SetLeader and SetTerm change that, Record keeps the entries,
// Forwards lets a follower apply.
//
// Safe for concurrent use: proposals are applied one at a time, in the order
// they take the proposer's lock, and every method may be called while
// proposals run. The FSM is not otherwise guarded: a test that applies to it
// directly must not do so while proposals run.
type Proposer struct {
	FSM *raftfsm.FSM
	// Record, when true, keeps a copy of every applied entry (Since,
	// TypesSince). Set it before the first proposal; benchmarks leave it off.
	Record bool
	// Forwards, when true, makes a proposer that does not lead still apply
	// what it is given, as a follower forwarding to its leader would (so a
	// test counts the proposals it should not have made); off, it refuses.
	Forwards bool

	mu      sync.Mutex
	index   uint64
	entries []Entry

	follower atomic.Bool   // false: leads (the zero value leads)
	term     atomic.Uint64 // 0: term 1
}

// Entry is one entry a recording Proposer applied.
type Entry struct {
	Index uint64
	// Data is the encoded command (a copy): its type byte, then the body.
	Data []byte
	// Resp is the FSM's response, with Index set.
	Resp *journal.TApplyResponse
}

// Type is the entry's command type.
func (e Entry) Type() raftfsm.CommandType { return raftfsm.CommandType(e.Data[0]) }

// Propose applies cmd and answers the FSM's response with its index. When
// the proposer does not lead (SetLeader(false)) it answers
// raftfsm.ErrNotLeader and applies nothing, unless it Forwards. It does not
// look at ctx.
func (p *Proposer) Propose(_ context.Context, cmd []byte) (*journal.TApplyResponse, error) {
	if p.follower.Load() && !p.Forwards {
		return nil, raftfsm.ErrNotLeader
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.index++
	resp, ok := p.FSM.Apply(&raft.Log{Index: p.index, Term: p.term1(), Type: raft.LogCommand, Data: cmd}).(*journal.TApplyResponse)
	if !ok {
		return nil, errors.New("raftfsmtest: unexpected FSM response")
	}
	idx := int64(p.index)
	resp.Index = &idx
	if p.Record {
		p.entries = append(p.entries, Entry{Index: p.index, Data: append([]byte(nil), cmd...), Resp: resp})
	}
	return resp, nil
}

func (p *Proposer) term1() uint64 {
	if t := p.term.Load(); t != 0 {
		return t
	}
	return 1
}

// SetLeader makes the proposer lead (the default) or not. Safe to call while
// proposals run; a proposal already past its leadership check still applies.
func (p *Proposer) SetLeader(leads bool) { p.follower.Store(!leads) }

// SetTerm sets the term the proposer leads in (1 until set). Safe to call
// while proposals run.
func (p *Proposer) SetTerm(term uint64) { p.term.Store(term) }

// IsLeader reports whether the proposer leads.
func (p *Proposer) IsLeader() bool { return !p.follower.Load() }

// LeaderTerm is the term the proposer leads in, or 0 when it does not lead.
func (p *Proposer) LeaderTerm() uint64 {
	if p.follower.Load() {
		return 0
	}
	return p.term1()
}

// Index is the last index applied, which is also how many entries were
// applied.
func (p *Proposer) Index() uint64 { p.mu.Lock(); defer p.mu.Unlock(); return p.index }

// Since returns the entries applied after the first n (a recording proposer
// only; the slice is a copy).
func (p *Proposer) Since(n int) []Entry {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Entry(nil), p.entries[n:]...)
}

// TypesSince lists the command types of the entries applied after the
// first n, in order (a recording proposer only).
func (p *Proposer) TypesSince(n int) []raftfsm.CommandType {
	var out []raftfsm.CommandType
	for _, e := range p.Since(n) {
		out = append(out, e.Type())
	}
	return out
}
