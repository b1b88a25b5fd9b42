package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/pkg/job"
)

// jobs list: newest first (or --reverse), filtered, paged with --cursor.

// listFlags are jobs list's flags.
type listFlags struct {
	catalog, db, table, state, since, mtype, itype string
	limit                                          int32
	after, cursor                                  int64
	all, consistent, restored, held, reverse       bool
	unresolved, watch                              bool
	interval, total                                time.Duration
}

// jobList is jobs list -o json|yaml: the page and the cursor of the next
// one (omitted on the last page), the document GET /v1/jobs answers.
type jobList struct {
	Jobs         []*adminapi.TJobView `json:"jobs"`
	NextCursor   string               `json:"next_cursor,omitempty"`
	StaleWarning string               `json:"stale_warning,omitempty"`
}

func newJobsListCmd(g *globals) *cobra.Command {
	var lf listFlags
	c := &cobra.Command{
		Use:   "list",
		Short: "List jobs, newest first",
		Long: "List jobs, newest (largest id) first; --reverse lists oldest first. Filters combine: a job is\n" +
			"listed when it matches every one given. A page holds --limit jobs; when more match, the table\n" +
			"ends with a hint on stderr and -o json carries next_cursor: pass it as --cursor (with the same\n" +
			"filters and --reverse) for the next page, or use --all.",
		Example: "  lancemaster jobs list --state UNKNOWN --unresolved   # the ones that still need an operator\n" +
			"  lancemaster jobs list --since 2h --state PENDING,RUNNING\n" +
			"  lancemaster jobs list --state refresh:FAILED --type CREATE --index-type IVF_PQ\n" +
			"  lancemaster jobs list --restored --all    # after an operator snapshot restore\n" +
			"  lancemaster jobs list --held --all        # the jobs a restore held\n" +
			"  lancemaster jobs list --catalog lake --db sales --table items --all -o json",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			req, err := lf.request(cmd, g.now())
			if err != nil {
				return err
			}
			if lf.watch {
				if err := checkWatchFlags(lf.interval, lf.total); err != nil {
					return err
				}
			}
			// --restored: RUNNING jobs not dispatched in the current term.
			var term int64
			if lf.restored {
				if err := g.call(cmd, func(ctx context.Context, c *adminapi.LanceMasterServiceClient) error {
					resp, err := c.ListPeers(ctx)
					if err == nil && !resp.IsSetTerm() {
						err = errors.New("the master did not say its raft term")
					}
					term = resp.GetTerm()
					return err
				}); err != nil {
					return err
				}
			}
			stale := ""
			fetch := func() ([]*adminapi.TJobView, *int64, error) {
				return g.fetchJobs(cmd, req, &lf, term, &stale)
			}
			if lf.watch {
				return g.watchJobList(cmd, fetch, lf.interval, lf.total)
			}
			jobs, next, err := fetch()
			if err != nil {
				return err
			}
			if err := g.printJobList(cmd, jobList{Jobs: jobs, StaleWarning: stale}, next); err != nil {
				return err
			}
			if next != nil && !g.jsonOutput() {
				rev := ""
				if lf.reverse {
					rev = "--reverse "
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "more jobs match: use --all, or %s--cursor %d for the next page\n", rev, *next)
			}
			return nil
		},
	}
	f := c.Flags()
	f.BoolVar(&lf.watch, "watch", false, "print the list again whenever it changes, every --interval, until interrupted (or --timeout-total)")
	f.DurationVar(&lf.interval, "interval", defaultWatchInterval, "with --watch: time between two polls")
	f.DurationVar(&lf.total, "timeout-total", 0, "with --watch: stop after this long; 0 = until interrupted")
	f.StringVar(&lf.catalog, "catalog", "", "only jobs of this catalog")
	f.StringVar(&lf.db, "db", "", "only jobs of this database")
	f.StringVar(&lf.table, "table", "", "only jobs of this table")
	f.StringVar(&lf.state, "state", "", "only jobs in this mutation or refresh state (e.g. UNKNOWN, PENDING, RESOLVING, refresh:FAILED); several, comma-separated, match any")
	f.StringVar(&lf.since, "since", "", "only jobs created at or after this time: RFC 3339 (2026-12-01T09:00:00Z) or a duration before now (90m, 2h)")
	f.StringVar(&lf.mtype, "type", "", "only jobs of this mutation type: CREATE, REPLACE, DROP or OPTIMIZE")
	f.StringVar(&lf.itype, "index-type", "", "only jobs building this index type (IVF_PQ, BTREE, ...)")
	f.BoolVar(&lf.unresolved, "unresolved", false,
		"only jobs that still hold their fence or need an operator (leaves out force-released UNKNOWN jobs and resolved outcomes)")
	f.BoolVar(&lf.restored, "restored", false,
		"only RUNNING jobs dispatched under an earlier leadership than the current raft term (after a snapshot restore: what it brought back as RUNNING)")
	f.BoolVar(&lf.held, "held", false,
		"only jobs a snapshot restore held: their dispatch history is unknown, so they are never dispatched again (cancel a PENDING one, then admit the work again)")
	f.BoolVar(&lf.reverse, "reverse", false, "oldest (smallest id) first")
	f.Int32Var(&lf.limit, "limit", 0, fmt.Sprintf("jobs per page, 1..%d (server default 100)", maxListLimit))
	f.Int64Var(&lf.cursor, "cursor", 0, "continue a listing: the next_cursor of the previous page (same filters, same --reverse)")
	f.Int64Var(&lf.after, "after", 0, "oldest first, from after this job id (the same as --reverse --cursor ID)")
	f.BoolVar(&lf.all, "all", false, "follow the pages until every matching job is listed")
	f.BoolVar(&lf.consistent, "consistent", false, "read through the leader instead of the nearest master")
	return c
}

