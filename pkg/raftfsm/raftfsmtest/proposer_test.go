package raftfsmtest

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/options"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

func setOption(t *testing.T, value string) []byte {
	t.Helper()
	cmd, err := raftfsm.Encode(raftfsm.CmdSetOption, &journal.TSetOptionCommand{NowMs: 1, Key: options.OptDispatcherPaused, Value: value})
	if err != nil {
		t.Fatal(err)
	}
	return cmd
}

func TestProposerAppliesAtTheNextIndexAndRecords(t *testing.T) {
	p := &Proposer{FSM: raftfsm.New(nil), Record: true}
	for i, v := range []string{"true", "false"} {
		resp, err := p.Propose(context.Background(), setOption(t, v))
		if err != nil || resp.GetIndex() != int64(i+1) {
			t.Fatalf("proposal %d: index %d, err %v; want index %d", i+1, resp.GetIndex(), err, i+1)
		}
	}
	if p.Index() != 2 || p.FSM.State().AppliedIndex() != 2 {
		t.Fatalf("index %d, FSM applied %d; want 2, 2", p.Index(), p.FSM.State().AppliedIndex())
	}
	es := p.Since(1)
	if len(es) != 1 || es[0].Index != 2 || es[0].Resp.GetIndex() != 2 || !slices.Equal(es[0].Data, setOption(t, "false")) {
		t.Fatalf("Since(1) = %+v, want the second entry", es)
	}
	if got := p.TypesSince(0); !slices.Equal(got, []raftfsm.CommandType{raftfsm.CmdSetOption, raftfsm.CmdSetOption}) {
		t.Fatalf("TypesSince(0) = %v", got)
	}
	if (&Proposer{FSM: raftfsm.New(nil)}).Since(0) != nil {
		t.Fatal("a proposer without Record kept entries")
	}
}

func TestProposerLeadership(t *testing.T) {
	p := &Proposer{FSM: raftfsm.New(nil)}
	if !p.IsLeader() || p.LeaderTerm() != 1 {
		t.Fatalf("zero value: leader %v term %d, want true 1", p.IsLeader(), p.LeaderTerm())
	}
	p.SetTerm(7)
	if p.LeaderTerm() != 7 {
		t.Fatalf("term %d, want 7", p.LeaderTerm())
	}
	p.SetLeader(false)
	if _, err := p.Propose(context.Background(), setOption(t, "true")); !errors.Is(err, raftfsm.ErrNotLeader) || p.Index() != 0 {
		t.Fatalf("a follower's proposal: err %v, index %d; want ErrNotLeader and nothing applied", err, p.Index())
	}
	if p.IsLeader() || p.LeaderTerm() != 0 {
		t.Fatalf("follower: leader %v term %d, want false 0", p.IsLeader(), p.LeaderTerm())
	}
	p.Forwards = true
	if _, err := p.Propose(context.Background(), setOption(t, "true")); err != nil || p.Index() != 1 {
		t.Fatalf("a forwarding follower's proposal: err %v, index %d; want it applied", err, p.Index())
	}
}
