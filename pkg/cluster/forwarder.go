package cluster

import "context"

// Forwarder carries a write from a follower to the leader. The real one is
// pkg/master's forwarder over an rpc.MasterClient (the leader's forwardApply);
// this package's tests use an in-process one calling the leader Node's
// ApplyLocal.
//
// Concurrency: Propose calls ForwardApply from the proposing goroutine, so
// ForwardApply must be safe for concurrent use by many goroutines. It must
// honour ctx (return promptly once it is done).
//
// Contract:
//   - leaderRPCAddr is the leader's Peer.RPCAddress; the remote side calls
//     (*Node).ApplyLocal and answers raftfsm.EncodeResponse of its result.
//   - On success ForwardApply returns those bytes unchanged.
//   - When the remote answers that it is not the leader, return an error
//     wrapping raftfsm.ErrNotLeader: the command was not applied, and Propose
//     then looks the leader up again and retries.
//   - When the command provably never reached the remote (the connection was
//     refused), wrap ErrNotApplied. Any other failure, including a timeout
//     after the request was sent, is of unknown fate: wrap ErrFateUnknown.
type Forwarder interface {
	ForwardApply(ctx context.Context, leaderRPCAddr string, cmd []byte) ([]byte, error)
}
