package admin

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/options"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
	"github.com/lancemaster/lancemaster/pkg/raftfsm/raftfsmtest"
)

// gatedProposer holds every proposal until the gate opens.
type gatedProposer struct {
	*raftfsmtest.Proposer
	gate chan struct{}
}

func (g *gatedProposer) Propose(ctx context.Context, cmd []byte) (*journal.TApplyResponse, error) {
	<-g.gate
	return g.Proposer.Propose(ctx, cmd)
}

// gated returns a copy of h's server whose proposals wait for the returned
// gate; close it to let them through.
func (h *harness) gated() (*Server, chan struct{}) {
	gate := make(chan struct{})
	d := h.srv.d
	d.Proposer = &gatedProposer{Proposer: h.prop, gate: gate}
	return New(d), gate
}

// awaitQueued waits until n admissions are queued or in flight.
func awaitQueued(t *testing.T, s *Server, n int, gate chan struct{}) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); s.admits.Waiting() < n; {
		if time.Now().After(deadline) {
			close(gate)
			t.Fatalf("only %d of %d admissions reached the journal", s.admits.Waiting(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// Concurrent admissions share entries; each keeps its own answer: its own
// job id, or its own typed error. Of several admissions of one index, in the
// same entry, exactly one wins and the others name it.
func TestConcurrentAdmissionsShareEntries(t *testing.T) {
	const distinct, same = 24, 8
	h := newHarness(t)
	for i := range distinct {
		h.setDataset(fmt.Sprintf("/data/lake/db/t%d.lance", i), 1)
	}
	srv, gate := h.gated()
	before := h.prop.Index()
	type answer struct {
		table string
		id    int64
		err   error
	}
	answers := make(chan answer, distinct+same)
	var wg sync.WaitGroup
	for i := range distinct + same {
		table, name := "items", "V"
		if i < distinct {
			table, name = fmt.Sprintf("t%d", i), "v"
		}
		wg.Go(func() {
			resp, err := srv.CreateIndex(context.Background(), createReq(table, name, "vector", "IVF_PQ"))
			a := answer{table: table, err: err}
			if err == nil {
				a.id = resp.GetJobID()
			}
			answers <- a
		})
	}
	awaitQueued(t, srv, distinct+same, gate)
	close(gate)
	wg.Wait()
	close(answers)

	ids := map[int64]string{}
	var winner int64
	var conflicts []*adminapi.TAdminError
	for a := range answers {
		if a.err != nil {
			if a.table != "items" || errCode(t, a.err) != adminapi.TErrorCode_FENCE_CONFLICT {
				t.Fatalf("table %s: %v", a.table, a.err)
			}
			conflicts = append(conflicts, a.err.(*adminapi.TAdminError))
			continue
		}
		if _, dup := ids[a.id]; dup || a.id <= 0 {
			t.Fatalf("job id %d answered twice or invalid", a.id)
		}
		ids[a.id] = a.table
		if a.table == "items" {
			winner = a.id
		}
		// Read-your-writes: the job is in this master's state already.
		rec, ok := h.fsm.State().Job(a.id)
		if !ok || rec.Table != a.table {
			t.Fatalf("job %d: %+v %v, want table %s", a.id, rec, ok, a.table)
		}
	}
	if len(ids) != distinct+1 || winner == 0 || len(conflicts) != same-1 {
		t.Fatalf("%d admitted (winner %d), %d conflicts", len(ids), winner, len(conflicts))
	}
	for _, ae := range conflicts {
		if ae.GetJobID() != winner || ae.Message != fenceConflictMessage("V", winner) {
			t.Fatalf("conflict %q (job %d), want job %d", ae.Message, ae.GetJobID(), winner)
		}
	}
	entries := h.prop.Index() - before
	if entries >= distinct+same || entries > maxAdmitFlights+1 {
		t.Fatalf("%d entries for %d admissions; want them packed", entries, distinct+same)
	}
}

// Quotas count the admissions ahead in the same entry; the refused ones get
// QUOTA_EXCEEDED and allocate nothing.
func TestConcurrentAdmissionsQuota(t *testing.T) {
	const n = 6
	h := newHarness(t)
	h.setOption(options.OptMaxUnresolvedPerTable, "2")
	srv, gate := h.gated()
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, err := srv.CreateIndex(context.Background(), createReq("items", fmt.Sprintf("b%d", i), "id", "BITMAP"))
			errs <- err
		})
	}
	awaitQueued(t, srv, n, gate)
	close(gate)
	wg.Wait()
	close(errs)
	ok := 0
	for err := range errs {
		if err == nil {
			ok++
			continue
		}
		if errCode(t, err) != adminapi.TErrorCode_QUOTA_EXCEEDED || !strings.Contains(err.Error(), options.OptMaxUnresolvedPerTable) {
			t.Fatalf("got %v", err)
		}
	}
	if ok != 2 || h.fsm.State().LastJobID() != 2 {
		t.Fatalf("%d admitted, last id %d; want 2, 2", ok, h.fsm.State().LastJobID())
	}
}

// notLeaderProposer refuses every proposal as a follower without a forwarder.
type notLeaderProposer struct{ *raftfsmtest.Proposer }

func (notLeaderProposer) Propose(context.Context, []byte) (*journal.TApplyResponse, error) {
	return nil, fmt.Errorf("cluster: %w", raftfsm.ErrNotLeader)
}

func TestAdmissionNotLeaderNamesTheLeader(t *testing.T) {
	h := newHarness(t)
	d := h.srv.d
	d.Proposer = notLeaderProposer{h.prop}
	_, err := New(d).CreateIndex(context.Background(), createReq("items", "v", "vector", "IVF_PQ"))
	if errCode(t, err) != adminapi.TErrorCode_NOT_LEADER || err.(*adminapi.TAdminError).GetLeaderAddress() != "127.0.0.1:1" {
		t.Fatalf("got %v", err)
	}
}

// A caller whose context ends while its entry is in flight gets
// OUTCOME_UNKNOWN (§13.6); the entry still lands.
func TestAdmissionCallerGivesUp(t *testing.T) {
	h := newHarness(t)
	srv, gate := h.gated()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := srv.CreateIndex(ctx, createReq("items", "v", "vector", "IVF_PQ"))
	if errCode(t, err) != adminapi.TErrorCode_OUTCOME_UNKNOWN {
		t.Fatalf("got %v", err)
	}
	close(gate)
	for deadline := time.Now().Add(10 * time.Second); h.fsm.State().LastJobID() != 1; {
		if time.Now().After(deadline) {
			t.Fatal("the abandoned admission never landed")
		}
		time.Sleep(time.Millisecond)
	}
}

// laggingProposer is a follower: its proposals are applied by the leader's
// FSM at once (the response carries the index) and by this master's FSM a
// moment later, in log order.
type laggingProposer struct {
	mu     sync.Mutex // held across the send, so local sees log order
	leader *raftfsmtest.Proposer
	local  chan *raft.Log
}

func (p *laggingProposer) Propose(ctx context.Context, cmd []byte) (*journal.TApplyResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	resp, err := p.leader.Propose(ctx, cmd)
	if err != nil {
		return nil, err
	}
	p.local <- &raft.Log{Index: uint64(resp.GetIndex()), Term: 1, Type: raft.LogCommand, Data: cmd}
	return resp, nil
}
func (p *laggingProposer) IsLeader() bool     { return false }
func (p *laggingProposer) LeaderTerm() uint64 { return 0 }

// Read-your-writes on a follower: an admission answers only once this
// master's own replica has applied it.
func TestAdmissionReadYourWritesOnAFollower(t *testing.T) {
	h := newHarness(t)
	local := raftfsm.New(nil)
	p := &laggingProposer{leader: &raftfsmtest.Proposer{FSM: raftfsm.New(nil)}, local: make(chan *raft.Log, 1024)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for l := range p.local {
			time.Sleep(20 * time.Millisecond)
			local.Apply(l)
		}
	}()
	t.Cleanup(func() { close(p.local); <-done })
	d := h.srv.d
	d.Proposer, d.Reader = p, local
	srv := New(d)
	ctx := context.Background()
	root, creds := "/data/lake", "lake-creds"
	if _, err := srv.CreateCatalog(ctx, &adminapi.TCatalog{Name: "lake", RootURI: &root, CredentialsRef: &creds}, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.AddBackend(ctx, h.backend.Addr(), ""); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			resp, err := srv.CreateIndex(ctx, createReq("items", fmt.Sprintf("b%d", i), "id", "BITMAP"))
			if err != nil {
				t.Error(err)
				return
			}
			if _, ok := local.State().Job(resp.GetJobID()); !ok {
				t.Errorf("job %d answered before this master applied it", resp.GetJobID())
			}
		})
	}
	wg.Wait()
}
