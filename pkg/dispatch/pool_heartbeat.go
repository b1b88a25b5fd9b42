package dispatch

import (
	"context"
	"sync"

	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// heartbeatPass heartbeats every registered backend in parallel, each call
// bounded by HeartbeatTimeout, and returns when all have answered or failed.
// Every call carries this cluster's id (once one is journaled).
func (p *Pool) heartbeatPass(ctx context.Context, gen, term uint64) {
	st := p.d.Reader.State()
	backends := st.Backends()
	ours := clusterIDOf(st)
	req := &wire.THeartbeatRequest{MasterID: p.d.MasterID}
	if term != 0 {
		t := int64(term)
		req.LeaderTerm = &t
	}
	if ours != "" {
		req.ClusterID = &ours
	}
	if p.d.MasterAddresses != nil {
		req.MasterAddresses = p.d.MasterAddresses()
	}
	// req is shared by the calls: it is only read from here on.
	sem := make(chan struct{}, maxParallelHeartbeats)
	var wg sync.WaitGroup
	for _, b := range backends {
		if ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			seq := p.nextSeq()
			cctx, cancel := context.WithTimeout(ctx, p.d.HeartbeatTimeout)
			resp, err := p.d.Backends.Heartbeat(cctx, b.Address, req)
			cancel()
			p.recordHeartbeat(gen, b.ID, seq, ours, resp, err)
		}()
	}
	wg.Wait()
	p.finishPass(gen, backends)
}

// nextSeq numbers a heartbeat call right before it is sent.
func (p *Pool) nextSeq() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seq++
	return p.seq
}

// clusterMismatch: the backend names a cluster id, and it is not ours. A
// backend that names none (an old one, or one no master has bound yet)
// is judged by its status alone.
func clusterMismatch(ours, theirs string) bool { return theirs != "" && theirs != ours }

// recordHeartbeat keeps what an answer of the current run says.
//
//   - A failure or an answer without a status changes nothing: it proves
//     nothing, and liveness simply ages out.
//   - OTHER_CLUSTER, or an answer naming another cluster id: the backend is
//     not alive for this cluster (its epoch is not taken: it is not ours to
//     judge by).
//   - Another non-OK status, or OK without an epoch: not accepting; the
//     epoch and liveness are not refreshed.
//   - OK of this cluster: alive, epoch, capacity, accepting (a missing
//     field counts as accepting), outbox delivered; an accepting answer to
//     a heartbeat sent after the last refusal clears it.
func (p *Pool) recordHeartbeat(gen uint64, backendID int64, seq uint64, ours string, resp *wire.THeartbeatResponse, err error) {
	if err != nil || resp == nil || resp.Status == nil {
		fields := []zap.Field{zap.Int64("backend_id", backendID)}
		if err != nil {
			fields = append(fields, zap.Error(err))
		}
		p.log.Debug("heartbeat not answered", fields...)
		return
	}
	code := resp.Status.StatusCode
	theirs := resp.GetClusterID()
	foreign := code == wire.TStatusCode_OTHER_CLUSTER || clusterMismatch(ours, theirs)
	ok := code == wire.TStatusCode_OK && resp.BeProcessEpoch != 0 && !foreign

	now := p.d.Clock()
	p.mu.Lock()
	if p.gen != gen || !p.running {
		p.mu.Unlock()
		return
	}
	b, seen := p.backends[backendID]
	if !seen {
		if !ok && !foreign {
			p.mu.Unlock()
			p.log.Debug("heartbeat not answered OK", zap.Int64("backend_id", backendID), zap.Stringer("status", code))
			return
		}
		b = &backendState{}
		p.backends[backendID] = b
	}
	wasAlive, wasAccepting, wasForeign, oldTheirs := b.alive, b.accepting, b.otherCluster, b.theirs
	wasDelivered := b.outboxDelivered
	oldEpoch := b.epoch
	epochChanged, cleared := false, false
	switch {
	case foreign:
		b.otherCluster, b.theirs = true, theirs
		b.accepting, b.notAccepting = false, "serves another cluster"
		b.alive = false
	case !ok:
		b.accepting, b.notAccepting = false, "heartbeat answered "+code.String()
	default:
		epochChanged = b.epoch != 0 && b.epoch != resp.BeProcessEpoch
		b.lastOK, b.epoch, b.capacity = now, resp.BeProcessEpoch, resp.GetCapacity()
		b.version = clip(resp.GetVersion(), maxVersionLen)
		b.outboxDelivered = resp.GetOutboxDelivered()
		b.otherCluster, b.theirs = false, theirs
		b.accepting = !resp.IsSetAccepting() || resp.GetAccepting()
		b.notAccepting = ""
		if !b.accepting {
			b.notAccepting = resp.GetNotAcceptingReason()
		}
		if b.accepting && b.refused && seq > b.refusedSeq {
			b.refused, cleared = false, true
		}
		b.alive = true
	}
	becameAlive := b.alive && !wasAlive
	// A new process that has just delivered its outbox is the evidence the
	// epoch path waits for (§13.3): the round acts on it at once.
	delivered := b.outboxDelivered && (!wasDelivered || epochChanged)
	accepting, reason, epoch := b.accepting, b.notAccepting, b.epoch
	p.mu.Unlock()

	id := zap.Int64("backend_id", backendID)
	if foreign && (!wasForeign || oldTheirs != theirs) {
		p.log.Warn("backend serves another cluster; not alive for dispatch", id,
			zap.String("cluster_id", ours), zap.String("backend_cluster_id", theirs), zap.Stringer("status", code))
	}
	if !foreign && wasForeign {
		p.log.Info("backend serves this cluster again", id, zap.String("cluster_id", ours))
	}
	if epochChanged {
		p.log.Info("backend process epoch changed", id, zap.Int64("old_epoch", oldEpoch), zap.Int64("epoch", epoch))
	}
	if becameAlive {
		p.log.Info("backend alive", id, zap.Int64("epoch", epoch))
	}
	switch {
	case foreign:
	case !accepting && (wasAccepting || !seen):
		p.log.Info("backend does not accept dispatches", id, zap.String("reason", reason))
	case accepting && !wasAccepting && seen:
		p.log.Info("backend accepts dispatches again", id)
	}
	if cleared {
		p.log.Info("backend answered OK and accepting after its refusal; dispatchable again", id)
	}
	if (epochChanged || becameAlive || cleared || delivered || (accepting && !wasAccepting) || (foreign && !wasForeign)) && p.d.Waker != nil {
		p.d.Waker.Wake()
	}
}

// finishPass forgets unregistered backends, turns backends whose last OK
// answer is too old not-alive, and counts the pass.
func (p *Pool) finishPass(gen uint64, registered []*raftfsm.Backend) {
	now := p.d.Clock()
	keep := make(map[int64]bool, len(registered))
	for _, b := range registered {
		keep[b.ID] = true
	}
	var died []int64
	p.mu.Lock()
	if p.gen != gen || !p.running {
		p.mu.Unlock()
		return
	}
	for id, b := range p.backends {
		if !keep[id] {
			delete(p.backends, id)
			continue
		}
		if b.alive && !p.aliveAt(b, now) {
			b.alive = false
			died = append(died, id)
		}
	}
	p.passes++
	p.broadcastLocked()
	p.mu.Unlock()

	for _, id := range died {
		p.log.Warn("backend not alive: no OK heartbeat within 3 intervals", zap.Int64("backend_id", id))
	}
	if len(died) > 0 && p.d.Waker != nil {
		p.d.Waker.Wake()
	}
}

// maxVersionLen bounds the version string a backend reports (shown, never
// interpreted).
const maxVersionLen = 128

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
