package admin

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/options"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// Where the admissions are decided (decide.go): a journaled admission on
// the leader's own view, every other answer on a confirmed one.

// leadingOver proposes to the shared journal as the leader and applies each
// of its entries to its own replica at once, as a leader does; that
// replica lacks whatever else the journal holds until a read index brings
// it there (viewKit).
type leadingOver struct {
	l     *replLog
	local *raftfsm.FSM
}

func (p leadingOver) Propose(ctx context.Context, cmd []byte) (*journal.TApplyResponse, error) {
	resp, err := p.l.Propose(ctx, cmd)
	p.l.replay(p.local)
	return resp, err
}
func (leadingOver) IsLeader() bool     { return true }
func (leadingOver) LeaderTerm() uint64 { return 1 }

// viewKit is a leader whose own view (Deps.LeaderIndex) may trail the
// journal: its LeaderIndex is its replica's applied index, and a read
// index first brings its replica up to the journal. It counts its read
// indexes and its inspects; confirm set to an error makes every read index
// fail with it (a leader that cannot confirm its leadership).
type viewKit struct {
	m       *twoMasters
	srv     *Server
	reads   atomic.Int32
	seen    *seenInspects
	confirm error
}

func newViewKit(t *testing.T) *viewKit {
	t.Helper()
	m := newTwoMasters(t)
	m.lakeWithBackend(t, "/data/lake")
	k := &viewKit{m: m, seen: watchInspects(m.leader.d.Backends)}
	d := m.leader.d
	d.Proposer, d.Reader, d.Backends = leadingOver{m.log, m.local}, m.local, k.seen
	d.ReadIndex = func(context.Context) (uint64, error) {
		k.reads.Add(1)
		if k.confirm != nil {
			return 0, k.confirm
		}
		m.log.replay(m.local)
		return m.log.Index(), nil
	}
	d.CaughtUp = func(i uint64) bool { return m.local.State().AppliedIndex() >= i }
	d.LeaderIndex = func() (uint64, bool) { return m.local.State().AppliedIndex(), true }
	d.Published = m.local.Published
	k.srv = New(d)
	return k
}

// A leader journals an admission decided on its own view: no read index,
// one inspect, and the record is the one the confirmed path would journal.
func TestLeaderJournalsAnAdmissionOnItsOwnView(t *testing.T) {
	k := newViewKit(t)
	k.m.log.replay(k.m.local) // its view is the journal
	ctx := context.Background()
	resp, err := k.srv.CreateIndex(ctx, createReq("items", "v", "vector", "IVF_PQ"))
	if err != nil {
		t.Fatalf("admission: %v", err)
	}
	rec, ok := k.m.log.FSM.State().Job(resp.GetJobID())
	if !ok || rec.AdmittedDatasetVersion != 7 || rec.Column != "vector" || rec.SchemaContract == "" {
		t.Fatalf("journaled %+v", rec)
	}
	// No dataset at db.other: the inspect's refusal, given once confirmed.
	if _, err := k.srv.OptimizeDataset(ctx, optimizeReq("other")); errCode(t, err) != adminapi.TErrorCode_INSPECT_FAILED {
		t.Fatalf("optimize of a missing dataset: %v, want INSPECT_FAILED", err)
	}
	if n := k.reads.Load(); n != 1 {
		t.Fatalf("%d read indexes, want only the refusal's", n)
	}
	if got := k.seen.seen(); len(got) != 2 {
		t.Fatalf("inspects %v, want one per admission (the refusal reuses its own)", got)
	}
}

// A refusal judged on the leader's own view is never given as it is: with
// the leadership unconfirmed the answer is UNAVAILABLE, and once confirmed
// the decision is taken again on the current state, which here admits (the
// view lacked the catalog).
func TestLeaderRefusesOnlyOnAConfirmedView(t *testing.T) {
	k := newViewKit(t) // its view is empty: no catalog, no backend
	ctx := context.Background()
	k.confirm = errors.New("verify leadership: leadership lost")
	_, err := k.srv.CreateIndex(ctx, createReq("items", "v", "vector", "IVF_PQ"))
	if code := errCode(t, err); code != adminapi.TErrorCode_UNAVAILABLE {
		t.Fatalf("refusal on an unconfirmed view: %v, want UNAVAILABLE", err)
	}
	if k.m.log.FSM.State().LastJobID() != 0 {
		t.Fatal("something was admitted")
	}
	k.confirm = nil
	resp, err := k.srv.CreateIndex(ctx, createReq("items", "v", "vector", "IVF_PQ"))
	if err != nil {
		t.Fatalf("admission once confirmed: %v, want the current state's answer", err)
	}
	if _, ok := k.m.log.FSM.State().Job(resp.GetJobID()); !ok {
		t.Fatal("not journaled")
	}
	if n := k.reads.Load(); n != 2 {
		t.Fatalf("%d read indexes, want one per refusal on the view", n)
	}
}

