package cluster

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
	"github.com/lancemaster/lancemaster/pkg/testkit"
)

// saveAll takes an operator snapshot on n and returns the file's bytes.
func saveAll(t *testing.T, n *Node) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	f, err := n.SaveSnapshot(ctx)
	if err != nil {
		t.Fatalf("SaveSnapshot: %v", err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(b)) != f.Size() {
		t.Fatalf("read %d bytes, Size() = %d", len(b), f.Size())
	}
	return b
}

// restoreAll uploads file to n and restores it.
func restoreAll(t *testing.T, n *Node, file []byte) (*RestoreResult, error) {
	t.Helper()
	u, err := n.NewSnapshotRestore(int64(len(file)))
	if err != nil {
		t.Fatalf("NewSnapshotRestore: %v", err)
	}
	defer u.Discard()
	for off := 0; off < len(file); off += 1000 {
		if _, err := u.Write(file[off:min(off+1000, len(file))]); err != nil {
			t.Fatalf("write: %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return u.Restore(ctx)
}

func spools(t *testing.T, n *Node) int {
	entries, err := os.ReadDir(filepath.Join(n.cfg.DataDir, transfersDirName))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return len(entries)
}

// On both raft log stores.
func TestOperatorSnapshotSaveAndRestore(t *testing.T) {
	eachLogStore(t, operatorSnapshotSaveAndRestore)
}

func operatorSnapshotSaveAndRestore(t *testing.T, store clusterOpt) {
	c := newTestCluster(t, 3, store)
	c.startAll()
	ld := c.leader()
	proposeMany(t, ld.node(), 0, 10, 4)
	c.awaitCount(10)

	if _, err := c.followers(ld)[0].node().SaveSnapshot(context.Background()); !errors.Is(err, raftfsm.ErrNotLeader) {
		t.Fatalf("SaveSnapshot on a follower: %v, want ErrNotLeader", err)
	}
	file := saveAll(t, ld.node())
	if spools(t, ld.node()) != 0 {
		t.Fatal("the save spool was not deleted")
	}
	insp, err := InspectSnapshotFile(bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	if insp.Journal.Backends != 10 || insp.Header.NodeID != ld.cfg.NodeID || insp.Header.Raft.Index == 0 {
		t.Fatalf("inspection: %+v / %+v", insp.Header, insp.Journal)
	}

	proposeMany(t, ld.node(), 10, 15, 4)
	c.awaitCount(15)

	// A corrupted upload is refused and changes nothing.
	bad := bytes.Clone(file)
	bad[len(bad)-10] ^= 0x20
	if _, err := restoreAll(t, ld.node(), bad); !errors.Is(err, ErrSnapshotFile) {
		t.Fatalf("restore of a corrupted file: %v", err)
	}
	c.awaitCount(15)

	res, err := restoreAll(t, ld.node(), file)
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	if res.Backends != 10 || res.SnapshotIndex != insp.Header.Raft.Index || res.Index <= res.SnapshotIndex {
		t.Fatalf("result %+v", res)
	}
	c.awaitCount(10) // every replica, the entries after the save gone
	if spools(t, ld.node()) != 0 {
		t.Fatal("the restore spool was not deleted")
	}
	// The cluster goes on: a new leader (the old one handed over) accepts
	// writes, and ids continue after the restored ones.
	nl := c.leader()
	mustPropose(t, nl.node(), 20)
	c.awaitCount(11)
	if b, ok := nl.currentFSM().(*countingFSM).State().BackendByAddress("be-20.test:9050"); !ok || b.ID != 11 {
		t.Fatalf("the next backend got %+v, want id 11", b)
	}
}

func TestSnapshotRestoreRefusesUnannouncedBytes(t *testing.T) {
	c := newTestCluster(t, 1)
	c.startAll()
	n := c.leader().node()
	u, err := n.NewSnapshotRestore(10)
	if err != nil {
		t.Fatal(err)
	}
	defer u.Discard()
	if _, err := u.Write(make([]byte, 11)); err == nil {
		t.Fatal("an 11-byte write to a 10-byte upload was accepted")
	}
	if _, err := u.Restore(context.Background()); err == nil {
		t.Fatal("an incomplete upload was restored")
	}
	if _, err := n.NewSnapshotRestore(0); err == nil {
		t.Fatal("an empty upload was accepted")
	}
}

// A restore is prepared against everything committed (raftfsm.PrepareRestore
// after a barrier): a job whose dispatch the cluster committed while the
// leader's own FSM had not applied it yet keeps that dispatch. Read from
// the trailing replica, it would be PENDING again in the restored state,
// and dispatched a second time.
func TestRestorePreparesAgainstEverythingCommitted(t *testing.T) {
	c := newTestCluster(t, 3)
	c.startAll()
	ld := c.leader()
	n := ld.node()
	const root = "s3://bucket/warehouse"
	apply := func(ct raftfsm.CommandType, cmd thrift.TStruct) *journal.TApplyResponse {
		t.Helper()
		data, err := raftfsm.Encode(ct, cmd)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := n.Propose(ctx, data)
		if err != nil || resp.GetCode() != journal.TApplyCode_OK {
			t.Fatalf("propose %d: %v %v", ct, resp, err)
		}
		return resp
	}
	now := time.Now().UnixMilli()
	apply(raftfsm.CmdSetClusterID, &journal.TClusterIDCommand{NowMs: now, ClusterID: "c-1"})
	cat := apply(raftfsm.CmdCreateCatalog, &journal.TCatalogCommand{NowMs: now,
		Catalog: &journal.TCatalogRecord{Name: "lake", RootURI: thrift.StringPtr(root)}}).GetID()
	be := apply(raftfsm.CmdAddBackend, &journal.TBackendCommand{NowMs: now, Address: "be.test:9050"}).GetID()
	loc, err := job.DatasetLocator(root, "db", "t")
	if err != nil {
		t.Fatal(err)
	}
	id := apply(raftfsm.CmdAdmit, &journal.TAdmitCommand{NowMs: now, Job: raftfsm.RecordToThrift(&job.Record{
		Creator: "alice", CatalogID: cat, DB: "db", Table: "t", Provider: job.ProviderDirectory, Locator: loc,
		DisplayIndexName: "i", NormalizedIndexName: "i", MutationType: job.Create, AdmittedDatasetVersion: 7,
		IndexType: job.IndexBTree, Column: "id", PropertiesJSON: "{}",
		SchemaContract: `{"v":1,"fields":[{"id":0,"name":"id","type":"int64","nullable":false}]}`,
	})}).GetID()
	file := saveAll(t, n)

	// The leader's FSM stops applying; the job's dispatch is committed by a
	// majority (a follower applies it) but not applied on the leader.
	fsm := ld.currentFSM().(*countingFSM)
	gate := make(chan struct{})
	fsm.gate.Store(&gate)
	released := false
	release := func() {
		if !released {
			released = true
			fsm.gate.Store(nil)
			close(gate)
		}
	}
	defer release()
	j, _ := fsm.State().Job(id)
	m1, err := raftfsm.Encode(raftfsm.CmdMarkRunningBatch, &journal.TMarkRunningBatch{NowMs: now, Jobs: []*journal.TMarkRunning{{
		JobID: id, ExpectedRev: j.Rev, BackendID: be, ProcessEpoch: 42, InvocationID: "inv-1",
		InvocationSecret: "s3cr3t-0123456789abcdef", DeadlineMs: now + 3_600_000, LeaderTerm: int64(n.LeaderTerm())}}})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_, _ = n.Propose(ctx, m1)
	}()
	running := func(f testableFSM) bool {
		r, ok := f.(*countingFSM).State().Job(id)
		return ok && r.MutationState == job.Running
	}
	f0 := c.followers(ld)[0]
	eventually(t, 10*time.Second, "the dispatch to be committed", func() bool { return running(f0.currentFSM()) })
	if running(fsm) {
		t.Fatal("the gated leader applied the dispatch")
	}

	u, err := n.NewSnapshotRestore(int64(len(file)))
	if err != nil {
		t.Fatal(err)
	}
	defer u.Discard()
	if _, err := u.Write(file); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_, err := u.Restore(ctx)
		done <- err
	}()
	// While the leader's FSM trails, the restore must not read it: no
	// prepared body may appear. (Without the barrier it appears at once.)
	if testkit.Poll(500*time.Millisecond, func() bool { return preparedSpools(t, n) > 0 }) {
		t.Fatal("the restore was prepared against a replica that had not applied everything committed")
	}
	release()
	if err := <-done; err != nil {
		t.Fatalf("restore: %v", err)
	}
	r, ok := fsm.State().Job(id)
	if !ok || r.MutationState != job.Running || r.InvocationID != "inv-1" {
		t.Fatalf("after the restore the job is %+v: its committed dispatch was forgotten", r)
	}
}

// preparedSpools counts the prepared restore bodies in n's transfers dir.
func preparedSpools(t *testing.T, n *Node) int {
	entries, err := os.ReadDir(filepath.Join(n.cfg.DataDir, transfersDirName))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	k := 0
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "prepared-") {
			k++
		}
	}
	return k
}
