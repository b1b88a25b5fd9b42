package admin

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/config"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
	"github.com/lancemaster/lancemaster/pkg/raftfsm/raftfsmtest"
	"github.com/lancemaster/lancemaster/pkg/rpc"
)

// opsCluster is a fake Cluster with in-memory snapshots and membership.
type opsCluster struct {
	fakeCluster
	file       []byte
	restoreErr error
	memberErr  error

	mu        sync.Mutex
	closed    chan struct{} // closed when a save source is closed
	uploaded  bytes.Buffer
	restored  bool
	discarded int
	members   []string

	// restoreInto, when set, receives restoreFile as a real FSM restore.
	restoreInto *raftfsm.FSM
	restoreFile []byte
	applyErr    error // when set, ApplyLocal fails with it
}

func (c *opsCluster) ApplyLocal(ctx context.Context, cmd []byte) (*journal.TApplyResponse, error) {
	if c.applyErr != nil {
		return nil, c.applyErr
	}
	return c.fakeCluster.ApplyLocal(ctx, cmd)
}

type memSource struct {
	*bytes.Reader
	size int64
	once sync.Once
	done chan struct{}
}

func (m *memSource) Size() int64   { return m.size }
func (m *memSource) Index() uint64 { return 42 }
func (m *memSource) Term() uint64  { return 3 }
func (m *memSource) Close() error  { m.once.Do(func() { close(m.done) }); return nil }

func (c *opsCluster) SaveSnapshot(context.Context) (SnapshotSource, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = make(chan struct{})
	return &memSource{Reader: bytes.NewReader(c.file), size: int64(len(c.file)), done: c.closed}, nil
}

type memSink struct{ c *opsCluster }

func (s memSink) Write(p []byte) (int, error) {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	return s.c.uploaded.Write(p)
}

func (s memSink) Restore(context.Context) (*RestoreResult, error) {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	if s.c.restoreErr != nil {
		return nil, s.c.restoreErr
	}
	s.c.restored = true
	if s.c.restoreInto != nil {
		if err := s.c.restoreInto.Restore(io.NopCloser(bytes.NewReader(s.c.restoreFile))); err != nil {
			return nil, err
		}
	}
	return &RestoreResult{Index: 100, SnapshotIndex: 42, SnapshotTerm: 3, Jobs: 7}, nil
}

func (s memSink) Discard() error {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	s.c.discarded++
	return nil
}

func (c *opsCluster) NewSnapshotRestore(int64) (SnapshotSink, error) { return memSink{c}, nil }

func (c *opsCluster) AddVoter(_ context.Context, id, raftAddr, rpcAddr string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.members = append(c.members, "add "+id+" "+raftAddr+" "+rpcAddr)
	return c.memberErr
}

func (c *opsCluster) RemovePeer(_ context.Context, id string, force bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.members = append(c.members, fmt.Sprintf("remove %s %v", id, force))
	return c.memberErr
}

// followerProposer is a proposer that does not lead.
type followerProposer struct{ *raftfsmtest.Proposer }

func (followerProposer) IsLeader() bool { return false }

func newOpsServer(t *testing.T, cl Cluster, leader bool) *Server {
	t.Helper()
	return newOpsServerWith(t, cl, leader, nil)
}

func newOpsServerWith(t *testing.T, cl Cluster, leader bool, mint func() (string, error)) *Server {
	t.Helper()
	fsm := raftfsm.New(nil)
	p := &raftfsmtest.Proposer{FSM: fsm}
	var prop raftfsm.Proposer = p
	if !leader {
		prop = followerProposer{p}
	}
	switch c := cl.(type) {
	case nil:
		cl = fakeCluster{p}
	case *opsCluster:
		c.fakeCluster = fakeCluster{p}
	}
	return New(Deps{Proposer: prop, Reader: fsm, Cluster: cl, Backends: rpc.NewThriftBackendClient(rpc.DefaultConfig()),
		Credentials: config.StaticCredentials{}, Logger: zap.NewNop(), NodeID: "m1", NewClusterID: mint})
}