// A no-op (IF NOT EXISTS on an index that exists as asked) is an answer for
// good too: given after a read index, with the view's inspect kept.
func TestLeaderGivesANoopOnlyOnAConfirmedView(t *testing.T) {
	k := newViewKit(t)
	k.m.log.replay(k.m.local)
	r := createReq("items", "id_idx", "id", "BTREE")
	yes := true
	r.IfNotExists = &yes
	resp, err := k.srv.CreateIndex(context.Background(), r)
	if err != nil || !resp.Noop {
		t.Fatalf("IF NOT EXISTS on an existing index: %+v %v, want a no-op", resp, err)
	}
	if n, got := k.reads.Load(), k.seen.seen(); n != 1 || len(got) != 1 {
		t.Fatalf("%d read indexes and inspects %v, want one of each", n, got)
	}
}

// What proves a journaled admission is the FSM's apply, not the view: a
// leader whose view still has the mutation gate open proposes, and the
// journal, where the gate is closed, refuses it; nothing is admitted.
func TestStaleLeaderViewJournalsNothingTheLogRefuses(t *testing.T) {
	k := newViewKit(t)
	k.m.log.replay(k.m.local)
	ctx := context.Background()
	if _, err := k.m.leader.SetOption(ctx, options.OptEnableMutation, "false", ""); err != nil {
		t.Fatal(err)
	}
	if !k.m.local.State().Options().EnableMutation {
		t.Fatal("the view is not stale")
	}
	_, err := k.srv.CreateIndex(ctx, createReq("items", "v", "vector", "IVF_PQ"))
	if code := errCode(t, err); code != adminapi.TErrorCode_MUTATION_DISABLED {
		t.Fatalf("admission past a closed gate: %v, want MUTATION_DISABLED", err)
	}
	if k.m.log.FSM.State().LastJobID() != 0 {
		t.Fatal("admitted past the closed gate")
	}
	if n := k.reads.Load(); n != 0 {
		t.Fatalf("%d read indexes: the refusal is the FSM's, judged on the log", n)
	}
}

// Without its own view (a follower, a leader before its term's barrier)
// a master decides on a confirmed one, as before.
func TestNoLeaderViewMeansAReadIndex(t *testing.T) {
	k := newViewKit(t)
	d := k.srv.d
	d.LeaderIndex = func() (uint64, bool) { return 0, false }
	if _, err := New(d).CreateIndex(context.Background(), createReq("items", "v", "vector", "IVF_PQ")); err != nil {
		t.Fatal(err)
	}
	if n := k.reads.Load(); n != 1 {
		t.Fatalf("%d read indexes, want 1", n)
	}
}

// A wait for this replica's apply ends at the view that brings it
// (Deps.Published), not at a later look: here the looks are an hour apart.
func TestAwaitEndsAtThePublishedView(t *testing.T) {
	m := newTwoMasters(t)
	d := m.follower.d
	d.Published = m.local.Published
	s := New(d)
	s.poll = time.Hour
	m.lakeWithBackend(t, "/data/lake") // on the leader: the follower's replica lacks it
	want := m.log.Index()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	looked, done := make(chan struct{}, 1), make(chan bool, 1)
	go func() {
		done <- s.await(ctx, func() bool {
			select {
			case looked <- struct{}{}:
			default:
			}
			return m.local.State().AppliedIndex() >= want
		})
	}()
	<-looked // the first look found the replica behind
	m.log.replay(m.local)
	if !<-done {
		t.Fatalf("the wait for index %d did not end when the replica applied it", want)
	}
}