// request checks every flag and builds the first page's request.
func (lf *listFlags) request(cmd *cobra.Command, now time.Time) (*adminapi.TListJobsRequest, error) {
	flags := cmd.Flags()
	if flags.Changed("limit") && (lf.limit < 1 || lf.limit > maxListLimit) {
		return nil, usagef("--limit must be between 1 and %d, got %d", maxListLimit, lf.limit)
	}
	if lf.after < 0 {
		return nil, usagef("--after must not be negative, got %d", lf.after)
	}
	if flags.Changed("cursor") && lf.cursor < 1 {
		return nil, usagef("--cursor must be a job id (a positive integer, the next_cursor of a page), got %d", lf.cursor)
	}
	if flags.Changed("after") {
		if flags.Changed("cursor") {
			return nil, usagef("--after and --cursor cannot be combined: --after ID is --reverse --cursor ID")
		}
		lf.reverse, lf.cursor = true, lf.after
	}
	if lf.restored {
		if lf.state != "" && !strings.EqualFold(lf.state, "RUNNING") {
			return nil, usagef("--restored lists RUNNING jobs; it cannot be combined with --state %s", lf.state)
		}
		lf.state = "RUNNING"
	}
	state, err := checkStateFilter(lf.state)
	if err != nil {
		return nil, err
	}
	mtype, err := checkEnumFlag("--type", lf.mtype, []string{"CREATE", "REPLACE", "CREATE_OR_REPLACE", "DROP", "OPTIMIZE"})
	if err != nil {
		return nil, err
	}
	itype, err := checkEnumFlag("--index-type", lf.itype, job.SupportedIndexTypes)
	if err != nil {
		return nil, err
	}
	oldest := lf.reverse
	req := &adminapi.TListJobsRequest{
		Catalog: optString(lf.catalog), Db: optString(lf.db), Table: optString(lf.table), State: optString(state),
		MutationType: optString(mtype), IndexType: optString(itype), OldestFirst: &oldest,
	}
	if lf.since != "" {
		ms, err := parseSince(lf.since, now)
		if err != nil {
			return nil, err
		}
		req.SinceMs = &ms
	}
	if lf.limit > 0 {
		req.Limit = &lf.limit
	}
	if lf.consistent {
		req.Consistent = &lf.consistent
	}
	if lf.unresolved {
		req.Unresolved = &lf.unresolved
	}
	if lf.held {
		req.Held = &lf.held
	}
	return req, nil
}

// fetchJobs reads one page (or, with --all, every page) from the cursor.
// The first stale-read warning is printed on stderr and kept in stale.
func (g *globals) fetchJobs(cmd *cobra.Command, req *adminapi.TListJobsRequest, lf *listFlags, term int64, stale *string) ([]*adminapi.TJobView, *int64, error) {
	cursor := lf.cursor
	jobs := []*adminapi.TJobView{}
	for {
		req.AfterJobID, req.BeforeJobID = nil, nil
		if cursor > 0 && lf.reverse {
			req.AfterJobID = &cursor
		} else if cursor > 0 {
			req.BeforeJobID = &cursor
		}
		var resp *adminapi.TListJobsResponse
		if err := g.call(cmd, func(ctx context.Context, c *adminapi.LanceMasterServiceClient) (err error) {
			resp, err = c.ListJobs(ctx, req)
			return err
		}); err != nil {
			return nil, nil, err
		}
		if w := resp.GetStaleWarning(); w != "" && *stale == "" {
			fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s\n", sanitize(w))
			*stale = w
		}
		for _, j := range resp.GetJobs() {
			if (!lf.restored || !j.IsSetLeaderTerm() || j.GetLeaderTerm() != term) && (!lf.held || j.GetRestoreHold()) && matchesNewFilters(j, req) {
				jobs = append(jobs, j)
			}
		}
		if !lf.reverse && resp.NextBeforeJobID == nil && resp.NextAfterJobID != nil {
			// A master older than newest-first listing pages in id order:
			// follow its order rather than stop after one page.
			fmt.Fprintf(cmd.ErrOrStderr(), "warning: the master lists in id order (oldest first): it predates newest-first listing\n")
			lf.reverse = true
			req.OldestFirst = &lf.reverse
		}
		next := resp.NextBeforeJobID
		if lf.reverse {
			next = resp.NextAfterJobID
		}
		if !lf.all || next == nil {
			return jobs, next, nil
		}
		if cursor > 0 && (lf.reverse && *next <= cursor || !lf.reverse && *next >= cursor) {
			return nil, nil, fmt.Errorf("the master returned a page cursor that does not advance (%d after %d)", *next, cursor)
		}
		cursor = *next
	}
}

