package admin

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/config"
	"github.com/lancemaster/lancemaster/pkg/groupcommit"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
	"github.com/lancemaster/lancemaster/pkg/rpc"
)

// Cluster is what the admin API needs from the raft node beyond proposing.
// Implemented by pkg/cluster's Node (through pkg/master's clusterAdapter);
// safe for concurrent use. A Cluster may also implement SnapshotCluster (snapshot.go)
// and MembershipCluster (peers.go); the operator methods they back answer
// UNAVAILABLE otherwise.
type Cluster interface {
	// Leader returns the current leader's id and RPC address ("" when unknown).
	Leader() (id, rpcAddr string)
	// ConsistentRead returns once this node, as the leader, has applied every
	// committed entry; raftfsm.ErrNotLeader on a follower.
	ConsistentRead(ctx context.Context) error
	// ApplyLocal proposes on this node, which must be the leader.
	ApplyLocal(ctx context.Context, cmd []byte) (*journal.TApplyResponse, error)
	// Peers lists the raft configuration.
	Peers() ([]PeerStatus, error)
	// TransferLeadership hands leadership to target ("" = any voter) and
	// returns the new leader's id.
	TransferLeadership(ctx context.Context, targetID string) (string, error)
	// RaftStats returns the current term, commit index and applied index.
	RaftStats() (term, commitIndex, appliedIndex uint64)
}

// PeerStatus is one member of the raft configuration as the node sees it:
// pkg/cluster's PeerStatus field for field (admin does not import cluster;
// pkg/master converts one into the other, which only compiles while the two
// stay identical).
type PeerStatus struct {
	config.Peer // the member's id and addresses
	// Suffrage is raft's: "Voter", "Nonvoter" or "Staging".
	Suffrage string
	Leader   bool // the leader as far as the node knows
	Self     bool // the node itself
	// Health, LastContact and LastError are the leader's contact with the
	// member (pkg/cluster's PeerHealthy, PeerUnreachable, PeerUnknown).
	Health      string
	LastContact time.Time
	LastError   string
}

// ReportHandler handles the backends' reports (DESIGN.md §9). pkg/report's
// Handler implements it; without one, reports are answered
// NOT_IMPLEMENTED_ERROR.
type ReportHandler interface {
	HandleResult(ctx context.Context, r *wire.TLanceIndexJobReport) *wire.TStatus
	HandleTermination(ctx context.Context, r *wire.TLanceIndexJobTerminationReport) *wire.TStatus
	HandleProgress(ctx context.Context, r *wire.TLanceIndexJobProgressReport) *wire.TStatus
}

// BackendView is the leader-local view of a backend's liveness (heartbeats:
// dispatch.Pool.View). known is false when nothing has been heard yet.
type BackendView func(backendID int64) (alive bool, epoch int64, known bool)

// BackendHeard is when the leader last heard a backend (zero: not this
// term), the version it said it runs, and whether this node runs the
// heartbeats at all (leading).
type BackendHeard func(backendID int64) (lastHeard time.Time, version string, leading bool)

