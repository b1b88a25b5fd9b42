package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func peersJSONPath(tn *testNode) string {
	return filepath.Join(tn.cfg.DataDir, raftDirName, peersFileName)
}

func writePeersJSON(t *testing.T, tn *testNode, content string) {
	t.Helper()
	if err := os.WriteFile(peersJSONPath(tn), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// startErr starts a fresh Node on tn's data dir and returns Start's error
// (shutting the node down when it started).
func startErr(t *testing.T, tn *testNode) error {
	t.Helper()
	n, err := New(tn.cfg, newTestFSM(t), tn.c.fwd)
	if err != nil {
		t.Fatal(err)
	}
	err = n.Start(context.Background())
	if err == nil {
		_ = n.Shutdown(false)
	}
	return err
}

// Two of three masters are lost for good: the survivor is restarted with a
// peers.json naming only itself, recovers every entry it had, leads alone,
// accepts writes, and the file is gone. It runs on both raft log stores.
func TestPeersJSONRecoversALostQuorum(t *testing.T) {
	eachLogStore(t, peersJSONRecoversALostQuorum)
}

func peersJSONRecoversALostQuorum(t *testing.T, store clusterOpt) {
	c := newTestCluster(t, 3, store)
	c.startAll()
	ld := c.leader()
	proposeMany(t, ld.node(), 0, 25, 4)
	c.awaitCount(25)
	if err := ld.node().Snapshot(); err != nil { // part in a snapshot, part in the log
		t.Fatal(err)
	}
	proposeMany(t, ld.node(), 25, 30, 2)
	c.awaitCount(30)
	for _, tn := range c.nodes {
		tn.stop(false)
	}

	survivor := c.nodes[0]
	// Refusals first; each leaves the file in place.
	writePeersJSON(t, survivor, `not json`)
	if err := startErr(t, survivor); err == nil || !strings.Contains(err.Error(), "peers.json") {
		t.Fatalf("malformed peers.json: Start = %v", err)
	}
	writePeersJSON(t, survivor, fmt.Sprintf(`[{"id": "m2", "address": %q, "non_voter": false}]`, c.peers[1].RaftAddress))
	if err := startErr(t, survivor); err == nil || !strings.Contains(err.Error(), "does not list this master") {
		t.Fatalf("peers.json without this node: Start = %v", err)
	}
	if _, err := os.Stat(peersJSONPath(survivor)); err != nil {
		t.Fatalf("a refused peers.json was removed: %v", err)
	}

	writePeersJSON(t, survivor, fmt.Sprintf(`[{"id": "m1", "address": %q, "non_voter": false}]`, c.peers[0].RaftAddress))
	survivor.start()
	if c.leader() != survivor {
		t.Fatal("the survivor does not lead")
	}
	if _, err := os.Stat(peersJSONPath(survivor)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("peers.json still there after the recovery: %v", err)
	}
	c.awaitCount(30)
	if v := voters(t, survivor.node()); len(v) != 1 || v["m1"] == "" {
		t.Fatalf("voters after recovery: %v", v)
	}
	mustPropose(t, survivor.node(), 30)
	c.awaitCount(31)

	// A restart does not recover again (the file is gone) and keeps it all.
	survivor.stop(true)
	survivor.start()
	c.leader()
	c.awaitCount(31)
}

func TestPeersJSONInAnEmptyDataDirIsRefused(t *testing.T) {
	c := newTestCluster(t, 1)
	tn := c.nodes[0]
	if err := os.MkdirAll(filepath.Join(tn.cfg.DataDir, raftDirName), 0o700); err != nil {
		t.Fatal(err)
	}
	writePeersJSON(t, tn, fmt.Sprintf(`[{"id": "m1", "address": %q, "non_voter": false}]`, c.peers[0].RaftAddress))
	if err := startErr(t, tn); err == nil || !strings.Contains(err.Error(), "holds no raft state") {
		t.Fatalf("Start = %v", err)
	}
}
