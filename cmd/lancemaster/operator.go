package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
)

func newOperatorCmd(g *globals) *cobra.Command {
	return groupCmd("operator", "Cluster operations",
		groupCmd("raft", "Inspect and steer the Raft cluster of masters",
			newRaftListPeersCmd(g),
			newRaftHealthCmd(g),
			newRaftTransferLeaderCmd(g),
			newRaftAddVoterCmd(g),
			newRaftRemovePeerCmd(g),
			newRaftPromoteCmd(g),
		),
		newSnapshotCmd(g),
	)
}

func newRaftListPeersCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "list-peers",
		Short: "List the Raft peers and the current leader",
		Long: "List the Raft configuration. HEALTH and LAST CONTACT are the leader's replication view; VERSION\n" +
			"is what each member says it runs (asked as operator raft health does, a 2 s timeout each): \"?\"\n" +
			"when a member could not be asked.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var resp *adminapi.TRaftPeersResponse
			var versions map[string]string
			if err := g.call(cmd, func(ctx context.Context, c *adminapi.LanceMasterServiceClient) (err error) {
				if resp, err = c.ListPeers(ctx); err != nil {
					return err
				}
				if !g.jsonOutput() {
					versions = memberVersions(ctx, c)
				}
				return nil
			}); err != nil {
				return err
			}
			return printPeers(cmd, g, resp, versions)
		},
	}
}

// memberVersions asks the answering master for every member's own status
// (raftHealth) and keeps their versions; a member that did not answer, or a
// master that cannot ask (an older one), leaves the map without it.
func memberVersions(ctx context.Context, c *adminapi.LanceMasterServiceClient) map[string]string {
	out := map[string]string{}
	h, err := c.RaftHealth(ctx)
	if err != nil {
		return out
	}
	for _, m := range h.GetMembers() {
		if st := m.GetStatus(); m.Reachable && st != nil && st.GetVersion() != "" {
			out[m.ID] = st.GetVersion()
		}
	}
	return out
}

// printPeers prints a raft configuration (list-peers, add-voter,
// remove-peer), with a VERSION column when versions is not nil.
func printPeers(cmd *cobra.Command, g *globals, resp *adminapi.TRaftPeersResponse, versions map[string]string) error {
	if resp.Peers == nil {
		resp.Peers = []*adminapi.TRaftPeer{}
	}
	out := cmd.OutOrStdout()
	if g.jsonOutput() {
		return printJSON(out, resp)
	}
	rows := make([][]string, 0, len(resp.Peers))
	for _, p := range resp.Peers {
		leader := ""
		if p.GetIsLeader() || (resp.LeaderID != nil && p.ID == *resp.LeaderID) {
			leader = "*"
		}
		health := p.GetHealth()
		if health == "" {
			health = "-"
		}
		contact := "-"
		if p.IsSetLastContactMs() {
			contact = when(out, p.LastContactMs)
		}
		row := []string{p.ID, p.RaftAddress, str(p.RPCAddress), str(p.Suffrage), leader, health, contact}
		if versions != nil {
			v, ok := versions[p.ID]
			if !ok {
				v = "?"
			}
			row = append(row, v)
		}
		rows = append(rows, row)
	}
	header := []string{"ID", "RAFT ADDRESS", "RPC ADDRESS", "SUFFRAGE", "LEADER", "HEALTH", "LAST CONTACT"}
	if versions != nil {
		header = append(header, "VERSION")
	}
	if err := printTable(out, header, rows); err != nil {
		return err
	}
	for _, p := range resp.Peers {
		if p.GetHealth() == "unreachable" && p.GetLastError() != "" {
			fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s is unreachable from the leader: %s\n", sanitize(p.ID), sanitize(p.GetLastError()))
		}
	}
	var facts []string
	if by := resp.GetAnsweredBy(); by != "" {
		role := "a follower: only the leader knows the other members' health"
		if resp.GetLeaderID() == by {
			role = "the leader"
		}
		facts = append(facts, fmt.Sprintf("as seen by %s (%s)", sanitize(by), role))
	}
	for _, f := range []struct {
		name  string
		value *int64
	}{{"term", resp.Term}, {"commit index", resp.CommitIndex}, {"applied index", resp.AppliedIndex}} {
		if f.value != nil {
			facts = append(facts, fmt.Sprintf("%s %d", f.name, *f.value))
		}
	}
	if len(facts) > 0 {
		_, err := fmt.Fprintf(out, "\n%s\n", strings.Join(facts, ", "))
		return err
	}
	return nil
}

