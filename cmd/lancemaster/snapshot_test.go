package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/hashicorp/raft"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/cluster"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// The fake master's operator snapshot and membership methods (the rest is
// in fake_test.go). Snapshots are not served by fakeMaster; snapMaster
// below serves them.

func unknownMethod() error { return thrift.NewTApplicationException(thrift.UNKNOWN_METHOD, "fake") }

func (f *fakeMaster) BeginSnapshotSave(context.Context) (*adminapi.TSnapshotTransfer, error) {
	return nil, unknownMethod()
}
func (f *fakeMaster) ReadSnapshotChunk(context.Context, string, int64) (*adminapi.TSnapshotChunk, error) {
	return nil, unknownMethod()
}
func (f *fakeMaster) BeginSnapshotRestore(context.Context, int64) (*adminapi.TSnapshotTransfer, error) {
	return nil, unknownMethod()
}
func (f *fakeMaster) WriteSnapshotChunk(context.Context, *adminapi.TSnapshotChunk) error {
	return unknownMethod()
}
func (f *fakeMaster) FinishSnapshotRestore(context.Context, string, string) (*adminapi.TSnapshotRestoreResponse, error) {
	return nil, unknownMethod()
}
func (f *fakeMaster) AbortSnapshotTransfer(context.Context, string) error { return unknownMethod() }

func (f *fakeMaster) AddVoter(_ context.Context, r *adminapi.TAddVoterRequest) (*adminapi.TRaftPeersResponse, error) {
	return f.peers, f.record("AddVoter", r)
}

func (f *fakeMaster) RemovePeer(_ context.Context, r *adminapi.TRemovePeerRequest) (*adminapi.TRaftPeersResponse, error) {
	return f.peers, f.record("RemovePeer", r)
}

// snapMaster serves one snapshot file in 1000-byte chunks and records an
// upload.
type snapMaster struct {
	*fakeMaster
	file []byte

	mu       sync.Mutex
	uploaded bytes.Buffer
	finished bool
	actor    string // the claim finishSnapshotRestore took
}

func (s *snapMaster) BeginSnapshotSave(context.Context) (*adminapi.TSnapshotTransfer, error) {
	idx, term, node := int64(42), int64(3), "m1"
	return &adminapi.TSnapshotTransfer{TransferID: "t1", Size: int64(len(s.file)), ChunkSize: 1000,
		IdleTimeoutMs: 60000, Index: &idx, Term: &term, NodeID: &node}, nil
}

func (s *snapMaster) ReadSnapshotChunk(_ context.Context, id string, off int64) (*adminapi.TSnapshotChunk, error) {
	end := min(off+1000, int64(len(s.file)))
	eof := end == int64(len(s.file))
	return &adminapi.TSnapshotChunk{TransferID: id, Offset: off, Data: s.file[off:end], EOF: &eof}, nil
}

func (s *snapMaster) BeginSnapshotRestore(_ context.Context, size int64) (*adminapi.TSnapshotTransfer, error) {
	if err := s.record("BeginSnapshotRestore", size); err != nil {
		return nil, err
	}
	return &adminapi.TSnapshotTransfer{TransferID: "t2", Size: size, ChunkSize: 700, IdleTimeoutMs: 60000}, nil
}

func (s *snapMaster) WriteSnapshotChunk(_ context.Context, c *adminapi.TSnapshotChunk) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.Offset != int64(s.uploaded.Len()) || len(c.Data) > 700 {
		return &adminapi.TAdminError{Code: adminapi.TErrorCode_INVALID, Message: "bad chunk"}
	}
	s.uploaded.Write(c.Data)
	return nil
}

func (s *snapMaster) FinishSnapshotRestore(_ context.Context, _, actor string) (*adminapi.TSnapshotRestoreResponse, error) {
	s.mu.Lock()
	s.finished, s.actor = true, actor
	s.mu.Unlock()
	jobs, leader, carried, held := int64(2), "m2", int64(3), int64(1)
	return &adminapi.TSnapshotRestoreResponse{Index: 77, SnapshotIndex: 42, SnapshotTerm: 3, JobCount: &jobs, LeaderID: &leader,
		CarriedForward: &carried, Held: &held}, nil
}