// Deps are the Server's collaborators. Proposer, Reader, Cluster, Backends
// and Credentials are required.
type Deps struct {
	Proposer    raftfsm.Proposer
	Reader      raftfsm.Reader
	Cluster     Cluster
	Backends    rpc.BackendClient
	Credentials config.CredentialSource
	Reports     ReportHandler // optional
	BackendView BackendView   // optional
	// NewClusterID mints a cluster id (dispatch.NewClusterID); a restore
	// into a cluster that has none yet uses it. Optional.
	NewClusterID func() (string, error)
	// LastContact is when this node last heard from a leader (zero: never,
	// or it leads); optional. Reads answered from this replica say they
	// may be stale when it is old or no leader is known.
	LastContact func() time.Time
	// BackendHeard lets the leader say "not alive, never heard" of a
	// backend it heartbeats without an answer; optional.
	BackendHeard BackendHeard
	// BackendStatus is the rest of the leader's heartbeat view for
	// backends show (accepting, capacity); optional.
	BackendStatus BackendStatus
	// ProbeBackend checks that something answers at a backend's address
	// when it is added (a warning, not a refusal); optional.
	ProbeBackend func(ctx context.Context, address string) error
	// LeaderCall runs fn against the master at addr (the leader); optional.
	// Followers use it for what only the leader knows (backend liveness).
	LeaderCall func(ctx context.Context, addr string, fn func(context.Context, *adminapi.LanceMasterServiceClient) error) error
	Clock      func() time.Time
	Logger     *zap.Logger
	// InspectTimeout bounds one inspect_lance_dataset call (default 30 s).
	InspectTimeout time.Duration
	// ApplyTimeout bounds one proposed admission batch (default 10 s, the
	// cluster's own apply timeout). A caller waits at most its context.
	ApplyTimeout time.Duration
	// NodeID names this master in logs and as the default actor.
	NodeID string
	// ReadIndex and CaughtUp make writes decided on current state
	// (DESIGN.md §13.8, current.go); set both or neither. ReadIndex is this
	// master's read index as the leader (cluster.Node.ReadIndex: its commit
	// index, confirmed by a quorum; an error wrapping raftfsm.ErrNotLeader
	// on a follower). CaughtUp reports whether the local replica reflects
	// every entry through an index (cluster.Node.CaughtUp with the FSM's
	// State().AppliedIndex()). Without them writes are validated on the
	// local replica as it is (tests).
	ReadIndex func(ctx context.Context) (uint64, error)
	// HoldDispatch stops this master's PENDING dispatch until release
	// (dispatch.Dispatcher.Hold): an operator restore holds it from before
	// raft.Restore until the pause is journaled. Optional.
	HoldDispatch func() (release func())
	CaughtUp     func(index uint64) bool
	// LeaderIndex is this master's commit index, unconfirmed, when it leads
	// with its term's barrier applied (cluster.Node.LeaderIndex); ok is
	// false otherwise. With it the leader decides an admission it journals
	// on its own view, without a read index (decide.go). Optional; it
	// needs ReadIndex and CaughtUp.
	LeaderIndex func() (index uint64, ok bool)
	// Published returns a channel closed once the local FSM publishes a
	// newer view (raftfsm.FSM.Published): waits for this replica to apply
	// an entry end as soon as it has. Optional: without it they poll.
	Published func() <-chan struct{}
}

// Server implements adminapi.LanceMasterService.
type Server struct {
	d      Deps
	admits *groupcommit.Group[*journal.TJobRecord] // step 8 of admission, group commit
	xfers  snapshotTransfers                       // operator snapshot transfers (snapshot.go)
	poll   time.Duration                           // await's look-again interval (awaitPoll; tests)
}

var _ adminapi.LanceMasterService = (*Server)(nil)

// New returns a Server. It panics on a missing required dependency: that is
// a wiring bug, found at start-up.
func New(d Deps) *Server {
	if d.Proposer == nil || d.Reader == nil || d.Cluster == nil || d.Backends == nil || d.Credentials == nil {
		panic("admin.New: Proposer, Reader, Cluster, Backends and Credentials are required")
	}
	if (d.ReadIndex == nil) != (d.CaughtUp == nil) {
		panic("admin.New: ReadIndex and CaughtUp go together")
	}
	if d.LeaderIndex != nil && d.ReadIndex == nil {
		panic("admin.New: LeaderIndex needs ReadIndex and CaughtUp")
	}
	if d.Clock == nil {
		d.Clock = time.Now
	}
	if d.Logger == nil {
		d.Logger = zap.NewNop()
	}
	if d.InspectTimeout <= 0 {
		d.InspectTimeout = 30 * time.Second
	}
	if d.ApplyTimeout <= 0 {
		d.ApplyTimeout = groupcommit.DefaultTimeout
	}
	s := &Server{d: d, poll: awaitPoll}
	s.admits = s.newAdmitGroup()
	return s
}

