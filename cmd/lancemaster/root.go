package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/lancemaster/lancemaster/pkg/rpc"
	"github.com/lancemaster/lancemaster/pkg/version"
)

// Exit codes. Scripts may rely on them; never renumber.
const (
	exitOK = 0
	// exitError: the request was answered with an error (the stderr line
	// names the TErrorCode), or anything else failed.
	exitError = 1
	// exitUsage: bad arguments or flags; nothing was sent.
	exitUsage = 2
	// exitUnreachable: no master answered (every address refused, or the
	// --timeout passed), or a master answered OUTCOME_UNKNOWN (§13.6). A
	// write may or may not have been applied: check before retrying.
	exitUnreachable = 3
)

const (
	envAddress       = "LANCEMASTER_ADDR"
	envOutput        = "LANCEMASTER_OUTPUT"
	envTimeout       = "LANCEMASTER_TIMEOUT"
	envAs            = "LANCEMASTER_AS"
	envTLSServerName = "LANCEMASTER_TLS_SERVER_NAME"
	envVerbose       = "LANCEMASTER_VERBOSE"
	defaultAddress   = "127.0.0.1:7201"
	defaultTimeout   = 30 * time.Second
	defaultActor     = "operator"

	outputTable = "table"
	outputJSON  = "json"
	outputYAML  = "yaml"
	outputName  = "name"
)

// globals holds the persistent flags every command group shares.
type globals struct {
	addresses string
	output    string
	timeout   time.Duration
	as        string
	noHeaders bool
	// verbose prints exact times where tables print ages (--verbose).
	verbose bool
	// now is the clock of relative times and of --since durations
	// (time.Now; tests inject one).
	now func() time.Time
	// tlsServerName overrides the host the masters' certificates are
	// checked against (--tls-server-name).
	tlsServerName string
	tls           rpc.TLSFiles // --tls-ca, --tls-cert, --tls-key (tls.go)
	envErr        error        // a malformed LANCEMASTER_TIMEOUT, reported before any command runs
}

// usageError is a mistake in the command line. It is reported with a hint
// to --help and exit code 2, and it is always raised before any request.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// newRootCmd builds the whole command tree. getenv supplies the defaults
// that come from the environment (LANCEMASTER_ADDR, USER).
func newRootCmd(g *globals, getenv func(string) string) *cobra.Command {
	root := &cobra.Command{
		Use:   "lancemaster",
		Short: "Raft-replicated control plane for Lance index jobs",
		Long: "lancemaster runs the master daemon (serve) and is the operator CLI for a\n" +
			"lancemaster cluster: admit and inspect index jobs, register catalogs and\n" +
			"backends, set cluster-wide options and manage the Raft peers.",
		SilenceUsage:  true,
		SilenceErrors: true,
		// Help on a bare `lancemaster`, but a typo is an error, not exit 0.
		Args: unknownCommand,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	// `lancemaster completion bash|zsh|fish|powershell` (cobra's), with
	// dynamic completion of job ids, catalogs, backends and option keys
	// (completion.go).
	root.CompletionOptions.HiddenDefaultCmd = false
	root.Version = version.Get().String()
	root.SetVersionTemplate("{{.Version}}\n")

	addr := getenv(envAddress)
	if strings.TrimSpace(addr) == "" {
		addr = defaultAddress
	}
	as := getenv("USER")
	if strings.TrimSpace(as) == "" {
		as = defaultActor
	}
	pf := root.PersistentFlags()
	pf.StringVar(&g.addresses, "address", addr,
		"comma-separated master addresses HOST:PORT; tried in order, following leader hints (env "+envAddress+")")
	output := getenv(envOutput)
	if strings.TrimSpace(output) == "" {
		output = outputTable
	}
	timeout := defaultTimeout
	if v := strings.TrimSpace(getenv(envTimeout)); v != "" {
		// A bad value is reported by validate, as a bad --timeout is.
		if d, err := time.ParseDuration(v); err == nil {
			timeout = d
		} else {
			g.envErr = usagef("%s=%q is not a duration (like 30s)", envTimeout, v)
		}
	}
	if v := getenv(envAs); strings.TrimSpace(v) != "" {
		as = v
	}
	pf.StringVarP(&g.output, "output", "o", output, "output format: table|json|yaml|name (env "+envOutput+")")
	pf.BoolVar(&g.noHeaders, "no-headers", false, "tables without their header row (for scripts)")
	verbose := false
	if v := strings.TrimSpace(getenv(envVerbose)); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil && g.envErr == nil {
			g.envErr = usagef("%s=%q is not a boolean (true or false)", envVerbose, v)
		}
		verbose = b
	}
	pf.BoolVar(&g.verbose, "verbose", verbose, "exact times (UTC, to the millisecond) where tables print ages like 3m (env "+envVerbose+")")
	pf.DurationVar(&g.timeout, "timeout", timeout, "deadline for the whole command, failover included (env "+envTimeout+")")
	pf.StringVar(&g.as, "as", as, "the name recorded as the job creator or actor ($USER when set); under mutual TLS the certificate's identity is recorded, and this name as a claim beside it")
	bindTLSFlags(pf, &g.tls, getenv)
	pf.StringVar(&g.tlsServerName, "tls-server-name", getenv(envTLSServerName),
		"the name the masters' certificates must carry, instead of the --address host (env "+envTLSServerName+")")

	root.AddCommand(
		newJobsCmd(g),
		newCatalogsCmd(g),
		newBackendsCmd(g),
		newConfigCmd(g),
		newEventsCmd(g),
		newAuditCmd(g),
		newOperatorCmd(g),
		newDatasetsCmd(g),
		newVersionCmd(g),
	)
	// Daemon commands. They inherit the persistent flags above: do not reuse
	// the -o shorthand.
	root.AddCommand(hideClientFlags(newServeCmd()))
	root.AddCommand(hideClientFlags(newBackendCmd()))
	root.AddCommand(hideClientFlags(newCertsCmd()))
	addCompletions(root, g)
	return root
}