// A restore into a cluster that has not journaled its id yet (right after
// bootstrap) gives it a fresh id, never none and never the file's: the
// file's names another history, whose backends keep their term fence by it.
func TestRestoreIntoAClusterWithoutAnIDMintsOne(t *testing.T) {
	ctx := context.Background()
	cl := &opsCluster{}
	s := newOpsServerWith(t, cl, true, func() (string, error) { return "lm-fresh", nil })
	if id := s.d.Reader.State().ClusterID(); id != "" {
		t.Fatalf("fixture has cluster id %q", id)
	}
	file := fileOf(10)
	tr, err := s.BeginSnapshotRestore(ctx, int64(len(file)))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.WriteSnapshotChunk(ctx, &adminapi.TSnapshotChunk{TransferID: tr.TransferID, Offset: 0, Data: file}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.FinishSnapshotRestore(ctx, tr.TransferID, ""); err != nil {
		t.Fatal(err)
	}
	if id := s.d.Reader.State().ClusterID(); id != "lm-fresh" {
		t.Fatalf("cluster id after the restore: %q", id)
	}
}

func fileOf(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i * 7)
	}
	return b
}

func TestSnapshotSaveTransfer(t *testing.T) {
	ctx := context.Background()
	cl := &opsCluster{file: fileOf(2*SnapshotChunkSize + 1234)}
	s := newOpsServer(t, cl, true)
	tr, err := s.BeginSnapshotSave(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Size != int64(len(cl.file)) || tr.ChunkSize != SnapshotChunkSize || tr.GetIndex() != 42 || tr.GetNodeID() != "m1" {
		t.Fatalf("transfer %+v", tr)
	}
	// A wrong offset is refused and the transfer goes on.
	if _, err := s.ReadSnapshotChunk(ctx, tr.TransferID, 5); errCode(t, err) != adminapi.TErrorCode_INVALID {
		t.Fatal("a wrong offset was accepted")
	}
	var got []byte
	for !func() bool {
		ch, err := s.ReadSnapshotChunk(ctx, tr.TransferID, int64(len(got)))
		if err != nil {
			t.Fatal(err)
		}
		if len(ch.Data) > SnapshotChunkSize || ch.Offset != int64(len(got)) {
			t.Fatalf("chunk of %d bytes at %d", len(ch.Data), ch.Offset)
		}
		got = append(got, ch.Data...)
		return ch.GetEOF()
	}() {
	}
	if !bytes.Equal(got, cl.file) {
		t.Fatalf("received %d bytes, want the file's %d", len(got), len(cl.file))
	}
	<-cl.closed // the source is released at eof
	if _, err := s.ReadSnapshotChunk(ctx, tr.TransferID, int64(len(got))); errCode(t, err) != adminapi.TErrorCode_NOT_FOUND {
		t.Fatal("the transfer outlived its eof")
	}
}

func TestSnapshotTransfersAreBoundedAndExpire(t *testing.T) {
	ctx := context.Background()
	old := snapshotIdleTimeout
	t.Cleanup(func() { snapshotIdleTimeout = old })
	snapshotIdleTimeout = time.Hour

	cl := &opsCluster{file: fileOf(100)}
	s := newOpsServer(t, cl, true)
	a, err := s.BeginSnapshotSave(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.BeginSnapshotRestore(ctx, 10); err != nil {
		t.Fatal(err)
	}
	if _, err := s.BeginSnapshotSave(ctx); errCode(t, err) != adminapi.TErrorCode_UNAVAILABLE {
		t.Fatal("a third transfer was admitted")
	}
	if err := s.AbortSnapshotTransfer(ctx, a.TransferID); err != nil {
		t.Fatal(err)
	}
	if err := s.AbortSnapshotTransfer(ctx, a.TransferID); err != nil {
		t.Fatalf("a repeated abort: %v", err)
	}

	snapshotIdleTimeout = 20 * time.Millisecond
	b, err := s.BeginSnapshotSave(ctx)
	if err != nil {
		t.Fatalf("after an abort: %v", err)
	}
	cl.mu.Lock()
	closed := cl.closed
	cl.mu.Unlock()
	<-closed // dropped when idle
	if _, err := s.ReadSnapshotChunk(ctx, b.TransferID, 0); errCode(t, err) != adminapi.TErrorCode_NOT_FOUND {
		t.Fatal("an expired transfer still answers")
	}
}

func TestSnapshotRestoreTransfer(t *testing.T) {
	ctx := context.Background()
	cl := &opsCluster{}
	s := newOpsServer(t, cl, true)
	file := fileOf(SnapshotChunkSize + 10)
	tr, err := s.BeginSnapshotRestore(ctx, int64(len(file)))
	if err != nil {
		t.Fatal(err)
	}
	write := func(off int, data []byte) error {
		return s.WriteSnapshotChunk(ctx, &adminapi.TSnapshotChunk{TransferID: tr.TransferID, Offset: int64(off), Data: data})
	}
	if errCode(t, write(0, make([]byte, SnapshotChunkSize+1))) != adminapi.TErrorCode_INVALID {
		t.Fatal("an oversized chunk was accepted")
	}
	if errCode(t, write(3, file[:10])) != adminapi.TErrorCode_INVALID {
		t.Fatal("a wrong offset was accepted")
	}
	if err := write(0, file[:SnapshotChunkSize]); err != nil {
		t.Fatal(err)
	}
	if _, err := s.FinishSnapshotRestore(ctx, tr.TransferID, ""); errCode(t, err) != adminapi.TErrorCode_INVALID {
		t.Fatal("an incomplete upload was finished")
	}
	// The failed finish ended the transfer: start again.
	tr, err = s.BeginSnapshotRestore(ctx, int64(len(file)))
	if err != nil {
		t.Fatal(err)
	}
	if err := write(0, file[:SnapshotChunkSize]); err != nil {
		t.Fatal(err)
	}
	if errCode(t, write(SnapshotChunkSize, file[SnapshotChunkSize-1:])) != adminapi.TErrorCode_INVALID {
		t.Fatal("a chunk past the announced size was accepted")
	}
	if err := write(SnapshotChunkSize, file[SnapshotChunkSize:]); err != nil {
		t.Fatal(err)
	}
	resp, err := s.FinishSnapshotRestore(ctx, tr.TransferID, "")
	if err != nil {
		t.Fatal(err)
	}
	if resp.Index != 100 || resp.SnapshotIndex != 42 || resp.GetJobCount() != 7 || resp.GetLeaderID() != "m2" {
		t.Fatalf("response %+v", resp)
	}
	cl.mu.Lock()
	if !cl.restored || cl.discarded != 2 || !bytes.Equal(cl.uploaded.Bytes()[SnapshotChunkSize:], file) {
		t.Fatalf("restored %v, discarded %d, uploaded %d bytes", cl.restored, cl.discarded, cl.uploaded.Len())
	}
	cl.mu.Unlock()
}

func TestSnapshotRestoreErrors(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		err  error
		code adminapi.TErrorCode
		msg  string
	}{
		{"bad file", fmt.Errorf("snapshot file refused: body checksum mismatch: %w", raftfsm.ErrSnapshotFormat),
			adminapi.TErrorCode_INVALID, "nothing was changed"},
		{"not leader", fmt.Errorf("x: %w", raftfsm.ErrNotLeader), adminapi.TErrorCode_NOT_LEADER, "not the leader"},
		{"unknown", fmt.Errorf("%w: boom", ErrOutcomeUnknown), adminapi.TErrorCode_OUTCOME_UNKNOWN, "may or may not have been applied"},
		{"conflict", job.Errorf(job.CodeConflict, "a configuration change is in progress"), adminapi.TErrorCode_CONFLICT, "in progress"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := &opsCluster{restoreErr: tc.err}
			s := newOpsServer(t, cl, true)
			tr, err := s.BeginSnapshotRestore(ctx, 3)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.WriteSnapshotChunk(ctx, &adminapi.TSnapshotChunk{TransferID: tr.TransferID, Data: []byte("abc")}); err != nil {
				t.Fatal(err)
			}
			_, err = s.FinishSnapshotRestore(ctx, tr.TransferID, "")
			if errCode(t, err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v, want %s mentioning %q", err, tc.code, tc.msg)
			}
		})
	}
}