// Processor returns the Thrift processor for this server.
func (s *Server) Processor() thrift.TProcessor { return adminapi.NewLanceMasterServiceProcessor(s) }

func (s *Server) nowMs() int64 { return s.d.Clock().UnixMilli() }

// requireLeader answers NOT_LEADER with the leader's address on a follower.
func (s *Server) requireLeader() error {
	if s.d.Proposer.IsLeader() {
		return nil
	}
	return s.notLeader()
}

func (s *Server) notLeader() *adminapi.TAdminError {
	e := adminError(adminapi.TErrorCode_NOT_LEADER, "this master is not the leader")
	if _, addr := s.d.Cluster.Leader(); addr != "" {
		e.LeaderAddress = &addr
		e.Message += "; the leader is at " + addr
	} else {
		e.Message += " and no leader is known; retry shortly"
	}
	return e
}

// readState returns the state to read from: local, or after a consistent-read
// barrier on the leader when consistent is set.
func (s *Server) readState(ctx context.Context, consistent bool) (*raftfsm.State, error) {
	if consistent {
		if err := s.d.Cluster.ConsistentRead(ctx); err != nil {
			if errors.Is(err, raftfsm.ErrNotLeader) {
				return nil, s.notLeader()
			}
			return nil, s.internal("consistent read", err)
		}
	}
	return s.d.Reader.State(), nil
}

// propose encodes, previews and proposes a command; a non-OK response
// becomes a typed error unless it is one of the codes in accept.
func (s *Server) propose(ctx context.Context, t raftfsm.CommandType, cmd thrift.TStruct, accept ...journal.TApplyCode) (*journal.TApplyResponse, error) {
	data, err := raftfsm.Encode(t, cmd)
	if err != nil {
		return nil, s.internal("encode command", err)
	}
	// Input the FSM would refuse as INVALID is refused here, before it is
	// journaled: bad input changes nothing durable, not even the log.
	// Other refusals depend on state this replica may not have yet; the
	// FSM decides those when the entry applies.
	if pre, err := s.d.Reader.State().Preview(data); err != nil {
		return nil, s.internal("preview command", err)
	} else if pre.Code == journal.TApplyCode_INVALID {
		return nil, applyError(pre)
	}
	resp, err := s.d.Proposer.Propose(ctx, data)
	if err != nil {
		if errors.Is(err, raftfsm.ErrNotLeader) {
			return nil, s.notLeader()
		}
		s.d.Logger.Warn("propose failed", zap.Uint8("command", uint8(t)), zap.Error(err))
		return nil, toAdminError(err)
	}
	// Read-your-writes: a forwarded command is applied here a moment later.
	if err := s.waitApplied(ctx, resp.GetIndex()); err != nil {
		return nil, err
	}
	if resp.Code == journal.TApplyCode_OK {
		return resp, nil
	}
	for _, c := range accept {
		if resp.Code == c {
			return resp, nil
		}
	}
	return nil, applyError(resp)
}

// waitApplied waits until the local replica has applied index, so that a
// write's result can be read back here, bounded by ctx; on a leader or an
// up-to-date follower it returns at once.
func (s *Server) waitApplied(ctx context.Context, index int64) error {
	if index <= 0 {
		return nil
	}
	if !s.await(ctx, func() bool { return s.d.Reader.State().AppliedIndex() >= uint64(index) }) {
		return adminError(adminapi.TErrorCode_TIMEOUT, "the change was committed but this master has not applied it yet; read it again shortly")
	}
	return nil
}

// awaitPoll is how often await looks again when nothing wakes it: raft
// applies its own entries (a new term's no-op, a configuration change)
// without the FSM, and without Deps.Published every wait polls.
const awaitPoll = 2 * time.Millisecond