func (s *snapMaster) AbortSnapshotTransfer(context.Context, string) error { return nil }

// snapshotFileBytes builds a valid snapshot file of a journal holding
// `backends` backends, padded with large ones so the file spans many chunks.
func snapshotFileBytes(t *testing.T, backends int) []byte {
	t.Helper()
	fsm := raftfsm.New(nil)
	for i := 1; i <= backends; i++ {
		cmd, err := raftfsm.Encode(raftfsm.CmdAddBackend, &journal.TBackendCommand{
			NowMs: 1_700_000_000_000, Address: fmt.Sprintf("be-%d-%s.test:9050", i, strings.Repeat("x", 100))})
		if err != nil {
			t.Fatal(err)
		}
		fsm.Apply(&raft.Log{Index: uint64(i), Term: 1, Type: raft.LogCommand, Data: cmd})
	}
	var body, file bytes.Buffer
	if err := fsm.State().WriteSnapshot(&body); err != nil {
		t.Fatal(err)
	}
	meta := &raft.SnapshotMeta{Version: raft.SnapshotVersionMax, ID: "3-42-1", Index: 42, Term: 3}
	if err := cluster.WriteSnapshotFile(&file, meta, "m1", 1_700_000_000_000, body.Bytes()); err != nil {
		t.Fatal(err)
	}
	return file.Bytes()
}

func TestSnapshotSaveWritesAVerifiedFileAtomically(t *testing.T) {
	file := snapshotFileBytes(t, 40)
	addr := serve(t, &snapMaster{fakeMaster: &fakeMaster{}, file: file})
	dir := t.TempDir()
	path := filepath.Join(dir, "backup.snap")

	out := mustOK(t)(cli(t, addr, "operator", "snapshot", "save", path))
	if !strings.Contains(out, "raft index 42, term 3") || !strings.Contains(out, "40 backends") {
		t.Fatalf("output: %q", out)
	}
	got, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(got, file) {
		t.Fatalf("saved file differs (%v): %d bytes, want %d", err, len(got), len(file))
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600", fi.Mode().Perm())
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("the directory holds %d entries; a temporary file was left", len(entries))
	}
}

func TestSnapshotSaveRefusesACorruptedTransfer(t *testing.T) {
	file := snapshotFileBytes(t, 40)
	file[len(file)-5] ^= 0x40
	addr := serve(t, &snapMaster{fakeMaster: &fakeMaster{}, file: file})
	dir := t.TempDir()
	path := filepath.Join(dir, "backup.snap")

	_, stderr, code := cli(t, addr, "operator", "snapshot", "save", path)
	if code != exitError || !strings.Contains(stderr, "body checksum mismatch") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("a refused save left %d files", len(entries))
	}
}

func TestSnapshotInspectIsOffline(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.snap")
	if err := os.WriteFile(path, snapshotFileBytes(t, 3), 0o600); err != nil {
		t.Fatal(err)
	}
	dead := deadAddress(t) // no master is needed
	out := mustOK(t)(cli(t, dead, "operator", "snapshot", "inspect", path))
	for _, want := range []string{"raft index:", "42", "backends:", "last ids:", "job 0, catalog 0, backend 3", "verified"} {
		if !strings.Contains(out, want) {
			t.Errorf("inspect output lacks %q:\n%s", want, out)
		}
	}
	js := mustOK(t)(cli(t, dead, "-o", "json", "operator", "snapshot", "inspect", path))
	var v struct {
		File struct {
			FormatVersion int `json:"format_version"`
			Raft          struct {
				Index uint64 `json:"index"`
			} `json:"raft"`
		} `json:"file"`
		Journal struct {
			Backends      int64 `json:"backends"`
			LastBackendID int64 `json:"last_backend_id"`
		} `json:"journal"`
	}
	if err := json.Unmarshal([]byte(js), &v); err != nil {
		t.Fatalf("json: %v\n%s", err, js)
	}
	if v.File.FormatVersion != 1 || v.File.Raft.Index != 42 || v.Journal.Backends != 3 || v.Journal.LastBackendID != 3 {
		t.Fatalf("json inspection: %+v", v)
	}

	b, _ := os.ReadFile(path)
	b[20] ^= 1 // inside the header
	bad := filepath.Join(t.TempDir(), "bad.snap")
	if err := os.WriteFile(bad, b, 0o600); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := cli(t, dead, "operator", "snapshot", "inspect", bad)
	if code != exitError || !strings.Contains(stderr, "header checksum mismatch") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}

