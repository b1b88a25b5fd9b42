package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
)

func newDatasetsCmd(g *globals) *cobra.Command {
	return groupCmd("datasets", "Look at datasets through a backend",
		newDatasetsInspectCmd(g),
	)
}

func newDatasetsInspectCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "inspect CATALOG.DB.TABLE",
		Short:   "Show a dataset's version, schema and indexes, as a backend sees it now",
		Example: "  lancemaster datasets inspect lake.db.items",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			catalog, db, table, err := parseTableRef(args[0])
			if err != nil {
				return err
			}
			var v *adminapi.TDatasetView
			if err := g.call(cmd, func(ctx context.Context, c *adminapi.LanceMasterServiceClient) (err error) {
				v, err = c.InspectDataset(ctx, catalog, db, table)
				return err
			}); err != nil {
				return err
			}
			if g.jsonOutput() {
				return printJSON(cmd.OutOrStdout(), v)
			}
			out := cmd.OutOrStdout()
			if _, err := fmt.Fprintf(out, "dataset version %d\n\n", v.DatasetVersion); err != nil {
				return err
			}
			rows := make([][]string, 0, len(v.Fields))
			for _, f := range v.Fields {
				typ := f.DataType
				if f.IsSetListDimension() {
					typ = fmt.Sprintf("%s<%s>[%d]", f.DataType, f.GetElementType(), f.GetListDimension())
				}
				rows = append(rows, []string{fmt.Sprint(f.FieldID), sanitize(f.Name), sanitize(typ), yesNo(&f.Nullable)})
			}
			if err := printTable(out, []string{"FIELD ID", "COLUMN", "TYPE", "NULLABLE"}, rows); err != nil {
				return err
			}
			if _, err := fmt.Fprintln(out); err != nil {
				return err
			}
			rows = rows[:0]
			opt := func(set bool, v int64) string {
				if !set {
					return "-"
				}
				return fmt.Sprint(v)
			}
			for _, ix := range v.Indexes {
				uuid := ix.GetIndexUUID()
				if uuid == "" {
					uuid = "-"
				}
				rows = append(rows, []string{sanitize(ix.Name), sanitize(ix.IndexType), sanitize(strings.Join(ix.Columns, ",")),
					sanitize(uuid), opt(ix.IsSetIndexedRows(), ix.GetIndexedRows()), opt(ix.IsSetUnindexedRows(), ix.GetUnindexedRows()),
					opt(ix.IsSetSegments(), int64(ix.GetSegments())), sanitize(ix.GetPropertiesJSON())})
			}
			return printTable(out, []string{"INDEX", "TYPE", "COLUMNS", "UUID", "INDEXED", "UNINDEXED", "SEGMENTS", "PROPERTIES"}, rows)
		},
	}
}
