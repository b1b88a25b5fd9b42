package main

import (
	"fmt"
	"log/slog"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/pkg/config"
	"github.com/lancemaster/lancemaster/pkg/console"
	"github.com/lancemaster/lancemaster/pkg/master"
)

// newServeCmd runs one master until SIGTERM or SIGINT; a leader transfers
// leadership before it exits (DESIGN.md §8).
func newServeCmd() *cobra.Command {
	var path string
	var dryRun bool
	c := &cobra.Command{
		Use:   "serve",
		Short: "Run a master (raft member, journal, admin API)",
		Long: "Run one lancemaster master. The node configuration is a YAML file (--config)\n" +
			"overridden by flags; see docs/configuration.md.",
		Args: cobra.NoArgs,
	}
	c.Flags().StringVar(&path, "config", "", "node configuration file (YAML)")
	c.Flags().BoolVar(&dryRun, "dry-run", false,
		"check everything a start would (configuration, certificates, data directory writable, listen addresses free) and exit; nothing is created")
	nf := config.BindNodeFlags(c.Flags())
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		n := config.DefaultNode()
		if path != "" {
			var err error
			if n, err = config.LoadNode(path); err != nil {
				return usagef("%v", err)
			}
		}
		if err := nf.Apply(n); err != nil {
			return usagef("%v", err)
		}
		daemonTLS(cmd, &n.TLS.CA, &n.TLS.Cert, &n.TLS.Key)
		if err := n.Validate(); err != nil {
			return usagef("%v", err)
		}
		if dryRun {
			if err := masterPreflight(n, true); err != nil {
				return usagef("%v", err)
			}
			if w := secretsWarning(n); w != "" {
				fmt.Fprintln(cmd.ErrOrStderr(), w)
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "master %s: ready to start (%d peers, data_dir %s)\n", n.NodeID, len(n.Peers), n.DataDir)
			return err
		}
		log, err := config.NewLogger(n.LogFormat, n.LogLevel)
		if err != nil {
			return usagef("%v", err)
		}
		defer func() { _ = log.Sync() }()
		slog.SetDefault(slog.New(config.SlogHandler(log.Named("thrift"))))

		ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
		defer stop()
		m, err := master.Start(ctx, master.Options{Node: n, Logger: log, Console: console.Handler()})
		if err != nil {
			log.Error("master failed to start", zap.Error(err))
			return fmt.Errorf("serve: %w", err)
		}
		<-ctx.Done()
		log.Info("signal received: transferring leadership (if leader) and stopping")
		if err := m.Close(true); err != nil {
			log.Warn("shutdown", zap.Error(err))
		}
		return nil
	}
	return c
}