func newRaftTransferLeaderCmd(g *globals) *cobra.Command {
	var to string
	c := &cobra.Command{
		Use:         "transfer-leader [--to ID]",
		Annotations: writeCommand(),
		Short:       "Hand leadership to another voter (any up-to-date one unless --to)",
		Example: "  lancemaster operator raft transfer-leader\n" +
			"  lancemaster operator raft transfer-leader --to m2",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			target := strings.TrimSpace(to)
			if cmd.Flags().Changed("to") && target == "" {
				return usagef("--to must name a peer ID")
			}
			var leader string
			if err := g.call(cmd, func(ctx context.Context, c *adminapi.LanceMasterServiceClient) (err error) {
				leader, err = c.TransferLeader(ctx, target, g.claim())
				return err
			}); err != nil {
				return err
			}
			if g.jsonOutput() {
				return printJSON(cmd.OutOrStdout(), map[string]string{"leader_id": leader})
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "leadership transferred to %s\n", sanitize(str(&leader)))
			return err
		},
	}
	c.Flags().StringVar(&to, "to", "", "the peer ID to transfer to (default: let Raft pick)")
	return c
}

func newRaftAddVoterCmd(g *globals) *cobra.Command {
	var rpcAddr string
	var nonVoter bool
	c := &cobra.Command{
		Use:         "add-voter ID RAFT_ADDRESS [--rpc-address HOST:PORT] [--non-voter]",
		Annotations: writeCommand(),
		Short:       "Add a master to the Raft configuration as a voter (on the leader)",
		Long: "add-voter adds the master ID, reachable by the other masters at RAFT_ADDRESS, as a voter\n" +
			"and returns once the new configuration is committed; the new master then catches up from\n" +
			"the leader. Raft stores only the raft address: --rpc-address records the new master's RPC\n" +
			"address in the journal's address book, so every master can forward to it at once. Add the\n" +
			"new master to every node config's peers list too, for their next start (docs/operations.md).\n" +
			"Start the new master with --join (join: true) and an empty data dir.\n\n" +
			"With --non-voter the master is added as a non-voter: it is replicated to but not counted in\n" +
			"the quorum, so its catch-up does not slow or endanger writes. Promote it once caught up\n" +
			"(operator raft health, then operator raft promote ID).",
		Example: "  lancemaster operator raft add-voter m4 10.0.0.4:7000 --rpc-address 10.0.0.4:9090\n" +
			"  lancemaster operator raft add-voter m4 10.0.0.4:7000 --rpc-address 10.0.0.4:9090 --non-voter",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, raftAddr := strings.TrimSpace(args[0]), strings.TrimSpace(args[1])
			if id == "" || raftAddr == "" {
				return usagef("ID and RAFT_ADDRESS must not be empty")
			}
			if _, err := parseHostPort(raftAddr); err != nil {
				return usagef("RAFT_ADDRESS: %v", err)
			}
			if a := strings.TrimSpace(rpcAddr); cmd.Flags().Changed("rpc-address") {
				if _, err := parseHostPort(a); err != nil {
					return usagef("--rpc-address: %v", err)
				}
			}
			req := &adminapi.TAddVoterRequest{ID: id, RaftAddress: raftAddr, Actor: g.actor()}
			if a := strings.TrimSpace(rpcAddr); a != "" {
				req.RPCAddress = &a
			}
			if nonVoter {
				req.NonVoter = &nonVoter
			}
			var resp *adminapi.TRaftPeersResponse
			if err := g.call(cmd, func(ctx context.Context, c *adminapi.LanceMasterServiceClient) (err error) {
				resp, err = c.AddVoter(ctx, req)
				return err
			}); err != nil {
				return err
			}
			return printPeers(cmd, g, resp, nil)
		},
	}
	c.Flags().StringVar(&rpcAddr, "rpc-address", "", "the new master's RPC address HOST:PORT (journaled: every master learns it)")
	c.Flags().BoolVar(&nonVoter, "non-voter", false, "add it as a non-voter, outside the quorum, to promote once caught up")
	return c
}

func newRaftRemovePeerCmd(g *globals) *cobra.Command {
	var force bool
	c := &cobra.Command{
		Use:         "remove-peer ID [--force]",
		Annotations: writeCommand(),
		Short:       "Remove a master from the Raft configuration (on the leader)",
		Long: "remove-peer removes the member ID and returns once the smaller configuration is committed.\n" +
			"Stop the removed master's process (before or after) and take it out of every peers list.\n" +
			"The last voter cannot be removed. The leader removes itself only with --force (it steps\n" +
			"down and stops its Raft; the others elect a leader after an election timeout): prefer\n" +
			"transfer-leader first, then remove-peer on the new leader.",
		Example: "  lancemaster operator raft remove-peer m4",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := strings.TrimSpace(args[0])
			if id == "" {
				return usagef("ID must not be empty")
			}
			req := &adminapi.TRemovePeerRequest{ID: id, Actor: g.actor()}
			if force {
				req.Force = &force
			}
			var resp *adminapi.TRaftPeersResponse
			if err := g.call(cmd, func(ctx context.Context, c *adminapi.LanceMasterServiceClient) (err error) {
				resp, err = c.RemovePeer(ctx, req)
				return err
			}); err != nil {
				return err
			}
			return printPeers(cmd, g, resp, nil)
		},
	}
	c.Flags().BoolVar(&force, "force", false, "allow removing the leader itself")
	return c
}
