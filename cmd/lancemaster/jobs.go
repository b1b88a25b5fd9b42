package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
)

// maxListLimit is the largest page the admin API serves (TListJobsRequest).
const maxListLimit = 1000

func newJobsCmd(g *globals) *cobra.Command {
	jobs := groupCmd("jobs", "Admit, inspect and resolve index jobs",
		newCreateIndexCmd(g),
		newDropIndexCmd(g),
		newOptimizeCmd(g),
		newJobsListCmd(g),
		newJobsShowCmd(g),
		newJobsResolveCmd(g),
		newJobsCancelCmd(g),
		newJobsWatchCmd(g),
		newJobsLogsCmd(g),
	)
	addWaitFlags(jobs)
	return jobs
}

func newCreateIndexCmd(g *globals) *cobra.Command {
	var (
		column, indexType   string
		props               []string
		replace, ifNotExist bool
	)
	c := &cobra.Command{
		Use:         "create-index CATALOG.DB.TABLE INDEX --column C --type IVF_PQ|BTREE|BITMAP",
		Annotations: writeCommand(),
		Short:       "Admit a job that creates (or replaces) an index",
		Example: "  lancemaster jobs create-index lake.sales.items emb_idx --column embedding --type IVF_PQ \\\n" +
			"      --property metric=cosine --property num_partitions=256 --property num_sub_vectors=16",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			catalog, db, table, err := parseTableRef(args[0])
			if err != nil {
				return err
			}
			index, err := parseName("INDEX", args[1])
			if err != nil {
				return err
			}
			col, err := parseName("--column", column)
			if err != nil {
				return err
			}
			properties, err := parseProperties(props)
			if err != nil {
				return err
			}
			typ, err := checkIndexType(indexType)
			if err != nil {
				return err
			}
			if err := checkWaitFlags(cmd); err != nil {
				return err
			}
			req := &adminapi.TCreateIndexRequest{
				Catalog:    catalog,
				Db:         db,
				Table:      table,
				IndexName:  index,
				Column:     col,
				IndexType:  typ,
				Properties: properties,
				Creator:    g.actor(),
			}
			if replace {
				req.Replace = &replace
			}
			if ifNotExist {
				req.IfNotExists = &ifNotExist
			}
			return g.admit(cmd, func(ctx context.Context, c *adminapi.LanceMasterServiceClient) (*adminapi.TAdmitResponse, error) {
				return c.CreateIndex(ctx, req)
			})
		},
	}
	f := c.Flags()
	f.StringVar(&column, "column", "", "the column to index (required)")
	f.StringVar(&indexType, "type", "", "index type: IVF_PQ, BTREE or BITMAP (required)")
	// StringArray, not StringSlice: one value per flag, commas kept, and
	// duplicates preserved so the server can reject them.
	f.StringArrayVar(&props, "property", nil, "index property KEY=VALUE (repeatable; IVF_PQ: metric, num_partitions, num_sub_vectors, num_bits)")
	f.BoolVar(&replace, "replace", false, "create or replace the index")
	f.BoolVar(&ifNotExist, "if-not-exists", false, "no job and no error when an index of that name and definition exists")
	_ = c.MarkFlagRequired("column")
	_ = c.MarkFlagRequired("type")
	return c
}

func newDropIndexCmd(g *globals) *cobra.Command {
	var ifExists bool
	c := &cobra.Command{
		Use:         "drop-index CATALOG.DB.TABLE INDEX",
		Annotations: writeCommand(),
		Short:       "Admit a job that drops an index",
		Example:     "  lancemaster jobs drop-index lake.sales.items emb_idx --if-exists",
		Args:        cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			catalog, db, table, err := parseTableRef(args[0])
			if err != nil {
				return err
			}
			index, err := parseName("INDEX", args[1])
			if err != nil {
				return err
			}
			if err := checkWaitFlags(cmd); err != nil {
				return err
			}
			req := &adminapi.TDropIndexRequest{
				Catalog: catalog, Db: db, Table: table, IndexName: index, Creator: g.actor(),
			}
			if ifExists {
				req.IfExists = &ifExists
			}
			return g.admit(cmd, func(ctx context.Context, c *adminapi.LanceMasterServiceClient) (*adminapi.TAdmitResponse, error) {
				return c.DropIndex(ctx, req)
			})
		},
	}
	c.Flags().BoolVar(&ifExists, "if-exists", false, "no job and no error when the index does not exist")
	return c
}

// admit makes an admission call (CreateIndex, DropIndex, OptimizeDataset)
// and prints its answer, or waits for the job with --wait.
func (g *globals) admit(cmd *cobra.Command, call func(context.Context, *adminapi.LanceMasterServiceClient) (*adminapi.TAdmitResponse, error)) error {
	var resp *adminapi.TAdmitResponse
	if err := g.call(cmd, func(ctx context.Context, c *adminapi.LanceMasterServiceClient) (err error) {
		resp, err = call(ctx, c)
		return err
	}); err != nil {
		return err
	}
	if waited, err := g.waitAfterAdmit(cmd, resp); waited {
		return err
	}
	out := cmd.OutOrStdout()
	if g.jsonOutput() {
		return printJSON(out, resp)
	}
	if resp.GetNoop() {
		msg := resp.GetMessage()
		if msg == "" {
			msg = "nothing to do, no job admitted"
		}
		_, err := fmt.Fprintf(out, "no-op: %s\n", sanitize(msg))
		return err
	}
	_, err := fmt.Fprintf(out, "job %d admitted\n", resp.GetJobID())
	return err
}

