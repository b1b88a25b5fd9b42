package cluster

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"go.uber.org/zap"
)

// Data dir layout (documented in docs/cluster.md).
const (
	raftDirName  = "raft"    // DataDir/raft
	boltFileName = "raft.db" // DataDir/raft/raft.db: log + stable store (boltdb)
	walDirName   = "wal"     // DataDir/raft/wal/: log + stable store (wal)
	walLockName  = "LOCK"    // DataDir/raft/wal/LOCK: one process per data dir
	// The snapshot store adds DataDir/raft/snapshots/<term>-<index>-<ms>/.
)

const (
	// logCacheSize entries of the newest log are served from memory: the
	// leader re-reads them for every follower's AppendEntries (+16% measured).
	logCacheSize = 512
	// transportMaxPool connections kept open per peer; more than one lets a
	// snapshot install and heartbeats/appends proceed side by side.
	transportMaxPool = 4
	// transportTimeout bounds one transport I/O (not InstallSnapshot, which
	// raft scales with the snapshot size).
	transportTimeout = 10 * time.Second
	// storeLockTimeout: either store is opened under an exclusive file lock
	// (bbolt's own, or walLockName); a second process on the same data dir
	// fails after it instead of hanging.
	storeLockTimeout = 5 * time.Second
)

// storage is everything on disk or on the wire that raft is built on. Close
// it only after raft.Shutdown has returned.
type storage struct {
	store     LogStore
	logs      raft.LogStore // store behind a LogCache
	snapshots *raft.FileSnapshotStore
	transport *raft.NetworkTransport
}

// LogStore is the Raft log and stable store of a data dir: raft-boltdb or
// raft-wal (Config.LogStore). Both fsync every append before it returns.
type LogStore interface {
	raft.LogStore
	raft.StableStore
	Close() error
}

// openStorage opens the stores under cfg.DataDir and binds the transport.
func openStorage(cfg Config, hl hclog.Logger) (*storage, error) {
	dir := filepath.Join(cfg.DataDir, raftDirName)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("cluster: create raft dir %s: %w", dir, err)
	}
	store, err := OpenLogStore(dir, cfg.LogStore, hl)
	if err != nil {
		return nil, err
	}
	st := &storage{store: store}
	if st.logs, err = raft.NewLogCache(logCacheSize, store); err != nil {
		st.close()
		return nil, fmt.Errorf("cluster: log cache: %w", err)
	}
	if st.snapshots, err = raft.NewFileSnapshotStoreWithLogger(dir, cfg.SnapshotRetain, hl.Named("snapshot")); err != nil {
		st.close()
		return nil, fmt.Errorf("cluster: open snapshot store in %s: %w", dir, err)
	}
	advertise, err := net.ResolveTCPAddr("tcp", cfg.RaftAdvertise)
	if err != nil {
		st.close()
		return nil, fmt.Errorf("cluster: resolve raft advertise address %q: %w", cfg.RaftAdvertise, err)
	}
	st.transport, err = newTransport(cfg.RaftBind, advertise, cfg.RaftTLS,
		transportMaxPool, transportTimeout, hl.Named("transport"))
	if err != nil {
		st.close()
		return nil, fmt.Errorf("cluster: raft transport on %s (advertise %s): %w", cfg.RaftBind, advertise, err)
	}
	return st, nil
}

// close releases the transport and the log store; safe on a partly opened
// storage. Call only after raft.Shutdown.
func (st *storage) close() error {
	var errs []error
	if st.transport != nil {
		if err := st.transport.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close raft transport: %w", err))
		}
	}
	if st.store != nil {
		if err := st.store.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close raft log store: %w", err))
		}
	}
	return errors.Join(errs...)
}

// bootstrapIfNew writes the static voter list as the first configuration
// when this data dir has never held Raft state. Every master bootstraps the
// same list, so whichever wins the first election has a configuration the
// others agree with. It reports whether it bootstrapped.
func bootstrapIfNew(conf *raft.Config, cfg Config, st *storage, log *zap.Logger) (bool, error) {
	has, err := raft.HasExistingState(st.logs, st.store, st.snapshots)
	if err != nil {
		return false, fmt.Errorf("cluster: inspect raft state: %w", err)
	}
	if has {
		return false, nil
	}
	if cfg.Join {
		// Raft without a configuration stays a follower that never
		// campaigns; the leader's AppendEntries after add-voter bring it
		// the cluster's configuration and log.
		log.Info("joining: this master waits to be added by the leader (operator raft add-voter)")
		return false, nil
	}
	servers := make([]raft.Server, 0, len(cfg.Peers))
	for _, p := range cfg.Peers {
		servers = append(servers, raft.Server{
			ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.RaftAddress), Suffrage: raft.Voter,
		})
	}
	err = raft.BootstrapCluster(conf, st.logs, st.store, st.snapshots, st.transport, raft.Configuration{Servers: servers})
	switch {
	case errors.Is(err, raft.ErrCantBootstrap):
		return false, nil // raced with existing state: nothing to do
	case err != nil:
		return false, fmt.Errorf("cluster: bootstrap static peers: %w", err)
	}
	log.Info("bootstrapped a new raft cluster from the static peer list", zap.Int("voters", len(servers)))
	return true, nil
}
