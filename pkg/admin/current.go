package admin

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// Writes are decided on current state (DESIGN.md §13.8). A master validates
// a client write (admissions, cancel, force-release, catalogs, backends,
// options) only on a replica that has applied at least the commit index the
// leader had when the request arrived: a read-index round trip. On the
// leader the read index is its own commit index, confirmed by a quorum
// (Deps.ReadIndex); a follower asks the leader for it through listPeers,
// whose commit_index a leader fills with exactly that (and leaves unset when
// it cannot confirm its leadership). The replica then waits, bounded by the
// request's context and currentWaitMax, until its FSM reflects every entry
// through that index (Deps.CaughtUp). A replica that cannot get there
// refuses nothing for good: it answers NOT_LEADER with the leader's address
// (the CLI follows it) or UNAVAILABLE (retry).

// currentWaitMax bounds how long a write waits for this replica to catch up
// with the leader's read index (a just-restarted master replays its log in a
// few seconds).
const currentWaitMax = 5 * time.Second

// current returns nil once this replica holds everything committed when the
// call began; else the typed, non-definitive error to answer. Without
// Deps.ReadIndex (tests, a wiring without it) it returns nil at once.
func (s *Server) current(ctx context.Context) error {
	if s.d.ReadIndex == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, currentWaitMax)
	defer cancel()
	if s.d.Proposer.IsLeader() {
		idx, err := s.d.ReadIndex(ctx)
		if err == nil {
			return s.awaitCaughtUp(ctx, idx)
		}
		if !errors.Is(err, raftfsm.ErrNotLeader) {
			s.d.Logger.Warn("admin: read index on the leader failed", zap.Error(err))
			return adminError(adminapi.TErrorCode_UNAVAILABLE,
				"this master could not confirm its leadership to decide the request; retry shortly")
		}
		// It stopped leading meanwhile: ask the leader, as a follower does.
	}
	idx, err := s.leaderReadIndex(ctx)
	if err != nil {
		return err
	}
	return s.awaitCaughtUp(ctx, idx)
}

// leaderReadIndex asks the leader for its read index (listPeers).
func (s *Server) leaderReadIndex(ctx context.Context) (uint64, error) {
	id, addr := s.d.Cluster.Leader()
	if id == "" || addr == "" || s.d.LeaderCall == nil || (s.d.NodeID != "" && id == s.d.NodeID) {
		// No leader to ask, or raft still names this master while it
		// steps down.
		return 0, s.behind()
	}
	var resp *adminapi.TRaftPeersResponse
	err := s.d.LeaderCall(ctx, addr, func(ctx context.Context, c *adminapi.LanceMasterServiceClient) (err error) {
		resp, err = c.ListPeers(ctx)
		return err
	})
	switch {
	case err != nil:
		s.d.Logger.Info("admin: the leader's read index could not be read", zap.String("leader", addr), zap.Error(err))
		return 0, s.behind()
	case resp.GetLeaderID() != id || !resp.IsSetCommitIndex() || resp.GetCommitIndex() < 0:
		// The master asked does not (or cannot confirm it does) lead.
		return 0, s.behind()
	}
	return uint64(resp.GetCommitIndex()), nil
}

// awaitCaughtUp waits until this replica reflects every entry through idx.
func (s *Server) awaitCaughtUp(ctx context.Context, idx uint64) error {
	if !s.await(ctx, func() bool { return s.d.CaughtUp(idx) }) {
		return s.behind()
	}
	return nil
}

// behind is the answer of a replica that cannot show it is current: never a
// definitive refusal. With a known leader it is NOT_LEADER naming it, which
// the CLI follows.
func (s *Server) behind() error {
	if _, addr := s.d.Cluster.Leader(); addr != "" {
		e := s.notLeader()
		e.Message = "this master has not caught up with the leader yet and cannot decide the request; the leader is at " + addr
		return e
	}
	return adminError(adminapi.TErrorCode_UNAVAILABLE,
		"this master has not caught up with the leader (none is known) and cannot decide the request; retry shortly")
}
