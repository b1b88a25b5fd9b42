package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/lancemaster/lancemaster/pkg/version"
)

// newVersionCmd prints what this binary is; it contacts no master.
func newVersionCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print this binary's version, commit, build date, Go version and format versions",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			i := version.Get()
			if g.jsonOutput() {
				return printJSON(cmd.OutOrStdout(), i)
			}
			modified := ""
			if i.Modified {
				modified = " (built from a modified tree)"
			}
			date := i.BuildDate
			if date == "" {
				date = "unknown"
			}
			return printKeyValues(cmd.OutOrStdout(), [][2]string{
				{"version", i.Version},
				{"commit", i.Revision + modified},
				{"build date", date},
				{"go", i.GoVersion},
				{"wire contract", i.WireContract},
				{"admin contract", i.AdminContract},
				{"journal contract", i.JournalContract},
				{"journal format", fmt.Sprint(i.JournalFormat)},
				{"worker protocol", fmt.Sprint(i.WorkerProtocol)},
			})
		},
	}
}