func TestSnapshotRestoreUploadsInChunks(t *testing.T) {
	file := snapshotFileBytes(t, 40)
	path := filepath.Join(t.TempDir(), "s.snap")
	if err := os.WriteFile(path, file, 0o600); err != nil {
		t.Fatal(err)
	}
	sm := &snapMaster{fakeMaster: &fakeMaster{}, file: file}
	addr := serve(t, sm)
	out := mustOK(t)(cli(t, addr, "--as", "carol", "operator", "snapshot", "restore", path))
	if !strings.Contains(out, "raft index 42") || !strings.Contains(out, "leader: m2") {
		t.Fatalf("output: %q", out)
	}
	// Item 11: the output says the dispatcher is paused and how to resume.
	if !strings.Contains(out, "the dispatcher is paused") || !strings.Contains(out, "jobs list --restored") ||
		!strings.Contains(out, "lancemaster config set lance_index_job_dispatcher_paused false") {
		t.Fatalf("output does not say the dispatcher is paused and how to resume: %q", out)
	}
	// ... and what the restore kept of the journal it replaced, and held.
	if !strings.Contains(out, "3 jobs kept the newer record") || !strings.Contains(out, "1 job was held") ||
		!strings.Contains(out, "lancemaster jobs list --held --all") {
		t.Fatalf("output does not say what was carried forward and held: %q", out)
	}
	sm.mu.Lock()
	defer sm.mu.Unlock()
	if !sm.finished || !bytes.Equal(sm.uploaded.Bytes(), file) {
		t.Fatalf("uploaded %d bytes (finished %v), want the file's %d", sm.uploaded.Len(), sm.finished, len(file))
	}
	if sm.actor != "carol" {
		t.Fatalf("the restore claimed %q, want --as carol", sm.actor)
	}

	// A corrupted file is refused before anything is sent.
	file[len(file)/2] ^= 0x01
	bad := filepath.Join(t.TempDir(), "bad.snap")
	if err := os.WriteFile(bad, file, 0o600); err != nil {
		t.Fatal(err)
	}
	sm2 := &snapMaster{fakeMaster: &fakeMaster{}}
	_, stderr, code := cli(t, serve(t, sm2), "operator", "snapshot", "restore", bad)
	if code != exitError || !strings.Contains(stderr, "nothing was sent") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	if calls := sm2.recordedCalls(); len(calls) != 0 {
		t.Fatalf("calls after a refused file: %+v", calls)
	}
}

func TestRaftAddVoterAndRemovePeer(t *testing.T) {
	f := &fakeMaster{peers: &adminapi.TRaftPeersResponse{Peers: []*adminapi.TRaftPeer{{ID: "m1", RaftAddress: "10.0.0.1:7000"}}}}
	addr := serve(t, f)
	mustOK(t)(cli(t, addr, "operator", "raft", "add-voter", "m4", "10.0.0.4:7000", "--rpc-address", "10.0.0.4:9090"))
	req := f.onlyCall(t, "AddVoter").(*adminapi.TAddVoterRequest)
	if req.ID != "m4" || req.RaftAddress != "10.0.0.4:7000" || req.GetRPCAddress() != "10.0.0.4:9090" {
		t.Fatalf("request %+v", req)
	}

	f2 := &fakeMaster{peers: f.peers}
	mustOK(t)(cli(t, serve(t, f2), "operator", "raft", "remove-peer", "m4", "--force"))
	rm := f2.onlyCall(t, "RemovePeer").(*adminapi.TRemovePeerRequest)
	if rm.ID != "m4" || !rm.GetForce() {
		t.Fatalf("request %+v", rm)
	}
	if _, _, code := cli(t, addr, "operator", "raft", "add-voter", "m4"); code != exitUsage {
		t.Fatalf("add-voter without an address: exit %d, want %d", code, exitUsage)
	}
}
