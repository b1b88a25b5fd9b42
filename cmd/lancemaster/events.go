package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// `lancemaster events` (alias `audit list`): the audit trail, newest first.

// eventsPage is what -o json prints: the events and the cursor of the next
// page ("" when none), for --cursor.
type eventsPage struct {
	Events     []*adminapi.TAuditEvent `json:"events"`
	NextCursor string                  `json:"next_cursor"`
}

func newEventsCmd(g *globals) *cobra.Command {
	c := eventsCmd(g, "events")
	c.Short = "List the audit trail: who changed what, and when (newest first)"
	return c
}

// newAuditCmd is `audit list`, the same command under another name.
func newAuditCmd(g *globals) *cobra.Command {
	c := eventsCmd(g, "list")
	c.Short = "List the audit trail (the same as `lancemaster events`)"
	return groupCmd("audit", "The audit trail of admin changes", c)
}

func eventsCmd(g *globals, use string) *cobra.Command {
	var (
		kind, subject, actor, since, cursor string
		limit                               int32
		consistent                          bool
	)
	c := &cobra.Command{
		Use: use,
		Example: "  lancemaster events --since 24h\n" +
			"  lancemaster events --kind backend. --actor alice\n" +
			"  lancemaster events --subject lake --verbose\n" +
			"  lancemaster events --limit 50 -o json   # then --cursor NEXT_CURSOR for the next page",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			now := g.now()
			req := &adminapi.TListEventsRequest{Kind: optString(kind), Subject: optString(subject), Actor: optString(actor)}
			if cmd.Flags().Changed("limit") {
				if limit < 1 || limit > maxListLimit {
					return usagef("--limit must be between 1 and %d, got %d", maxListLimit, limit)
				}
				req.Limit = &limit
			}
			if since != "" {
				ms, err := parseSince(since, now)
				if err != nil {
					return err
				}
				req.SinceMs = &ms
			}
			if cursor != "" {
				n, err := strconv.ParseInt(cursor, 10, 64)
				if err != nil || n < 1 {
					return usagef("--cursor %q is not a cursor this command printed", cursor)
				}
				req.BeforeSeq = &n
			}
			if consistent {
				req.Consistent = &consistent
			}
			var resp *adminapi.TListEventsResponse
			if err := g.call(cmd, func(ctx context.Context, c *adminapi.LanceMasterServiceClient) (err error) {
				resp, err = c.ListEvents(ctx, req)
				return err
			}); err != nil {
				return err
			}
			if w := resp.GetStaleWarning(); w != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s\n", sanitize(w))
			}
			page := eventsPage{Events: resp.GetEvents(), NextCursor: ""}
			if page.Events == nil {
				page.Events = []*adminapi.TAuditEvent{}
			}
			if resp.IsSetNextBeforeSeq() {
				page.NextCursor = strconv.FormatInt(resp.GetNextBeforeSeq(), 10)
			}
			if err := g.printEvents(cmd.OutOrStdout(), page); err != nil {
				return err
			}
			if page.NextCursor != "" && !g.jsonOutput() {
				fmt.Fprintf(cmd.ErrOrStderr(), "more events match: --cursor %s for the next page\n", page.NextCursor)
			}
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&kind, "kind", "", "only events of this kind (e.g. option.set), or of every kind starting with it when it ends in '.' (backend.)")
	f.StringVar(&subject, "subject", "", "only events whose subject contains this (a catalog, backend, option key, job, member id)")
	f.StringVar(&actor, "actor", "", "only events by this actor (the verified identity or the claimed name)")
	f.StringVar(&since, "since", "", "only events at or after this time: RFC 3339 (2026-12-01T09:00:00Z) or a duration before now (90m, 24h)")
	f.Int32Var(&limit, "limit", 0, fmt.Sprintf("events per page, 1..%d (server default 100)", maxListLimit))
	f.StringVar(&cursor, "cursor", "", "the next page: the cursor printed by the previous page")
	f.BoolVar(&consistent, "consistent", false, "read through the leader instead of the nearest master")
	_ = c.RegisterFlagCompletionFunc("kind", func(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		return withPrefix(raftfsm.AuditKinds, toComplete), noFiles
	})
	return c
}

// printEvents prints a page of events: ages, or with the global --verbose
// exact times, the journal index and whether the actor was verified.
func (g *globals) printEvents(w io.Writer, page eventsPage) error {
	if formatOf(w).name {
		for _, e := range page.Events {
			if _, err := fmt.Fprintf(w, "event/%d\n", e.Seq); err != nil {
				return err
			}
		}
		return nil
	}
	if g.jsonOutput() {
		return printJSON(w, page)
	}
	verbose := formatOf(w).verbose
	header := []string{"AGE", "KIND", "SUBJECT", "ACTOR", "CHANGE"}
	if verbose {
		header = []string{"TIME", "INDEX", "KIND", "SUBJECT", "ACTOR", "VERIFIED", "CHANGE"}
	}
	rows := make([][]string, 0, len(page.Events))
	for _, e := range page.Events {
		who := actorWithClaim(e.GetActor(), e.GetClaimed())
		change := orDashStr(e.GetSummary())
		if verbose {
			verified := "no"
			if e.GetVerified() {
				verified = "yes"
			}
			rows = append(rows, []string{timeMsExact(e.TimeMs), strconv.FormatInt(e.Index, 10), e.Kind, e.Subject, who, verified, change})
			continue
		}
		rows = append(rows, []string{when(w, &e.TimeMs), e.Kind, e.Subject, who, change})
	}
	return printTable(w, header, rows)
}

// actorWithClaim is "actor (as claimed)", or "-".
func actorWithClaim(actor, claimed string) string {
	who := orDashStr(actor)
	if claimed != "" {
		who += " (as " + claimed + ")"
	}
	return who
}

// changedColumns are config list's CHANGED (when an option was last set,
// relative; "*" for a value not at its default set by a master that did not
// record when) and CHANGED BY.
func changedColumns(w io.Writer, o *adminapi.TOption) (changed, by string) {
	switch {
	case o.IsSetChangedTimeMs():
		changed = when(w, o.ChangedTimeMs)
	case !o.IsDefault:
		changed = "*"
	}
	if o.IsSetChangedBy() {
		by = actorWithClaim(o.GetChangedBy(), o.GetChangedByClaimed())
	}
	return changed, by
}

func orDashStr(s string) string {
	if strings.TrimSpace(s) == "" {
		return dash
	}
	return s
}
