package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/pkg/config"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// PeerStatus is one member of the Raft configuration as this node sees it.
type PeerStatus struct {
	// Peer is the member's id and addresses. Its RPCAddress comes from this
	// node's address book (the static peer list and add-voter, see
	// membership.go); empty for a member not in it.
	config.Peer
	// Suffrage is raft's: "Voter", "Nonvoter" or "Staging".
	Suffrage string
	// Leader: this member is the leader as far as this node knows.
	Leader bool
	// Self: this member is this node.
	Self bool
	// Health is PeerHealthy, PeerUnreachable or PeerUnknown: the leader's
	// contact with a follower (contact.go). Only a leader knows it; a
	// follower says PeerUnknown for the others and healthy for itself
	// only while it hears the leader.
	Health string
	// LastContact: the leader's latest answered AppendEntries to it (zero:
	// none known); LastError the latest failure while unreachable.
	LastContact time.Time
	LastError   string
}

// Peers lists the Raft configuration (the replicated membership, which on a
// static cluster equals the bootstrap list).
func (n *Node) Peers() ([]PeerStatus, error) {
	r, err := n.running()
	if err != nil {
		return nil, err
	}
	f := r.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, fmt.Errorf("cluster: read raft configuration: %w", err)
	}
	_, leader := r.LeaderWithID()
	leading := r.State() == raft.Leader
	window := contactWindows * n.raftConf.HeartbeatTimeout
	servers := f.Configuration().Servers
	out := make([]PeerStatus, 0, len(servers))
	for _, s := range servers {
		p := PeerStatus{
			Peer:     config.Peer{ID: string(s.ID), RaftAddress: string(s.Address), RPCAddress: n.rpcAddress(string(s.ID))},
			Suffrage: s.Suffrage.String(),
			Leader:   s.ID == leader,
			Self:     string(s.ID) == n.cfg.NodeID,
			Health:   PeerUnknown,
		}
		switch {
		case p.Self && leading:
			p.Health, p.LastContact = PeerHealthy, time.Now()
		case p.Self:
			// A follower vouches for itself only while it hears a leader.
			if last := r.LastContact(); !last.IsZero() && time.Since(last) <= window {
				p.Health, p.LastContact = PeerHealthy, last
			}
		case leading:
			p.Health, p.LastContact, p.LastError = n.contacts.health(s.ID, window)
		}
		out = append(out, p)
	}
	return out, nil
}

// TransferLeadership hands leadership to targetID (empty: the most
// up-to-date voter) and returns once this node has stepped down and (within
// a heartbeat timeout) learnt the new leader, so Leader() names it; or with an
// error when the transfer did not happen within raft's bound (about two
// election timeouts). It must run on the leader (else an error wrapping
// raftfsm.ErrNotLeader); transferring to this node itself is a no-op.
// Writes are refused while a transfer is in flight, and Propose retries them.
func (n *Node) TransferLeadership(targetID string) error {
	r, err := n.running()
	if err != nil {
		return err
	}
	if r.State() != raft.Leader {
		return fmt.Errorf("cluster: transfer leadership: %w", raftfsm.ErrNotLeader)
	}
	if targetID == n.cfg.NodeID {
		return nil
	}
	var f raft.Future
	if targetID == "" {
		f = r.LeadershipTransfer()
	} else {
		addr, err := n.voterAddress(r, targetID)
		if err != nil {
			return err
		}
		f = r.LeadershipTransferToServer(raft.ServerID(targetID), addr)
	}
	t0 := time.Now()
	if err := f.Error(); err != nil {
		return fmt.Errorf("cluster: transfer leadership to %q: %w", targetID, err)
	}
	// Wait (briefly) for the new leader's first heartbeat, so that Leader()
	// names it as soon as this returns.
	next := n.awaitOtherLeader(r, n.cfg.Timeouts.Heartbeat)
	n.log.Info("leadership transferred", zap.String("target", targetID),
		zap.String("new_leader", next), zap.Duration("took", time.Since(t0)))
	return nil
}

