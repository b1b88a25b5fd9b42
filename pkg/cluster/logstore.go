package cluster

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
	"go.etcd.io/bbolt"

	"github.com/lancemaster/lancemaster/pkg/config"
)

// OpenLogStore opens the log and stable store of kind under the raft dir
// (a master's, and the benchmark's raw baseline nodes'). A data dir keeps
// the store it was created with: auto opens the one it holds (raft-wal in a
// new one), and a named store the dir does not hold is refused, before
// anything is opened or created, because the two cannot read each other's
// log and an empty store would bootstrap anew.
func OpenLogStore(dir, kind string, hl hclog.Logger) (LogStore, error) {
	boltPath, walDir := filepath.Join(dir, boltFileName), filepath.Join(dir, walDirName)
	if kind == config.RaftLogStoreAuto {
		var err error
		if kind, err = heldLogStore(boltPath, walDir); err != nil {
			return nil, err
		}
		hl.Info("raft log store chosen by the data dir (raft_log_store: auto)", "store", kind)
	}
	other, otherPath := "", ""
	switch kind {
	case config.RaftLogStoreBoltDB:
		other, otherPath = config.RaftLogStoreWAL, walDir
	case config.RaftLogStoreWAL:
		other, otherPath = config.RaftLogStoreBoltDB, boltPath
	default:
		return nil, fmt.Errorf("cluster: %w", config.CheckRaftLogStore(kind))
	}
	if _, err := os.Stat(otherPath); err == nil {
		return nil, fmt.Errorf("cluster: the data dir holds a %s raft log store (%s), not the configured %s: "+
			"set raft_log_store: %s, or remove this master's raft dir and add it back to the cluster (docs/cluster.md)",
			other, otherPath, kind, other)
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("cluster: inspect the raft dir: %w", err)
	}
	if kind == config.RaftLogStoreBoltDB {
		s, err := raftboltdb.New(raftboltdb.Options{
			Path:        boltPath,
			BoltOptions: &bbolt.Options{Timeout: storeLockTimeout},
			NoSync:      false, // every append is fsynced: the journal is the only copy
		})
		if err != nil {
			return nil, fmt.Errorf("cluster: open raft log store %s: %w", boltPath, err)
		}
		return s, nil
	}
	if err := os.MkdirAll(walDir, 0o700); err != nil {
		return nil, fmt.Errorf("cluster: create raft log dir %s: %w", walDir, err)
	}
	// raft-wal opens its meta file without a lock timeout: the lock is ours.
	lock, err := lockFile(filepath.Join(walDir, walLockName), storeLockTimeout)
	if err != nil {
		return nil, fmt.Errorf("cluster: lock raft log store %s: %w", walDir, err)
	}
	// The meta store is ours too: raft-wal v0.4.0's Close left the one it
	// opens itself open, and with it bbolt's lock on wal-meta.db, so a
	// restarted master could not open its data dir again. v0.4.1 closes it;
	// closing it here as well is harmless (BoltMetaDB.Close is idempotent)
	// and keeps the master's release independent of the library's.
	meta := &metadb.BoltMetaDB{}
	w, err := wal.Open(walDir, wal.WithLogger(hl.Named("wal")), wal.WithMetaStore(meta))
	if err != nil {
		meta.Close()
		lock.Close()
		return nil, fmt.Errorf("cluster: open raft log store %s: %w", walDir, err)
	}
	return &walStore{WAL: w, meta: meta, lock: lock}, nil
}

// heldLogStore is the store a raft dir holds: raft-boltdb when raft.db is
// there, else raft-wal (also for a new dir). A dir holding both is refused:
// which log is the journal cannot be told.
func heldLogStore(boltPath, walDir string) (string, error) {
	exists := func(p string) (bool, error) {
		_, err := os.Stat(p)
		if errors.Is(err, os.ErrNotExist) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("cluster: inspect the raft dir: %w", err)
		}
		return true, nil
	}
	bolt, err := exists(boltPath)
	if err != nil {
		return "", err
	}
	w, err := exists(walDir)
	if err != nil {
		return "", err
	}
	switch {
	case bolt && w:
		return "", fmt.Errorf("cluster: the raft dir holds both a %s (%s) and a %s (%s) raft log store: "+
			"keep the one this master ran on and move the other away (docs/cluster.md)",
			config.RaftLogStoreBoltDB, boltPath, config.RaftLogStoreWAL, walDir)
	case bolt:
		return config.RaftLogStoreBoltDB, nil
	}
	return config.RaftLogStoreWAL, nil
}

// walStore is raft-wal with its meta store and the data dir's lock, both
// released on Close.
type walStore struct {
	*wal.WAL
	meta io.Closer
	lock io.Closer
}

func (s *walStore) Close() error {
	return errors.Join(s.WAL.Close(), s.meta.Close(), s.lock.Close())
}

// lockFile takes an exclusive flock on path (created if absent), retrying
// until timeout; the lock lasts until the returned file is closed.
func lockFile(path string, timeout time.Duration) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(timeout)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || !time.Now().Before(deadline) {
			f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return nil, errors.New("another process holds it (is a master already running on this data dir?)")
			}
			return nil, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}
