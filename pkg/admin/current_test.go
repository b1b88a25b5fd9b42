package admin

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/config"
	"github.com/lancemaster/lancemaster/pkg/options"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
	"github.com/lancemaster/lancemaster/pkg/raftfsm/raftfsmtest"
	"github.com/lancemaster/lancemaster/pkg/rpc"
	"github.com/lancemaster/lancemaster/pkg/rpc/rpctest"
)

// replLog is a leader's journal that a follower replays only when told to:
// the leader applies every proposal at once and keeps the entry.
type replLog struct{ *raftfsmtest.Proposer }

func newReplLog() *replLog {
	return &replLog{&raftfsmtest.Proposer{FSM: raftfsm.New(nil), Record: true}}
}

// replay applies the leader's entries the follower has not applied yet.
func (l *replLog) replay(to *raftfsm.FSM) {
	for _, e := range l.Since(0) {
		if e.Index > to.State().AppliedIndex() {
			to.Apply(&raft.Log{Index: e.Index, Term: 1, Type: raft.LogCommand, Data: e.Data})
		}
	}
}

// followerOf forwards to the leader's journal; it does not lead.
type followerOf struct{ l *replLog }

func (f followerOf) Propose(ctx context.Context, cmd []byte) (*journal.TApplyResponse, error) {
	return f.l.Propose(ctx, cmd)
}
func (followerOf) IsLeader() bool     { return false }
func (followerOf) LeaderTerm() uint64 { return 0 }

// twoMasters is a leader serving the admin API on loopback and a follower
// whose replica is behind until replayed.
type twoMasters struct {
	log      *replLog
	leader   *Server
	follower *Server
	local    *raftfsm.FSM
	addr     string
	backend  *rpctest.FakeBackend
}

type namedCluster struct {
	fakeCluster
	addr *string
}

func (c namedCluster) Leader() (string, string) { return "m1", *c.addr }