func (n *Node) voterAddress(r *raft.Raft, id string) (raft.ServerAddress, error) {
	f := r.GetConfiguration()
	if err := f.Error(); err != nil {
		return "", fmt.Errorf("cluster: read raft configuration: %w", err)
	}
	for _, s := range f.Configuration().Servers {
		if string(s.ID) == id {
			if s.Suffrage != raft.Voter {
				return "", fmt.Errorf("cluster: transfer leadership: %q is a %s, not a voter", id, s.Suffrage)
			}
			return s.Address, nil
		}
	}
	return "", fmt.Errorf("cluster: transfer leadership: %q is not in the raft configuration", id)
}

// Snapshot makes raft take a snapshot now and truncate the log behind it
// (keeping TrailingLogs entries). Raft also does this on its own.
func (n *Node) Snapshot() error {
	r, err := n.running()
	if err != nil {
		return err
	}
	if err := r.Snapshot().Error(); err != nil {
		return fmt.Errorf("cluster: snapshot: %w", err)
	}
	return nil
}

// Shutdown stops the node; it is idempotent and later calls return the
// first call's result. With transfer set, a leader first hands leadership
// over (bounded wait; a failure is logged and shutdown continues), so the
// cluster stays writable without waiting for an election timeout. Then the
// leader services are cancelled and waited for, raft is shut down and the
// transport and stores are closed. `lancemaster serve` wires SIGTERM/SIGINT
// to Shutdown(true) through master.Close(true).
func (n *Node) Shutdown(transfer bool) error {
	n.shutdownOnce.Do(func() { n.shutdownErr = n.shutdown(transfer) })
	return n.shutdownErr
}

func (n *Node) shutdown(transfer bool) error {
	n.mu.Lock() // waits for a Start in progress
	defer n.mu.Unlock()
	r := n.r.Load()
	if r != nil && transfer && r.State() == raft.Leader {
		n.transferBeforeExit(r)
	}
	n.stopped.Store(true)
	close(n.stopCh) // the monitor cancels the leader services and waits
	if r == nil {
		return nil
	}
	n.bg.Wait()
	var errs []error
	if err := r.Shutdown().Error(); err != nil {
		errs = append(errs, fmt.Errorf("cluster: raft shutdown: %w", err))
	}
	close(n.pumpStop)
	n.pumpDone.Wait()
	r.DeregisterObserver(n.observer)
	if err := n.st.close(); err != nil {
		errs = append(errs, fmt.Errorf("cluster: %w", err))
	}
	n.log.Info("raft stopped")
	return errors.Join(errs...)
}

// transferBeforeExit hands leadership over, bounded to a few election
// timeouts (raft's own bound is about two).
func (n *Node) transferBeforeExit(r *raft.Raft) {
	bound := 3 * n.cfg.Timeouts.Election
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	t0 := time.Now()
	if err := waitFuture(ctx, r.LeadershipTransfer()); err != nil {
		n.log.Warn("leadership transfer before shutdown failed; the others will elect after the election timeout",
			zap.Error(err), zap.Duration("waited", time.Since(t0)))
		return
	}
	n.log.Info("leadership transferred before shutdown",
		zap.String("new_leader", n.awaitOtherLeader(r, n.cfg.Timeouts.Heartbeat)),
		zap.Duration("took", time.Since(t0)))
}

// awaitOtherLeader returns the id of the leader that followed this node, for
// the log; the new leader's first heartbeat normally names it within ms.
// It gives up after d and returns "".
func (n *Node) awaitOtherLeader(r *raft.Raft, d time.Duration) string {
	deadline := time.Now().Add(d)
	for {
		changed := n.leaderChange.Wait()
		if _, id := r.LeaderWithID(); id != "" && string(id) != n.cfg.NodeID {
			return string(id)
		}
		left := time.Until(deadline)
		if left <= 0 {
			return ""
		}
		t := time.NewTimer(min(left, leaderPoll))
		select {
		case <-changed:
		case <-t.C:
		}
		t.Stop()
	}
}
