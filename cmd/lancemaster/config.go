package main

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
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
			var opt *adminapi.TOption
			if err := g.call(cmd, func(ctx context.Context, c *adminapi.LanceMasterServiceClient) (err error) {
				opt, err = c.SetOption(ctx, key, value)
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
	now := time.Now()
	for _, o := range opts {
		when, by := changedColumns(o, now) // events.go
		rows = append(rows, []string{o.Key, o.Value, o.DefaultValue, when, by})
	}
	return printTable(cmd.OutOrStdout(), []string{"KEY", "VALUE", "DEFAULT", "CHANGED", "CHANGED BY"}, rows)
}