func TestOperatorMethodsNeedTheLeaderAndSupport(t *testing.T) {
	ctx := context.Background()
	f := newOpsServer(t, &opsCluster{}, false)
	if _, err := f.BeginSnapshotSave(ctx); errCode(t, err) != adminapi.TErrorCode_NOT_LEADER {
		t.Fatal("save on a follower")
	}
	if _, err := f.BeginSnapshotRestore(ctx, 10); errCode(t, err) != adminapi.TErrorCode_NOT_LEADER {
		t.Fatal("restore on a follower")
	}
	if _, err := f.AddVoter(ctx, &adminapi.TAddVoterRequest{ID: "m4", RaftAddress: "h:1"}); errCode(t, err) != adminapi.TErrorCode_NOT_LEADER {
		t.Fatal("add-voter on a follower")
	}
	plain := newOpsServer(t, nil, true) // a Cluster without the optional interfaces
	if _, err := plain.BeginSnapshotSave(ctx); errCode(t, err) != adminapi.TErrorCode_UNAVAILABLE {
		t.Fatal("save without SnapshotCluster")
	}
	if _, err := plain.RemovePeer(ctx, &adminapi.TRemovePeerRequest{ID: "m2"}); errCode(t, err) != adminapi.TErrorCode_UNAVAILABLE {
		t.Fatal("remove-peer without MembershipCluster")
	}
	if _, err := plain.ReadSnapshotChunk(ctx, "nope", 0); errCode(t, err) != adminapi.TErrorCode_NOT_FOUND {
		t.Fatal("an unknown transfer id")
	}
}

