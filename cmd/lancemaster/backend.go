package main

import (
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/pkg/backend"
	"github.com/lancemaster/lancemaster/pkg/backend/supervisor"
	"github.com/lancemaster/lancemaster/pkg/certs"
	"github.com/lancemaster/lancemaster/pkg/config"
	"github.com/lancemaster/lancemaster/pkg/rpc"
)

// The supervisor may re-execute this binary as its cgroup v1 placement
// helper; that process must become the helper before anything else runs.
// An init function runs before main and before cobra parses anything.
func init() { supervisor.MaybeRunHelper() }

// backendFlags are the command-line overrides of a backend config file;
// only the flags the user set override it.
type backendFlags struct {
	listen, advertise, httpListen, dataDir, isolation, logFormat, logLevel string
	masters, worker                                                        []string
	concurrency, queueSize                                                 int
}

// newBackendCmd runs the backend agent until SIGTERM or SIGINT, then shuts
// it down gracefully (docs/backend.md).
func newBackendCmd() *cobra.Command {
	var path string
	var dryRun bool
	var f backendFlags
	c := &cobra.Command{
		Use:   "backend",
		Short: "Run a backend agent (runs index builds in isolated workers)",
		Long: "Run one lancemaster backend: a Thrift server that accepts dispatches from the\n" +
			"leader, runs each build in a one-shot, isolated worker and reports the result to\n" +
			"the masters through a durable outbox. The configuration is a YAML file (--config)\n" +
			"overridden by flags; see docs/backend.md.",
		Args: cobra.NoArgs,
	}
	fs := c.Flags()
	fs.StringVar(&path, "config", "", "backend configuration file (YAML)")
	fs.BoolVar(&dryRun, "dry-run", false,
		"check everything a start would (configuration, certificates, worker command, data directory writable, listen addresses free) and exit; nothing is created")
	fs.StringVar(&f.listen, "listen", "", "Thrift listen address host:port")
	fs.StringVar(&f.advertise, "advertise", "", "address masters dial (default: --listen)")
	fs.StringVar(&f.httpListen, "http-listen", "", "HTTP listen address host:port for /metrics, /livez and /readyz (default: none)")
	fs.StringVar(&f.dataDir, "data-dir", "", "directory of the outbox (holds invocation secrets: keep it private)")
	fs.StringSliceVar(&f.masters, "master", nil, "master RPC address HOST:PORT; repeat or comma-separate (replaces the file's masters)")
	fs.IntVar(&f.concurrency, "concurrency", backend.DefaultConcurrency, "workers running at once")
	fs.IntVar(&f.queueSize, "queue-size", backend.DefaultQueueSize, "accepted dispatches that may wait")
	fs.StringVar(&f.isolation, "isolation", backend.IsolationRequired, "worker isolation: required or best-effort")
	fs.StringArrayVar(&f.worker, "worker", nil, "worker argv, one flag per word (replaces the file's worker)")
	fs.StringVar(&f.logFormat, "log-format", "json", "log format: json or console")
	fs.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn or error")

	c.RunE = func(cmd *cobra.Command, _ []string) error {
		fc := backend.DefaultFileConfig()
		if path != "" {
			var err error
			if fc, err = backend.LoadFileConfig(path); err != nil {
				return usagef("%v", err)
			}
		}
		f.apply(cmd, fc)
		daemonTLS(cmd, &fc.TLS.CA, &fc.TLS.Cert, &fc.TLS.Key)
		defaultWorker := len(fc.Worker) == 0
		if defaultWorker {
			exe, err := os.Executable()
			if err != nil {
				return usagef("worker is not set and the executable's path is unknown: %v", err)
			}
			fc.Worker = backend.DefaultWorker(exe)
		}
		if err := fc.Validate(); err != nil {
			return usagef("%v", err)
		}
		if dryRun {
			if err := backendPreflight(fc, true); err != nil {
				return usagef("%v", err)
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "backend %s: ready to start (%d masters, data_dir %s)\n", fc.Listen, len(fc.Masters), fc.DataDir)
			return err
		}
		log, err := config.NewLogger(fc.LogFormat, fc.LogLevel)
		if err != nil {
			return usagef("%v", err)
		}
		defer func() { _ = log.Sync() }()
		slog.SetDefault(slog.New(config.SlogHandler(log.Named("thrift"))))
		if defaultWorker {
			// Only the default worker is known to have a script at argv[1].
			if _, err := os.Stat(fc.Worker[1]); err != nil {
				log.Warn("the default worker's script is missing: every build and inspect will fail; set worker in the config",
					zap.Strings("worker", fc.Worker), zap.Error(err))
			}
		}
		return runBackend(cmd, fc, log)
	}
	return c
}