// await reports whether done holds before ctx ends. It looks again at every
// view the FSM publishes (Deps.Published, taken before each look so that no
// view is missed) and every awaitPoll.
func (s *Server) await(ctx context.Context, done func() bool) bool {
	var t *time.Ticker
	for {
		var published <-chan struct{}
		if s.d.Published != nil {
			published = s.d.Published()
		}
		if done() {
			if t != nil {
				t.Stop()
			}
			return true
		}
		if t == nil {
			t = time.NewTicker(s.poll) // only once there is something to wait for
		}
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-published:
		case <-t.C:
		}
	}
}

// internal logs err (which never carries request secrets) and answers INTERNAL.
func (s *Server) internal(what string, err error) error {
	s.d.Logger.Error("admin: "+what, zap.Error(err))
	return adminError(adminapi.TErrorCode_INTERNAL, "internal error: %s failed; see the master's log", what)
}

// forwardable reports whether an admin write on a follower produces the
// command type, so the leader accepts it from another master (its
// registration says: raftfsm.CommandSpec.Forward). A transfer-leader's
// audit event is one: it is proposed after this master stepped down.
func forwardable(ct raftfsm.CommandType) bool {
	s, ok := raftfsm.LookupCommand(ct)
	return ok && s.Forwardable()
}

// ForwardApply is the leader side of propose-or-forward: a follower's encoded
// command is proposed here and the encoded response returned.
func (s *Server) ForwardApply(ctx context.Context, command []byte) ([]byte, error) {
	// Bytes from the network are checked before they can become an entry
	// that no replica could apply.
	if err := raftfsm.CheckCommand(command); err != nil {
		s.d.Logger.Warn("forwardApply: refused a command this master cannot apply", zap.Error(err))
		return nil, adminError(adminapi.TErrorCode_INVALID, "the forwarded command is not one this master can apply")
	}
	// Only what an admin write on a follower produces is ever forwarded: the
	// leader services propose only on the leader (their context is fenced to
	// its term) and followers forward reports, not commands. Refusing the
	// dispatch-lifecycle commands here means nobody who can reach this port
	// can forge a RUNNING, a result, a proof, a refresh or a GC entry.
	if !forwardable(raftfsm.CommandType(command[0])) {
		s.d.Logger.Warn("forwardApply: refused a command type that is never forwarded", zap.Uint8("command_type", command[0]))
		return nil, adminError(adminapi.TErrorCode_INVALID, "this command type is not accepted from another master")
	}
	resp, err := s.d.Cluster.ApplyLocal(ctx, command)
	if err != nil {
		if errors.Is(err, raftfsm.ErrNotLeader) {
			return nil, s.notLeader()
		}
		return nil, toAdminError(err)
	}
	out, err := raftfsm.EncodeResponse(resp)
	if err != nil {
		return nil, s.internal("encode response", err)
	}
	return out, nil
}

// ReportLanceIndexJobResult_ delegates to the ReportHandler.
func (s *Server) ReportLanceIndexJobResult_(ctx context.Context, r *wire.TLanceIndexJobReport) (*wire.TStatus, error) {
	if s.d.Reports == nil || r == nil {
		return notImplemented(), nil
	}
	return s.d.Reports.HandleResult(ctx, r), nil
}

// ReportLanceIndexJobTermination delegates to the ReportHandler.
func (s *Server) ReportLanceIndexJobTermination(ctx context.Context, r *wire.TLanceIndexJobTerminationReport) (*wire.TStatus, error) {
	if s.d.Reports == nil || r == nil {
		return notImplemented(), nil
	}
	return s.d.Reports.HandleTermination(ctx, r), nil
}

// ReportLanceIndexJobProgress delegates to the ReportHandler.
func (s *Server) ReportLanceIndexJobProgress(ctx context.Context, r *wire.TLanceIndexJobProgressReport) (*wire.TStatus, error) {
	if s.d.Reports == nil || r == nil {
		return notImplemented(), nil
	}
	return s.d.Reports.HandleProgress(ctx, r), nil
}

func notImplemented() *wire.TStatus {
	return &wire.TStatus{StatusCode: wire.TStatusCode_NOT_IMPLEMENTED_ERROR,
		ErrorMsgs: []string{"report handling is not enabled on this master"}}
}
