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
			newRaftTransferLeaderCmd(g),
		),
	)
}

func newRaftListPeersCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "list-peers",
		Short: "List the Raft peers and the current leader",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var resp *adminapi.TRaftPeersResponse
			if err := g.call(cmd, func(ctx context.Context, c *adminapi.LanceMasterServiceClient) (err error) {
				resp, err = c.ListPeers(ctx)
				return err
			}); err != nil {
				return err
			}
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
				rows = append(rows, []string{p.ID, p.RaftAddress, str(p.RPCAddress), str(p.Suffrage), leader})
			}
			if err := printTable(out, []string{"ID", "RAFT ADDRESS", "RPC ADDRESS", "SUFFRAGE", "LEADER"}, rows); err != nil {
				return err
			}
			var facts []string
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
		},
	}
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
				leader, err = c.TransferLeader(ctx, target)
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