// execute runs the CLI and returns the process exit code. It never calls
// os.Exit, so tests can run it in-process.
func execute(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	return executeAt(ctx, time.Now, args, stdout, stderr, getenv)
}

// executeAt is execute with the clock of relative times and --since.
func executeAt(ctx context.Context, now func() time.Time, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	g := &globals{now: now}
	root := newRootCmd(g, getenv)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{msg: err.Error()} })

	started := false
	markRunStart(root, g, &started)

	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	// Anything cobra rejects before a command runs (unknown flag or command,
	// wrong argument count, a missing required flag) is a usage error.
	var ue *usageError
	if !started || errors.As(err, &ue) {
		printUsageError(stderr, err)
		if cmd != nil {
			fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
		}
		return exitUsage
	}
	// A command that ends with an exit code of its own (jobs watch: the
	// outcome of the jobs) has already explained it on stderr.
	var xe *exitCodeError
	if errors.As(err, &xe) {
		return xe.code
	}
	code, line := describeError(err)
	fmt.Fprintf(stderr, "Error: %s\n", line)
	return code
}

// exitCodeError ends a command with the exit code code. The command prints
// its own explanation before returning it; execute prints nothing more.
type exitCodeError struct {
	code int
	msg  string
}

func (e *exitCodeError) Error() string { return e.msg }

// markRunStart wraps every runnable command so execute can tell usage
// errors (raised by cobra before RunE) from failures of the command itself,
// and validates the shared flags once, before any command body runs.
func markRunStart(c *cobra.Command, g *globals, started *bool) {
	if run := c.RunE; run != nil {
		c.RunE = func(cmd *cobra.Command, args []string) error {
			*started = true
			if err := g.validate(); err != nil {
				return err
			}
			cmd.SetOut(&formatWriter{Writer: cmd.OutOrStdout(), yaml: g.output == outputYAML, name: g.output == outputName,
				noHeaders: g.noHeaders, now: g.now, verbose: g.verbose})
			return run(cmd, args)
		}
	} else if run := c.Run; run != nil {
		c.Run = nil
		c.RunE = func(cmd *cobra.Command, args []string) error {
			*started = true
			run(cmd, args)
			return nil
		}
	}
	for _, sub := range c.Commands() {
		markRunStart(sub, g, started)
	}
}

func (g *globals) validate() error {
	if g.envErr != nil {
		return g.envErr
	}
	switch g.output {
	case outputTable, outputJSON, outputYAML, outputName:
	default:
		return usagef("--output must be table, json, yaml or name, got %q", g.output)
	}
	if g.timeout <= 0 {
		return usagef("--timeout must be positive, got %s", g.timeout)
	}
	return nil
}

// jsonOutput reports whether -o json (or -o yaml, the same document in
// YAML: printJSON writes it so) was asked for.
func (g *globals) jsonOutput() bool {
	return g.output == outputJSON || g.output == outputYAML || g.output == outputName
}

// actor is the --as identity, or nil to let the server use the client's.
func (g *globals) actor() *string {
	a := g.claim()
	if a == "" {
		return nil
	}
	return &a
}

// claim is the --as identity for a method that takes it as an argument
// ("": none).
func (g *globals) claim() string { return strings.TrimSpace(g.as) }

// groupCmd is a command that only holds subcommands: bare, it prints its
// help; with an unknown subcommand it is a usage error (cobra would print
// the help and exit 0).
func groupCmd(use, short string, subs ...*cobra.Command) *cobra.Command {
	c := &cobra.Command{
		Use:   use,
		Short: short,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := unknownCommand(cmd, args); err != nil {
				return err
			}
			return cmd.Help()
		},
	}
	c.AddCommand(subs...)
	return c
}

// clientOnlyFlags are the global flags only the operator CLI reads: the
// daemons' help does not list them (the --tls-* flags stay: a daemon takes
// them as overrides of its configuration file).
var clientOnlyFlags = []string{"address", "output", "no-headers", "verbose", "timeout", "as", "tls-server-name"}

// hideClientFlags makes c's help leave out the client-only global flags.
func hideClientFlags(c *cobra.Command) *cobra.Command {
	c.SetHelpFunc(func(cmd *cobra.Command, args []string) {
		for _, name := range clientOnlyFlags {
			if f := cmd.InheritedFlags().Lookup(name); f != nil {
				f.Hidden = true
			}
		}
		cmd.Parent().HelpFunc()(cmd, args)
	})
	return c
}

// unknownCommand refuses arguments where a subcommand was expected, with
// the subcommands it resembles ("did you mean").
func unknownCommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2
	}
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	}
	return usagef("%s", msg)
}

// printUsageError prints a usage error on one line, or, when it lists
// several problems (a configuration file's), one problem per line.
func printUsageError(w io.Writer, err error) {
	var lines []string
	for _, l := range strings.Split(err.Error(), "\n") {
		if l = oneLine(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) <= 1 {
		fmt.Fprintf(w, "Error: %s\n", strings.Join(lines, ""))
		return
	}
	fmt.Fprintf(w, "Error: %d problems:\n", len(lines))
	for _, l := range lines {
		fmt.Fprintf(w, "  %s\n", l)
	}
}
