package raftfsm

import (
	"context"
	"errors"

	"github.com/lancemaster/lancemaster/gen-go/journal"
)

// CommandType is the first byte of a log entry.
type CommandType uint8

// IgnorableFlag marks a command type that a master which does not know it
// may skip. Any other unknown type stops the node: applying past a command
// it cannot understand would silently diverge from the other replicas.
const IgnorableFlag CommandType = 0x80

// Command types. Never renumber or reuse one.
const (
	CmdAdmit            CommandType = 1  // M0, TAdmitCommand
	CmdMarkRunningBatch CommandType = 2  // M1 batch, TMarkRunningBatch
	CmdCompleteBatch    CommandType = 3  // M2 / M2', TCompleteBatch
	CmdRecordProofBatch CommandType = 4  // P, TRecordProofBatch
	CmdRefreshBatch     CommandType = 5  // R1-R4, TRefreshBatch
	CmdCancel           CommandType = 6  // PENDING -> CANCELLED, TCancelCommand
	CmdForceRelease     CommandType = 7  // TForceReleaseCommand
	CmdGC               CommandType = 8  // retention GC removal, TGCCommand
	CmdCreateCatalog    CommandType = 9  // TCatalogCommand
	CmdUpdateCatalog    CommandType = 10 // TCatalogCommand
	CmdRemoveCatalog    CommandType = 11 // TRemoveCatalogCommand
	CmdAddBackend       CommandType = 12 // TBackendCommand
	CmdRemoveBackend    CommandType = 13 // TRemoveBackendCommand
	CmdSetOption        CommandType = 14 // TSetOptionCommand
	CmdAdmitBatch       CommandType = 15 // M0 batched (group commit), TAdmitBatch
	CmdReportBatch      CommandType = 16 // reports: P then M2 per item (group commit), TReportBatch
	// The address book (a member's RPC address). Ignorable: a master that
	// does not know it loses only the address, which its peers list may
	// still give.
	CmdSetMemberAddress CommandType = 17 | IgnorableFlag // TMemberAddressCommand
	// The cluster id (§13.1). Ignorable: a master that does not know it
	// sends no cluster id, which backends judge against the cluster they
	// are bound to.
	CmdSetClusterID CommandType = 18 | IgnorableFlag // TClusterIDCommand
	// Drain or undrain a backend. Ignorable: a master that does not know it
	// dispatches to the backend as before; nothing else it applies reads
	// the flag, so its replica does not otherwise diverge.
	CmdDrainBackend CommandType = 19 | IgnorableFlag // TDrainBackendCommand
	// An audit event for a change that is not an FSM command (raft
	// membership, snapshot restore; audit.go). Ignorable: a master that does
	// not know it only lacks the event.
	CmdAudit CommandType = 20 | IgnorableFlag // TAuditCommand
)

// Proposer is what admin, dispatch and report need from the cluster: a door
// to the journal. It is safe for concurrent use by any goroutine.
type Proposer interface {
	// Propose replicates an encoded command (see Encode) and returns the
	// FSM's Apply response. On a follower it forwards the command to the
	// leader. It returns an error only when the command's fate is not known
	// to be "applied" (ErrNotLeader, ErrNoLeader, a timeout, a transport
	// error); a guard failure is a response, not an error.
	Propose(ctx context.Context, cmd []byte) (*journal.TApplyResponse, error)
	// IsLeader reports whether this node is the leader now.
	IsLeader() bool
	// LeaderTerm is the Raft term of this node's current leadership, or 0.
	LeaderTerm() uint64
}

// Reader gives a consistent, immutable view of the journal.
type Reader interface {
	State() *State
}

// Sentinel errors of the Proposer contract.
var (
	// ErrNotLeader: this node is not the leader and cannot forward.
	ErrNotLeader = errors.New("not the leader")
	// ErrNoLeader: no leader is known right now; retry later.
	ErrNoLeader = errors.New("no leader known")
)
