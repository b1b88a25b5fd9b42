package cluster

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/lancemaster/lancemaster/pkg/config"
)

// eachLogStore runs test once per raft log store, as a subtest named after it.
func eachLogStore(t *testing.T, test func(t *testing.T, store clusterOpt)) {
	for _, kind := range []string{config.RaftLogStoreBoltDB, config.RaftLogStoreWAL} {
		t.Run(kind, func(t *testing.T) { test(t, withLogStore(kind)) })
	}
}

func withLogStore(kind string) clusterOpt { return func(c *Config) { c.LogStore = kind } }

// A wal cluster keeps its writes across a full stop and start of every node
// (its stable store holds the term and vote, its segments the log), and
// keeps them in raft/wal/, with no raft.db beside them.
func TestWALClusterSurvivesAFullRestart(t *testing.T) {
	c := newTestCluster(t, 3, withLogStore(config.RaftLogStoreWAL))
	c.startAll()
	ld := c.leader()
	proposeMany(t, ld.node(), 0, 50, 8)
	c.awaitCount(50)
	term := ld.node().LeaderTerm()
	for _, tn := range c.nodes {
		tn.stop(false)
	}
	for _, tn := range c.nodes {
		raftDir := filepath.Join(tn.cfg.DataDir, raftDirName)
		if _, err := os.Stat(filepath.Join(raftDir, boltFileName)); !os.IsNotExist(err) {
			t.Fatalf("%s: a wal node wrote %s (stat: %v)", tn.cfg.NodeID, boltFileName, err)
		}
		if _, err := os.Stat(filepath.Join(raftDir, walDirName, walLockName)); err != nil {
			t.Fatalf("%s: no wal dir: %v", tn.cfg.NodeID, err)
		}
	}
	c.startAll()
	nl := c.leader()
	if err := nl.node().ConsistentRead(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.awaitCount(50)
	if got := nl.node().LeaderTerm(); got <= term {
		t.Fatalf("leader term %d after the restart, want above %d (the stable store lost the term)", got, term)
	}
	mustPropose(t, nl.node(), 50)
	c.awaitCount(51)
}

// A data dir keeps the store it was created with: opened with the other
// store configured, the node refuses to start, names both and changes
// nothing (the first store still opens, with its log).
func TestADataDirKeepsItsLogStore(t *testing.T) {
	for _, tc := range []struct{ made, then string }{
		{config.RaftLogStoreBoltDB, config.RaftLogStoreWAL},
		{config.RaftLogStoreWAL, config.RaftLogStoreBoltDB},
	} {
		t.Run(tc.made+"→"+tc.then, func(t *testing.T) {
			dir := t.TempDir()
			s, err := OpenLogStore(dir, tc.made, hclog.NewNullLogger())
			if err != nil {
				t.Fatal(err)
			}
			if err := s.SetUint64([]byte("CurrentTerm"), 7); err != nil {
				t.Fatal(err)
			}
			s.Close()
			entries, _ := os.ReadDir(dir)
			_, err = OpenLogStore(dir, tc.then, hclog.NewNullLogger())
			if err == nil || !strings.Contains(err.Error(), "holds a "+tc.made) || !strings.Contains(err.Error(), "raft_log_store: "+tc.made) {
				t.Fatalf("opening a %s data dir as %s: %v", tc.made, tc.then, err)
			}
			if after, _ := os.ReadDir(dir); len(after) != len(entries) {
				t.Fatalf("the refused open changed the raft dir: %v → %v", entries, after)
			}
			s, err = OpenLogStore(dir, tc.made, hclog.NewNullLogger())
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if v, err := s.GetUint64([]byte("CurrentTerm")); err != nil || v != 7 {
				t.Fatalf("term after the refused open: %d, %v", v, err)
			}
		})
	}
}

// auto (the default) opens the store a data dir holds — so an upgraded
// master keeps raft-boltdb — and raft-wal in a new one; a dir holding both
// is refused and left as it is.
func TestAutoOpensTheStoreTheDataDirHolds(t *testing.T) {
	open := func(dir, kind string) {
		t.Helper()
		s, err := OpenLogStore(dir, kind, hclog.NewNullLogger())
		if err != nil {
			t.Fatal(err)
		}
		if err := s.SetUint64([]byte("CurrentTerm"), 9); err != nil {
			t.Fatal(err)
		}
		s.Close()
	}
	holds := func(dir string) (bolt, wal bool) {
		_, be := os.Stat(filepath.Join(dir, boltFileName))
		_, we := os.Stat(filepath.Join(dir, walDirName))
		return be == nil, we == nil
	}
	fresh := t.TempDir()
	open(fresh, config.RaftLogStoreAuto)
	if b, w := holds(fresh); b || !w {
		t.Fatalf("a new data dir under auto: raft.db %v, wal %v; want raft-wal", b, w)
	}
	for _, made := range []string{config.RaftLogStoreBoltDB, config.RaftLogStoreWAL} {
		dir := t.TempDir()
		open(dir, made)
		s, err := OpenLogStore(dir, config.RaftLogStoreAuto, hclog.NewNullLogger())
		if err != nil {
			t.Fatalf("auto on a %s data dir: %v", made, err)
		}
		v, err := s.GetUint64([]byte("CurrentTerm"))
		s.Close()
		if err != nil || v != 9 {
			t.Fatalf("auto on a %s data dir read term %d (%v): not the store it holds", made, v, err)
		}
		if b, w := holds(dir); b != (made == config.RaftLogStoreBoltDB) || w != (made == config.RaftLogStoreWAL) {
			t.Fatalf("auto on a %s data dir: raft.db %v, wal %v", made, b, w)
		}
	}
	both := t.TempDir()
	open(both, config.RaftLogStoreBoltDB)
	if err := os.MkdirAll(filepath.Join(both, walDirName), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenLogStore(both, config.RaftLogStoreAuto, hclog.NewNullLogger()); err == nil || !strings.Contains(err.Error(), "holds both") {
		t.Fatalf("auto on a dir holding both stores: %v", err)
	}
}

// One process per wal data dir: a second lock fails once its timeout has
// passed, and succeeds once the first is released.
func TestWALDataDirLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), walLockName)
	first, err := lockFile(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lockFile(path, 100*time.Millisecond); err == nil || !strings.Contains(err.Error(), "another process holds it") {
		t.Fatalf("second lock: %v", err)
	}
	first.Close()
	again, err := lockFile(path, time.Second)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	again.Close()
}

// The store kind is checked: an unknown one is refused by name.
func TestUnknownLogStoreRefused(t *testing.T) {
	if _, err := OpenLogStore(t.TempDir(), "rocksdb", hclog.NewNullLogger()); err == nil || !strings.Contains(err.Error(), `"rocksdb"`) {
		t.Fatalf("unknown store: %v", err)
	}
	cfg := Config{NodeID: "m1", RaftBind: "127.0.0.1:1", DataDir: t.TempDir(), LogStore: "rocksdb",
		Peers: []config.Peer{{ID: "m1", RaftAddress: "127.0.0.1:1"}}}
	if err := cfg.withDefaults().validate(); err == nil || !strings.Contains(err.Error(), "rocksdb") {
		t.Fatalf("config with an unknown store: %v", err)
	}
}
