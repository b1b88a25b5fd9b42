package raftfsm

import (
	"maps"
	"net"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
)

// The address book: the RPC address of each master that add-voter was given
// one for. Raft's configuration holds only ids and raft addresses; a master
// maps a leader id to the address it forwards writes to from its peers list
// and, through this, from the journal, so a member added after its start is
// reachable without a restart.

func init() {
	register(CommandSpec{Type: CmdSetMemberAddress, Name: "set_member_address", Forward: ForwardNever, Wake: WakeDispatcher}, journal.NewTMemberAddressCommand, applySetMemberAddress)
}

// maxMemberAddressBytes bounds an address (a host:port).
const maxMemberAddressBytes = 256

func applySetMemberAddress(t *tx, c *journal.TMemberAddressCommand) (*journal.TApplyResponse, error) {
	if !job.ValidNodeID(c.NodeID) {
		return respFail(journal.TApplyCode_INVALID, "member id is not 1 to 64 letters, digits, '.', '_' or '-'"), nil
	}
	if c.RPCAddress != "" {
		if len(c.RPCAddress) > maxMemberAddressBytes {
			return respFail(journal.TApplyCode_INVALID, "member RPC address is longer than %d bytes", maxMemberAddressBytes), nil
		}
		if host, port, err := net.SplitHostPort(c.RPCAddress); err != nil || host == "" || port == "" {
			return respFail(journal.TApplyCode_INVALID, "member RPC address is not host:port"), nil
		}
	}
	if old, ok := t.m.members[c.NodeID]; ok == (c.RPCAddress != "") && old == c.RPCAddress {
		return respOK(), nil // idempotent: nothing to change
	}
	// Published views share the old map: copy it.
	m := maps.Clone(t.m.members)
	if m == nil {
		m = map[string]string{}
	}
	if c.RPCAddress == "" {
		delete(m, c.NodeID)
	} else {
		m[c.NodeID] = c.RPCAddress
	}
	t.m.members = m
	return respOK(), nil
}

// MemberAddress returns the journaled RPC address of master id.
func (s *State) MemberAddress(id string) (string, bool) {
	a, ok := s.m.members[id]
	return a, ok
}

// MemberAddresses returns a copy of the address book.
func (s *State) MemberAddresses() map[string]string { return maps.Clone(s.m.members) }