// matchesNewFilters applies --since, --type and --index-type to a view
// again: a master older than these filters ignores them, and its answer
// must not pass for a filtered one.
func matchesNewFilters(j *adminapi.TJobView, req *adminapi.TListJobsRequest) bool {
	mt := req.GetMutationType()
	if mt == "CREATE_OR_REPLACE" {
		mt = "REPLACE"
	}
	return (!req.IsSetSinceMs() || j.GetCreateTimeMs() >= req.GetSinceMs()) &&
		(mt == "" || j.GetMutationType() == mt) &&
		(req.GetIndexType() == "" || j.GetIndexType() == req.GetIndexType())
}

// checkStateFilter checks --state locally, the way the master reads it:
// comma-separated mutation states, refresh states, or refresh:NAME.
func checkStateFilter(v string) (string, error) {
	v = strings.ToUpper(strings.TrimSpace(v))
	if v == "" {
		return "", nil
	}
	for _, p := range strings.Split(v, ",") {
		p = strings.TrimSpace(p)
		name, refresh := strings.CutPrefix(p, "REFRESH:")
		_, isRefresh := job.ParseRefreshState(name)
		_, isMutation := job.ParseMutationState(name)
		if refresh && !isRefresh || !refresh && !isRefresh && !isMutation {
			return "", usagef("--state: unknown state %q (mutation: PENDING RUNNING RESOLVING COMMITTED NOT_COMMITTED UNKNOWN CANCELLED; "+
				"refresh: refresh:NOT_REQUIRED|REQUIRED|RUNNING|DONE|FAILED; several comma-separated)", p)
		}
	}
	return v, nil
}

// checkEnumFlag upper-cases an enum flag and checks it is one of allowed.
func checkEnumFlag(flag, v string, allowed []string) (string, error) {
	v = strings.ToUpper(strings.TrimSpace(v))
	if v != "" && !slices.Contains(allowed, v) {
		return "", usagef("%s must be one of %s, got %q", flag, strings.Join(allowed, ", "), v)
	}
	return v, nil
}

// parseSince reads --since: an RFC 3339 time, or a duration before now.
func parseSince(v string, now time.Time) (int64, error) {
	v = strings.TrimSpace(v)
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		if t.UnixMilli() < 0 {
			return 0, usagef("--since must not be before 1970, got %q", v)
		}
		return t.UnixMilli(), nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, usagef("--since must be an RFC 3339 time (2026-12-01T09:00:00Z) or a duration (90m, 2h, 72h), got %q", v)
	}
	if d <= 0 {
		return 0, usagef("--since must be a positive duration (how long before now), got %q", v)
	}
	return max(now.Add(-d).UnixMilli(), 1), nil
}

// printJobs prints jobs with no next page (jobs list --watch).
func (g *globals) printJobs(cmd *cobra.Command, jobs []*adminapi.TJobView) error {
	return g.printJobList(cmd, jobList{Jobs: jobs}, nil)
}

// printJobList prints a page of jobs: a table, or the jobList document
// with next as its cursor.
func (g *globals) printJobList(cmd *cobra.Command, doc jobList, next *int64) error {
	out := cmd.OutOrStdout()
	if g.jsonOutput() {
		if next != nil {
			doc.NextCursor = strconv.FormatInt(*next, 10)
		}
		return printJSON(out, doc)
	}
	jobs := doc.Jobs
	rows := make([][]string, 0, len(jobs))
	for _, j := range jobs {
		st := str(j.MutationState)
		if j.GetForceReleased() {
			st += " (released)"
		}
		if j.GetRestoreHold() {
			st += " (held)"
		}
		rows = append(rows, []string{
			strconv.FormatInt(j.JobID, 10),
			str(j.Catalog),
			str(j.Db) + "." + str(j.Table),
			indexCell(j),
			str(j.IndexType),
			str(j.MutationType),
			st,
			str(j.RefreshState),
			i64(j.BackendID),
			when(out, j.CreateTimeMs),
			when(out, j.UpdateTimeMs),
		})
	}
	return printTable(out,
		[]string{"ID", "CATALOG", "DB.TABLE", "INDEX", "TYPE", "MUTATION", "STATE", "REFRESH", "BACKEND", "AGE", "UPDATED"}, rows)
}

// checkWatchFlags checks --interval and --timeout-total of a --watch.
func checkWatchFlags(interval, total time.Duration) error {
	if interval <= 0 {
		return usagef("--interval must be positive, got %s", interval)
	}
	if total < 0 {
		return usagef("--timeout-total must not be negative (0 = until interrupted), got %s", total)
	}
	return nil
}
