package raftfsm

import (
	"github.com/lancemaster/lancemaster/gen-go/journal"
)

// The cluster id (DESIGN.md §13.1) names this Raft history: the sequence of
// leader terms that backends fence dispatches and queries with. The first
// leader journals a random id when the journal has none (the leader picks
// it: Apply reads no random source); Raft snapshots carry it. An operator
// restore of a snapshot file replaces the journal, the file's id included,
// so the restoring leader journals its own pre-restore id again with
// replace: the terms of this history go on, and a backend's fence for it
// stays right. Fresh masters that restore an old cluster's file thus get a
// new id, and the backends, which remember the old cluster's higher terms,
// fence the new one from scratch.

func init() {
	register(CommandSpec{Type: CmdSetClusterID, Name: "set_cluster_id", Forward: ForwardNever, Wake: WakeDispatcher}, journal.NewTClusterIDCommand, applySetClusterID)
}

// MaxClusterIDBytes bounds a cluster id; ids are printable ASCII.
const MaxClusterIDBytes = 64

func applySetClusterID(t *tx, c *journal.TClusterIDCommand) (*journal.TApplyResponse, error) {
	if !validClusterID(c.ClusterID) {
		return respFail(journal.TApplyCode_INVALID, "a cluster id is 1 to %d printable ASCII characters", MaxClusterIDBytes), nil
	}
	switch {
	case t.m.clusterID == c.ClusterID:
		return respOK(), nil // idempotent
	case t.m.clusterID != "" && !c.GetReplace():
		return respFail(journal.TApplyCode_NOOP, "the cluster id is already set"), nil
	}
	t.m.clusterID = c.ClusterID
	return respOK(), nil
}

func validClusterID(id string) bool {
	if id == "" || len(id) > MaxClusterIDBytes {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c <= 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}

// ClusterID is the journaled cluster id, "" until the first leader has
// journaled one.
func (s *State) ClusterID() string { return s.m.clusterID }
