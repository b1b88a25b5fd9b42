package backend

import (
	"time"

	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/gen-go/wire"
)

// Cluster binding and the per-cluster leader-term fence (DESIGN.md §13.1).
//
// A backend serves one cluster at a time: it binds to the cluster id of the
// first heartbeat that carries one. A request (submit, query, resolve)
// naming another cluster id answers OTHER_CLUSTER; one naming none (a master
// of an older version) is judged against the bound cluster. The leader-term
// fence is kept per cluster id, so fresh masters restored from a snapshot
// (a new cluster id, terms starting low) are not fenced off by the terms of
// the Raft history they replaced. The backend re-binds to another cluster
// id when that cluster heartbeats and the bound one has not heartbeaten for
// Config.ClusterRebindAfter; the old cluster's fence is kept (up to
// maxClusterFences cluster ids; the least recently heard unbound one is
// forgotten first).
//
// Everything here is guarded by Agent.mu.

const (
	// DefaultClusterRebindAfter is how long the bound cluster must have been
	// silent before a heartbeat from another cluster re-binds the backend.
	DefaultClusterRebindAfter = 10 * time.Second
	// noLeaderTerm, passed as the term to fenceClusterLocked, checks the
	// cluster only: for requests that carry no leader term (resolve).
	noLeaderTerm = -1
	// maxClusterIDBytes bounds a cluster id (the leader journals a short
	// random one).
	maxClusterIDBytes = 256
	// maxClusterFences bounds the cluster ids whose fence is remembered.
	maxClusterFences = 16
)

// clusterFence is the fence of one cluster id.
type clusterFence struct {
	term     int64     // the highest leader term seen for this cluster id
	lastSeen time.Time // the last request or heartbeat naming it
}

// clusters is the binding and the fences of an Agent.
type clusters struct {
	bound      string    // "" until a heartbeat carried a cluster id
	boundHeard time.Time // the bound cluster's last heartbeat (or the bind)
	fences     map[string]*clusterFence
}

// effective is the cluster id a request is judged under: its own, or
// the bound one when it names none.
func (c *clusters) effective(clusterID string) string {
	if clusterID == "" {
		return c.bound
	}
	return clusterID
}

// fence returns the fence of id, creating it (and forgetting the least
// recently seen unbound fence past maxClusterFences).
func (c *clusters) fence(id string, now time.Time) *clusterFence {
	if c.fences == nil {
		c.fences = map[string]*clusterFence{}
	}
	f := c.fences[id]
	if f == nil {
		if len(c.fences) >= maxClusterFences {
			var oldest *string
			for k, v := range c.fences {
				if k != c.bound && (oldest == nil || v.lastSeen.Before(c.fences[*oldest].lastSeen)) {
					oldest = &k
				}
			}
			if oldest != nil {
				delete(c.fences, *oldest)
			}
		}
		f = &clusterFence{}
		c.fences[id] = f
	}
	f.lastSeen = now
	return f
}

// term is the fence of the bound cluster (for metrics and for delivery's
// refusal bookkeeping).
func (c *clusters) term() int64 {
	if f := c.fences[c.bound]; f != nil {
		return f.term
	}
	return 0
}

// fenceClusterLocked is the cluster and leader-term fence of every request
// that carries a cluster id (submit, query, resolve): nil when the request
// passes. Callers hold a.mu.
//
//   - a cluster id longer than maxClusterIDBytes → INVALID_ARGUMENT;
//   - a cluster id other than the bound one → OTHER_CLUSTER; "" (an older
//     master) is judged against the bound cluster; before any heartbeat
//     carried a cluster id, a request's id is taken as it is (its fence is
//     kept under it) and does not bind;
//   - term below that cluster's highest → STALE_LEADER_TERM; a higher term
//     raises the fence first. term noLeaderTerm checks the cluster only.
func (a *Agent) fenceClusterLocked(clusterID string, term int64) *wire.TStatus {
	if len(clusterID) > maxClusterIDBytes {
		return statusf(wire.TStatusCode_INVALID_ARGUMENT, "cluster_id is longer than %d bytes", maxClusterIDBytes)
	}
	c := &a.cl
	if clusterID != "" && c.bound != "" && clusterID != c.bound {
		return statusf(wire.TStatusCode_OTHER_CLUSTER, "this backend serves cluster %s, not %s", clipForLog(c.bound), clipForLog(clusterID))
	}
	if term == noLeaderTerm {
		return nil
	}
	f := c.fence(c.effective(clusterID), a.cfg.Clock())
	if term < f.term {
		return statusf(wire.TStatusCode_STALE_LEADER_TERM, "leader term %d is below the highest seen (%d)", term, f.term)
	}
	f.term = term
	return nil
}

// fenceLocked is the fence of submit and query: the process epoch, then the
// cluster and its leader term (fenceClusterLocked). Callers hold a.mu.
func (a *Agent) fenceLocked(clusterID string, epoch, term int64) *wire.TStatus {
	if st := a.fenceClusterLocked(clusterID, noLeaderTerm); st != nil {
		return st
	}
	if epoch != a.epoch {
		return statusf(wire.TStatusCode_STALE_EPOCH, "process epoch %d is not this process's (%d)", epoch, a.epoch)
	}
	return a.fenceClusterLocked(clusterID, term)
}

// heartbeatClusterLocked binds or re-binds on a heartbeat naming clusterID
// and returns the cluster it is judged under, or other=true when it comes
// from another cluster than the bound one (which stays bound).
func (a *Agent) heartbeatClusterLocked(clusterID, masterID string) (eff string, other bool) {
	c, now := &a.cl, a.cfg.Clock()
	switch {
	case clusterID == "":
		if c.bound != "" {
			c.boundHeard = now
		}
		return c.bound, false
	case c.bound == clusterID:
		c.boundHeard = now
		return clusterID, false
	case c.bound == "":
		a.log.Info("bound to the cluster of the first heartbeat that names one", zap.String("cluster_id", clipForLog(clusterID)),
			zap.String("master_id", clipForLog(masterID)))
	case now.Sub(c.boundHeard) >= a.cfg.ClusterRebindAfter:
		a.log.Warn("re-binding to another cluster: the bound one has been silent", zap.String("cluster_id", clipForLog(clusterID)),
			zap.String("previous_cluster_id", clipForLog(c.bound)), zap.Duration("silent_for", now.Sub(c.boundHeard)),
			zap.String("master_id", clipForLog(masterID)))
	default:
		a.log.Debug("heartbeat from another cluster refused", zap.String("cluster_id", clipForLog(clusterID)),
			zap.String("bound_cluster_id", clipForLog(c.bound)), zap.String("master_id", clipForLog(masterID)))
		return c.bound, true
	}
	c.bound, c.boundHeard = clusterID, now
	return clusterID, false
}
