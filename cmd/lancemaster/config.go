package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/pkg/options"
)

func newConfigCmd(g *globals) *cobra.Command {
	return groupCmd("config", "Read and set the cluster-wide options (replicated)",
		newConfigGetCmd(g),
		newConfigSetCmd(g),
		newConfigListCmd(g),
		newConfigValidateCmd(),
	)
}

func newConfigGetCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "get KEY",
		Short:   "Show one option",
		Example: "  lancemaster config get lance_index_job_dispatcher_paused",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			key, err := parseName("KEY", args[0])
			if err != nil {
				return err
			}
			var opt *adminapi.TOption
			if err := g.call(cmd, func(ctx context.Context, c *adminapi.LanceMasterServiceClient) (err error) {
				opt, err = c.GetOption(ctx, key)
				return err
			}); err != nil {
				return err
			}
			return g.printOptions(cmd, []*adminapi.TOption{opt}, opt)
		},
	}
}

func newConfigSetCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:         "set KEY VALUE",
		Annotations: writeCommand(),
		Short:       "Set one option for the whole cluster",
		Example: "  lancemaster config set lance_index_job_dispatcher_paused true\n" +
			"  lancemaster config set lance_index_job_max_unresolved_per_table 16",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			key, err := parseName("KEY", args[0])
			if err != nil {
				return err
			}
			value := args[1]
			// A value of an option this CLI knows is checked here (exit 2, no
			// call); a key it does not know may be a newer master's, so the
			// master judges it.
			if _, known := options.Lookup(key); known {
				if _, err := options.Validate(key, value); err != nil {
					return usagef("%s", err.Error())
				}
			}
			var opt *adminapi.TOption
			if err := g.call(cmd, func(ctx context.Context, c *adminapi.LanceMasterServiceClient) (err error) {
				opt, err = c.SetOption(ctx, key, value, g.claim())
				return err
			}); err != nil {
				return err
			}
			return g.printOptions(cmd, []*adminapi.TOption{opt}, opt)
		},
	}
}

func newConfigListCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List every option; CHANGED says when one was last set (* if not known) and CHANGED BY by whom",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var opts []*adminapi.TOption
			if err := g.call(cmd, func(ctx context.Context, c *adminapi.LanceMasterServiceClient) (err error) {
				opts, err = c.ListOptions(ctx)
				return err
			}); err != nil {
				return err
			}
			if opts == nil {
				opts = []*adminapi.TOption{}
			}
			return g.printOptions(cmd, opts, opts)
		},
	}
}

// printOptions prints opts as a table, or asJSON (one option or the list)
// as JSON.
func (g *globals) printOptions(cmd *cobra.Command, opts []*adminapi.TOption, asJSON any) error {
	if g.jsonOutput() {
		return printJSON(cmd.OutOrStdout(), asJSON)
	}
	rows := make([][]string, 0, len(opts))
	for _, o := range opts {
		changed, by := changedColumns(cmd.OutOrStdout(), o) // events.go
		rows = append(rows, []string{o.Key, o.Value, o.DefaultValue, changed, by})
	}
	return printTable(cmd.OutOrStdout(), []string{"KEY", "VALUE", "DEFAULT", "CHANGED", "CHANGED BY"}, rows)
}
