package cluster

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"
)

// Lost-quorum recovery (docs/operations.md), as Consul does it: when a
// majority of the masters is gone for good, the operator stops every
// surviving master, writes the same peers.json (the new, smaller voter list)
// into <data_dir>/raft/ of each, and starts them. Start then rewrites the
// node's raft state with that configuration (raft.RecoverCluster: the
// latest snapshot plus every log entry on this node, re-snapshotted under
// the new configuration) and deletes the file, so it is applied once.
//
// The file is hashicorp/raft's JSON configuration format:
//
//	[
//	  {"id": "m1", "address": "10.0.0.1:7000", "non_voter": false},
//	  {"id": "m2", "address": "10.0.0.2:7000", "non_voter": false}
//	]
//
// Recovery forces a configuration without a vote: committed entries that
// only the lost masters had are gone. It is the last resort.

// peersFileName is the recovery file in DataDir/raft.
const peersFileName = "peers.json"

// recoverFromPeersJSON applies DataDir/raft/peers.json when it exists and
// then deletes it. It reports whether it recovered. A file that does not
// parse, a configuration without this node as a voter, or a data dir with
// no raft state fail the start and leave the file in place.
func recoverFromPeersJSON(conf *raft.Config, cfg Config, fsm raft.FSM, st *storage, log *zap.Logger) (bool, error) {
	path := filepath.Join(cfg.DataDir, raftDirName, peersFileName)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("cluster: recovery: %w", err)
	}
	configuration, err := raft.ReadConfigJSON(path)
	if err != nil {
		return false, fmt.Errorf("cluster: recovery: %s: %w", path, err)
	}
	self := false
	ids := make([]string, 0, len(configuration.Servers))
	for _, s := range configuration.Servers {
		ids = append(ids, string(s.ID))
		self = self || (string(s.ID) == cfg.NodeID && s.Suffrage == raft.Voter)
	}
	if !self {
		return false, fmt.Errorf("cluster: recovery: %s does not list this master (%q) as a voter; "+
			"it belongs only in the data dirs of the masters that stay", path, cfg.NodeID)
	}
	has, err := raft.HasExistingState(st.logs, st.store, st.snapshots)
	if err != nil {
		return false, fmt.Errorf("cluster: recovery: inspect raft state: %w", err)
	}
	if !has {
		return false, fmt.Errorf("cluster: recovery: %s found, but this data dir holds no raft state to recover; "+
			"remove the file (a master with an empty data dir joins through operator raft add-voter)", path)
	}
	log.Warn("peers.json found: recovering the raft configuration from it", zap.String("file", path),
		zap.Strings("voters_and_nonvoters", ids))
	if err := raft.RecoverCluster(conf, fsm, st.logs, st.store, st.snapshots, st.transport, configuration); err != nil {
		return false, fmt.Errorf("cluster: recovery from %s failed: %w", path, err)
	}
	if err := os.Remove(path); err != nil {
		return true, fmt.Errorf("cluster: recovered from %s, but could not delete it; delete it by hand "+
			"before the next start, or the recovery runs again: %w", path, err)
	}
	log.Warn("recovered the raft configuration from peers.json and deleted the file", zap.Strings("servers", ids))
	return true, nil
}
