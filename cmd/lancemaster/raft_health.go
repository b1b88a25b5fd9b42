package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
)

// operator raft health and promote (the rest of operator raft is in
// operator.go).

func newRaftHealthCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "health",
		Short: "Every member's raft state, lag and version, and the cluster's failure tolerance",
		Long: "health asks every member of the Raft configuration for its own status (a 2 s timeout each)\n" +
			"and combines the answers with the leader's view. Any master can answer; the footer says which.\n" +
			"A member that does not answer is listed unreachable, with why on stderr. LAG is the leader's\n" +
			"commit index minus the member's applied index; a member is healthy when it answers, has the\n" +
			"leader's term, hears the leader, lags at most 250 entries and the leader reaches it. The\n" +
			"failure tolerance is healthy voters minus the quorum (voters/2+1): how many more voters may\n" +
			"fail before writes stop. Non-voters are listed, and not counted.",
		Example: "  lancemaster operator raft health\n  lancemaster -o json operator raft health",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var resp *adminapi.TRaftHealthResponse
			if err := g.call(cmd, func(ctx context.Context, c *adminapi.LanceMasterServiceClient) (err error) {
				resp, err = c.RaftHealth(ctx)
				return err
			}); err != nil {
				return err
			}
			return printHealth(cmd, g, resp)
		},
	}
}

func printHealth(cmd *cobra.Command, g *globals, resp *adminapi.TRaftHealthResponse) error {
	if resp.Members == nil {
		resp.Members = []*adminapi.TRaftMemberHealth{}
	}
	out := cmd.OutOrStdout()
	if g.jsonOutput() {
		return printJSON(out, resp)
	}
	rows := make([][]string, 0, len(resp.Members))
	for _, m := range resp.Members {
		leader := ""
		if m.GetIsLeader() {
			leader = "*"
		}
		st := m.Status
		if st == nil {
			st = &adminapi.TRaftMemberStatus{}
		}
		contact := "-"
		if st.IsSetLastContactAgeMs() {
			contact = (time.Duration(st.GetLastContactAgeMs()) * time.Millisecond).String()
		}
		rows = append(rows, []string{m.ID, str(m.Suffrage), leader, yesNo(&m.Reachable), yesNo(m.Healthy),
			str(st.State), i64(st.Term), contact, i64(st.CommitIndex), i64(st.AppliedIndex), i64(m.Lag), str(st.Version)})
	}
	if err := printTable(out, []string{"ID", "SUFFRAGE", "LEADER", "REACHABLE", "HEALTHY", "STATE", "TERM",
		"LAST CONTACT", "COMMIT", "APPLIED", "LAG", "VERSION"}, rows); err != nil {
		return err
	}
	for _, m := range resp.Members {
		switch {
		case !m.Reachable:
			fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s is unreachable: %s\n", sanitize(m.ID), sanitize(m.GetError()))
		case m.GetLeaderContact() == "unreachable":
			fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s answers, but the leader's replication to it fails\n", sanitize(m.ID))
		}
	}
	facts := []string{fmt.Sprintf("failure tolerance %d (%d voters, quorum %d, %d healthy)",
		resp.GetFailureTolerance(), resp.GetVoters(), resp.GetQuorum(), resp.GetHealthyVoters())}
	if !resp.GetHealthy() {
		facts[0] = fmt.Sprintf("QUORUM LOST: %d of %d voters healthy, quorum %d", resp.GetHealthyVoters(), resp.GetVoters(), resp.GetQuorum())
	}
	if id := resp.GetLeaderID(); id != "" {
		facts = append(facts, "leader "+sanitize(id))
	} else {
		facts = append(facts, "no leader")
	}
	if by := resp.GetAnsweredBy(); by != "" {
		facts = append(facts, "as seen by "+sanitize(by))
	}
	_, err := fmt.Fprintf(out, "\n%s\n", strings.Join(facts, ", "))
	return err
}

func newRaftPromoteCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:         "promote ID",
		Annotations: writeCommand(),
		Short:       "Make a caught-up non-voter a voter (on the leader)",
		Long: "promote makes the non-voter ID (added with add-voter --non-voter) a voter. The leader asks the\n" +
			"member for its applied index and refuses with UNAVAILABLE, changing nothing, while the member\n" +
			"does not answer, the leader does not reach it, or it lags the leader's commit index by more\n" +
			"than 250 entries: retry once operator raft health shows it healthy. A voter is left as is.",
		Example: "  lancemaster operator raft promote m4",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := strings.TrimSpace(args[0])
			if id == "" {
				return usagef("ID must not be empty")
			}
			var resp *adminapi.TRaftPeersResponse
			if err := g.call(cmd, func(ctx context.Context, c *adminapi.LanceMasterServiceClient) (err error) {
				resp, err = c.Promote(ctx, &adminapi.TPromoteRequest{ID: id, Actor: g.actor()})
				return err
			}); err != nil {
				return err
			}
			return printPeers(cmd, g, resp, nil)
		},
	}
}