func (f *backendFlags) apply(cmd *cobra.Command, fc *backend.FileConfig) {
	set := cmd.Flags().Changed
	str := func(name string, dst *string, v string) {
		if set(name) {
			*dst = v
		}
	}
	str("listen", &fc.Listen, f.listen)
	str("advertise", &fc.Advertise, f.advertise)
	str("http-listen", &fc.HTTPListen, f.httpListen)
	str("data-dir", &fc.DataDir, f.dataDir)
	str("isolation", &fc.Isolation, f.isolation)
	str("log-format", &fc.LogFormat, f.logFormat)
	str("log-level", &fc.LogLevel, f.logLevel)
	if set("master") {
		fc.Masters = f.masters
	}
	if set("worker") {
		fc.Worker = f.worker
	}
	if set("concurrency") {
		fc.Concurrency = f.concurrency
	}
	if set("queue-size") {
		fc.QueueSize = f.queueSize
	}
}

func runBackend(cmd *cobra.Command, fc *backend.FileConfig, log *zap.Logger) error {
	sup, err := supervisor.New(supervisor.Config{
		Command: fc.Worker, Env: fc.WorkerEnviron(os.Getenv("PATH")), Dir: fc.WorkerDir,
		MemoryLimitBytes: int64(fc.MemoryLimit), PidsLimit: fc.PidsLimit, Isolation: supervisor.Isolation(fc.Isolation),
		KillGrace: fc.KillGrace, CgroupParent: fc.CgroupParent, Logger: log,
		TempRoot: filepath.Join(fc.DataDir, "worker-tmp"), // each worker's own TMPDIR is made here
	})
	if err != nil {
		log.Error("backend: supervisor", zap.Error(err))
		return fmt.Errorf("backend: %w", err)
	}
	if !sup.Verified() {
		// Keep running: heartbeats tell the masters this process is alive,
		// and every dispatch and inspect is answered NOT_READY.
		log.Error("worker isolation is required but could not be verified: every dispatch will be refused (NOT_READY); "+
			"fix the cgroup setup or set isolation: best-effort", zap.String("reason", sup.Reason()))
	}
	ac := fc.AgentConfig()
	ac.Logger = log
	if fc.TLS.Enabled() {
		c, err := fc.TLS.Load(certs.RoleBackend, log.Named("tls"))
		if err != nil {
			log.Error("backend: tls", zap.Error(err))
			return fmt.Errorf("backend: %w", err)
		}
		ac.RPC = rpc.DefaultConfig()
		ac.RPC.Certs = c
	}
	a, err := backend.New(ac, sup)
	if err != nil {
		log.Error("backend failed to start", zap.Error(err))
		return err
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := a.Start(); err != nil {
		a.Close()
		log.Error("backend failed to start", zap.Error(err))
		return err
	}
	log.Info("worker isolation", zap.String("mode", sup.Mode()), zap.Bool("verified", sup.Verified()),
		zap.Strings("worker", fc.Worker))
	<-ctx.Done()
	log.Info("signal received: shutting down gracefully")
	return a.Close()
}