func newJobsShowCmd(g *globals) *cobra.Command {
	var consistent bool
	c := &cobra.Command{
		Use:     "show ID",
		Short:   "Show every recorded field of one job",
		Example: "  lancemaster jobs show 42 --consistent",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseJobID(args[0])
			if err != nil {
				return err
			}
			var view *adminapi.TJobView
			if err := g.call(cmd, func(ctx context.Context, c *adminapi.LanceMasterServiceClient) (err error) {
				view, err = c.ShowJob(ctx, id, consistent)
				return err
			}); err != nil {
				return err
			}
			if w := view.GetStaleWarning(); w != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s\n", sanitize(w))
			}
			if g.jsonOutput() {
				return printJSON(cmd.OutOrStdout(), view)
			}
			return printKeyValues(cmd.OutOrStdout(), jobFields(view))
		},
	}
	c.Flags().BoolVar(&consistent, "consistent", false, "read through the leader instead of the nearest master")
	return c
}

func newJobsResolveCmd(g *globals) *cobra.Command {
	var (
		force   bool
		comment string
	)
	c := &cobra.Command{
		Use:         "resolve ID --force-release --comment TEXT",
		Annotations: writeCommand(),
		Short:       "Force-release an UNKNOWN job: free its fence, quota and slot",
		Long: "Force-release an UNKNOWN job (DESIGN.md §9). Its fence, quota and possible-live slot are\n" +
			"released in one entry; the outcome stays UNKNOWN. The old worker may still be running and may\n" +
			"overwrite, remove or reintroduce the index: check the backend first. Retrying is harmless.",
		Example: "  lancemaster jobs resolve 42 --force-release --comment \"backend be3 wiped, ticket OPS-123\"",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseJobID(args[0])
			if err != nil {
				return err
			}
			if !force {
				return usagef("--force-release is required: it is the only way to resolve an UNKNOWN job")
			}
			note := strings.TrimSpace(comment)
			if note == "" {
				return usagef("--comment must not be empty: say why the job may be released")
			}
			req := &adminapi.TResolveRequest{JobID: id, ForceRelease: true, Comment: note, Actor: g.actor()}
			var resp *adminapi.TResolveResponse
			if err := g.call(cmd, func(ctx context.Context, c *adminapi.LanceMasterServiceClient) (err error) {
				resp, err = c.ResolveJob(ctx, req)
				return err
			}); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if g.jsonOutput() {
				return printJSON(out, resp)
			}
			if resp.GetAlreadyReleased() {
				fmt.Fprintf(out, "job %d was already force-released; nothing changed\n", id)
			} else {
				fmt.Fprintf(out, "job %d force-released\n", id)
			}
			if w := resp.GetJob().GetForceWarning(); w != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "Warning: %s\n", sanitize(w))
			}
			return nil
		},
	}
	c.Flags().BoolVar(&force, "force-release", false, "release the job's fence, quota and slot (required)")
	c.Flags().StringVar(&comment, "comment", "", "why it is safe to release, recorded with the job (required)")
	_ = c.MarkFlagRequired("force-release")
	_ = c.MarkFlagRequired("comment")
	return c
}

func newJobsCancelCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:         "cancel ID",
		Annotations: writeCommand(),
		Short:       "Cancel a PENDING job (releases its fence and quota)",
		Example:     "  lancemaster jobs cancel 42",
		Args:        cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseJobID(args[0])
			if err != nil {
				return err
			}
			req := &adminapi.TCancelRequest{JobID: id, Actor: g.actor()}
			var view *adminapi.TJobView
			if err := g.call(cmd, func(ctx context.Context, c *adminapi.LanceMasterServiceClient) (err error) {
				view, err = c.CancelJob(ctx, req)
				return err
			}); err != nil {
				return err
			}
			if g.jsonOutput() {
				return printJSON(cmd.OutOrStdout(), view)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "job %d cancelled (state %s)\n", id, sanitize(str(view.MutationState)))
			return err
		},
	}
}

// parseTableRef splits CATALOG.DB.TABLE. Names containing dots are not
// addressable from the CLI.
func parseTableRef(s string) (catalog, db, table string, err error) {
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return "", "", "", usagef("table must be CATALOG.DB.TABLE, got %q", s)
	}
	for i, p := range parts {
		parts[i] = strings.TrimSpace(p)
		if parts[i] == "" {
			return "", "", "", usagef("table must be CATALOG.DB.TABLE with no empty part, got %q", s)
		}
	}
	return parts[0], parts[1], parts[2], nil
}

func parseName(what, s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", usagef("%s must not be empty", what)
	}
	return s, nil
}

// parseProperties turns KEY=VALUE flags into the request's list, in order
// and with duplicates kept: the server owns validation and rejects them.
func parseProperties(kvs []string) ([]*adminapi.TProperty, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	out := make([]*adminapi.TProperty, 0, len(kvs))
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, usagef("malformed --property %q: want KEY=VALUE", kv)
		}
		out = append(out, &adminapi.TProperty{Key: k, Value: strings.TrimSpace(v)})
	}
	return out, nil
}

func parseJobID(s string) (int64, error) {
	id, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || id < 1 {
		return 0, usagef("job ID must be a positive integer, got %q", s)
	}
	return id, nil
}

func optString(s string) *string {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil
	}
	return &s
}
