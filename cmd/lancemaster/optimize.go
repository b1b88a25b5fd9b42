package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/gen-go/wire"
)

// OPTIMIZE is a dataset-scoped job: its fence is the dataset, so it is
// exclusive with every index job on that dataset, and they with it.

func newOptimizeCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:         "optimize CATALOG.DB.TABLE",
		Annotations: writeCommand(),
		Short:       "Admit a job that compacts a dataset and brings every index up to date",
		Long: "Admit an OPTIMIZE of a dataset: compaction, then every index brought up to date (old\n" +
			"versions are kept). An OPTIMIZE is exclusive with every index job on its dataset, and they\n" +
			"with it: while one is unresolved the other is refused with FENCE_CONFLICT. A crashed OPTIMIZE\n" +
			"is run again, up to lance_index_job_max_dispatch_attempts.",
		Example: "  lancemaster jobs optimize lake.sales.items",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			catalog, db, table, err := parseTableRef(args[0])
			if err != nil {
				return err
			}
			if err := checkWaitFlags(cmd); err != nil {
				return err
			}
			req := &adminapi.TOptimizeRequest{Catalog: catalog, Db: db, Table: table, Creator: g.actor()}
			return g.admit(cmd, func(ctx context.Context, c *adminapi.LanceMasterServiceClient) (*adminapi.TAdmitResponse, error) {
				return c.OptimizeDataset(ctx, req)
			})
		},
	}
}

// indexCell is a job list's INDEX column: "-" for an OPTIMIZE, which has
// no index name (it is dataset-scoped).
func indexCell(j *adminapi.TJobView) string {
	if j.GetMutationType() == "OPTIMIZE" && j.GetIndexName() == "" {
		return "-"
	}
	return str(j.IndexName)
}

// optimizedFields are an OPTIMIZE's per-index before/after lines of `jobs
// show`: one per index, "before → after" (an unset side is "-").
func optimizedFields(l []*wire.TOptimizedIndex) [][2]string {
	out := make([][2]string, 0, len(l))
	for _, ix := range l {
		if ix == nil {
			continue
		}
		out = append(out, [2]string{"optimized_index " + sanitize(ix.Name), counts(ix.Before) + " → " + counts(ix.After)})
	}
	return out
}

func counts(c *wire.TIndexCounts) string {
	if c == nil {
		return "-"
	}
	s := fmt.Sprintf("indexed=%d unindexed=%d segments=%d", c.GetIndexedRows(), c.GetUnindexedRows(), c.GetSegments())
	if u := strings.TrimSpace(c.GetIndexUUID()); u != "" {
		s += " uuid=" + sanitize(u)
	}
	return s
}