// replayFrom keeps the follower's replica caught up with the shared log,
// replaying it every millisecond once start fires (it does not when start
// never does), as a follower's apply loop would; the returned stop ends it.
func (m *twoMasters) replayFrom(start <-chan struct{}) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-start:
		case <-quit:
			return
		}
		for {
			m.log.replay(m.local)
			select {
			case <-quit:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	return func() { close(quit); <-done }
}

func newTwoMasters(t *testing.T) *twoMasters {
	t.Helper()
	m := &twoMasters{log: newReplLog(), local: raftfsm.New(nil), backend: rpctest.NewFakeBackend(t)}
	cfg := rpc.DefaultConfig()
	cfg.SocketTimeout = 5 * time.Second
	creds := config.StaticCredentials{"lake-creds": {"k": "v"}}
	lp := &raftfsmtest.Proposer{FSM: m.log.FSM}
	m.leader = New(Deps{Proposer: m.log, Reader: m.log.FSM, Cluster: namedCluster{fakeCluster{lp}, &m.addr},
		Backends: rpc.NewThriftBackendClient(cfg), Credentials: creds, Logger: zap.NewNop(), NodeID: "m1",
		ReadIndex: func(context.Context) (uint64, error) { return m.log.Index(), nil },
		CaughtUp:  func(i uint64) bool { return m.log.FSM.State().AppliedIndex() >= i }})
	srv, err := rpc.NewServer("127.0.0.1:0", m.leader.Processor(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	m.addr = srv.Addr().String()
	m.follower = New(Deps{Proposer: followerOf{m.log}, Reader: m.local, Cluster: namedCluster{fakeCluster{lp}, &m.addr},
		Backends: rpc.NewThriftBackendClient(cfg), Credentials: creds, Logger: zap.NewNop(), NodeID: "m2",
		LeaderCall: func(ctx context.Context, addr string, fn func(context.Context, *adminapi.LanceMasterServiceClient) error) error {
			return rpc.NewMasterClient([]string{addr}, cfg, nil).Call(ctx, fn)
		},
		ReadIndex: func(context.Context) (uint64, error) { return 0, fmt.Errorf("x: %w", raftfsm.ErrNotLeader) },
		CaughtUp:  func(i uint64) bool { return m.local.State().AppliedIndex() >= i }})
	return m
}

// §13.8: a follower whose replica has not applied the catalog yet (a
// just-restarted master replaying its log) never answers a definitive
// NOT_FOUND for it: it waits for the leader's read index, and answers
// NOT_LEADER naming the leader when it cannot get there in time.
func TestBehindFollowerNeverRefusesForGood(t *testing.T) {
	m := newTwoMasters(t)
	ctx := context.Background()
	root, creds := "/data/lake", "lake-creds"
	if _, err := m.leader.CreateCatalog(ctx, &adminapi.TCatalog{Name: "lake", RootURI: &root, CredentialsRef: &creds}, ""); err != nil {
		t.Fatal(err)
	}
	be, err := m.leader.AddBackend(ctx, m.backend.Addr(), "")
	if err != nil {
		t.Fatal(err)
	}
	(&harness{backend: m.backend}).setDataset("/data/lake/db/items.lance", 7)
	if _, ok := m.local.State().Catalog("lake"); ok {
		t.Fatal("the follower's replica is not behind")
	}

	// Behind and not catching up: no definitive answer.
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	_, err = m.follower.CreateIndex(short, createReq("items", "v", "vector", "IVF_PQ"))
	if code := errCode(t, err); code != adminapi.TErrorCode_NOT_LEADER || err.(*adminapi.TAdminError).GetLeaderAddress() != m.addr {
		t.Fatalf("admission on a follower behind the leader: %v, want NOT_LEADER naming %s", err, m.addr)
	}
	short2, cancel2 := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel2()
	if err := m.follower.RemoveBackend(short2, m.backend.Addr(), ""); errCode(t, err) != adminapi.TErrorCode_NOT_LEADER {
		t.Fatalf("remove backend on a follower behind the leader: %v, want NOT_LEADER", err)
	}
	if m.log.FSM.State().LastJobID() != 0 {
		t.Fatal("something was admitted")
	}

	// Catching up while the request waits: decided on the current state.
	later := make(chan struct{})
	time.AfterFunc(50*time.Millisecond, func() { close(later) })
	defer m.replayFrom(later)()
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	resp, err := m.follower.CreateIndex(wctx, createReq("items", "v", "vector", "IVF_PQ"))
	if err != nil {
		t.Fatalf("admission on a follower that caught up: %v", err)
	}
	if _, ok := m.local.State().Job(resp.GetJobID()); !ok {
		t.Fatal("answered before the follower applied its own write")
	}
	_ = be
}

// A leader answers listPeers with its read index as the commit index, and
// leaves it unset when it cannot confirm its leadership.
func TestListPeersGivesTheReadIndex(t *testing.T) {
	m := newTwoMasters(t)
	ctx := context.Background()
	if _, err := m.leader.SetOption(ctx, options.OptDispatcherPaused, "true", ""); err != nil {
		t.Fatal(err)
	}
	out, err := m.leader.ListPeers(ctx)
	if err != nil || out.GetCommitIndex() != 1 || out.GetLeaderID() != "m1" {
		t.Fatalf("list peers: %+v %v", out, err)
	}
	d := m.leader.d
	d.ReadIndex = func(context.Context) (uint64, error) { return 0, errors.New("verify leadership: leadership lost") }
	out, err = New(d).ListPeers(ctx)
	if err != nil || out.IsSetCommitIndex() {
		t.Fatalf("an unconfirmed leader gave a commit index: %+v %v", out, err)
	}
	// And a follower asking it gets no definitive answer.
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	fd := m.follower.d
	fd.LeaderCall = func(ctx context.Context, _ string, fn func(context.Context, *adminapi.LanceMasterServiceClient) error) error {
		return errors.New("dial tcp: connection refused")
	}
	if _, err := New(fd).SetOption(short, options.OptDispatcherPaused, "false", ""); errCode(t, err) != adminapi.TErrorCode_NOT_LEADER {
		t.Fatalf("set option with the leader unreachable: %v, want NOT_LEADER", err)
	}
}

// A master that raft still names as the leader while it steps down gives
// no commit index a follower could take for a read index.
func TestSteppingDownMasterGivesNoReadIndex(t *testing.T) {
	m := newTwoMasters(t)
	d := m.leader.d
	d.Proposer = followerOf{m.log} // no longer leads; Cluster.Leader() still names m1
	out, err := New(d).ListPeers(context.Background())
	if err != nil || out.IsSetCommitIndex() || out.GetLeaderID() != "m1" {
		t.Fatalf("list peers while stepping down: %+v %v", out, err)
	}
	// A plain follower (not named leader) still shows its commit index.
	fd := m.follower.d
	out, err = New(fd).ListPeers(context.Background())
	if err != nil || !out.IsSetCommitIndex() {
		t.Fatalf("list peers on a follower: %+v %v", out, err)
	}
}
