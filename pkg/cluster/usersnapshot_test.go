package cluster

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/pkg/raftfsm"
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