func TestMembershipMethods(t *testing.T) {
	ctx := context.Background()
	cl := &opsCluster{}
	s := newOpsServer(t, cl, true)
	rpcAddr := "10.0.0.4:9090"
	resp, err := s.AddVoter(ctx, &adminapi.TAddVoterRequest{ID: " m4 ", RaftAddress: "10.0.0.4:7000", RPCAddress: &rpcAddr})
	if err != nil || len(resp.Peers) != 1 {
		t.Fatalf("AddVoter: %v %+v", err, resp)
	}
	force := true
	if _, err := s.RemovePeer(ctx, &adminapi.TRemovePeerRequest{ID: "m4", Force: &force}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cl.members, "; "); got != "add m4 10.0.0.4:7000 10.0.0.4:9090; remove m4 true" {
		t.Fatalf("calls: %s", got)
	}
	cl.memberErr = job.Errorf(job.CodeNotFound, "no member %q", "m9")
	if _, err := s.RemovePeer(ctx, &adminapi.TRemovePeerRequest{ID: "m9"}); errCode(t, err) != adminapi.TErrorCode_NOT_FOUND {
		t.Fatal("NOT_FOUND lost")
	}
	cl.memberErr = fmt.Errorf("%w: enqueue timeout", ErrNotApplied)
	if _, err := s.RemovePeer(ctx, &adminapi.TRemovePeerRequest{ID: "m9"}); errCode(t, err) != adminapi.TErrorCode_UNAVAILABLE {
		t.Fatal("not applied")
	}
	if _, err := s.AddVoter(ctx, nil); errCode(t, err) != adminapi.TErrorCode_INVALID {
		t.Fatal("nil request")
	}
}
