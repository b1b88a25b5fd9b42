package main

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
)

func newBackendsCmd(g *globals) *cobra.Command {
	return groupCmd("backends", "Register and list the backends that run index builds",
		newBackendsAddCmd(g),
		newBackendsListCmd(g),
		newBackendsShowCmd(g),
		newBackendsDrainCmd(g, true),
		newBackendsDrainCmd(g, false),
		newBackendsRemoveCmd(g),
	)
}

func newBackendsAddCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:         "add HOST:PORT",
		Annotations: writeCommand(),
		Short:       "Register a backend agent; the leader starts heartbeating it",
		Example:     "  lancemaster backends add 10.0.0.21:7301",
		Args:        cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			addr, err := parseHostPort(args[0])
			if err != nil {
				return err
			}
			var be *adminapi.TBackend
			if err := g.call(cmd, func(ctx context.Context, c *adminapi.LanceMasterServiceClient) (err error) {
				be, err = c.AddBackend(ctx, addr, g.claim())
				return err
			}); err != nil {
				return err
			}
			if w := be.GetWarning(); w != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s\n", sanitize(w))
			}
			if g.jsonOutput() {
				return printJSON(cmd.OutOrStdout(), be)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "backend %d added (%s)\n", be.BackendID, sanitize(be.Address))
			return err
		},
	}
}

func newBackendsListCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List backends with the leader's view of their liveness",
		Long: "List backends. ALIVE, EPOCH and LAST HEARD are the leader's heartbeat view: ALIVE is \"no\" for a\n" +
			"backend the leader heartbeats without an OK answer (LAST HEARD \"never\" if none came this term), and\n" +
			"\"-\" only when the leader could not be asked. HELD SLOTS counts possible-live workers; DRAINED \"yes\"\n" +
			"means no new dispatch goes there (backends drain).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var bes []*adminapi.TBackend
			if err := g.call(cmd, func(ctx context.Context, c *adminapi.LanceMasterServiceClient) (err error) {
				bes, err = c.ListBackends(ctx)
				return err
			}); err != nil {
				return err
			}
			if bes == nil {
				bes = []*adminapi.TBackend{}
			}
			if g.jsonOutput() {
				return printJSON(cmd.OutOrStdout(), bes)
			}
			rows := make([][]string, 0, len(bes))
			for _, b := range bes {
				rows = append(rows, []string{
					formatInt(b.BackendID), b.Address, yesNo(b.Alive), i64(b.ProcessEpoch), lastHeard(cmd.OutOrStdout(), b), i32(b.HeldSlots), drainedWord(b), str(b.Version),
				})
			}
			return printTable(cmd.OutOrStdout(), []string{"ID", "ADDRESS", "ALIVE", "EPOCH", "LAST HEARD", "HELD SLOTS", "DRAINED", "VERSION"}, rows)
		},
	}
}

func newBackendsRemoveCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:         "remove ID|HOST:PORT",
		Annotations: writeCommand(),
		Short:       "Unregister a backend (refused while it holds possible-live slots)",
		Example:     "  lancemaster backends remove 3\n  lancemaster backends remove 10.0.0.21:7301",
		Args:        cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref, err := parseBackendRef(args[0])
			if err != nil {
				return err
			}
			if err := g.call(cmd, func(ctx context.Context, c *adminapi.LanceMasterServiceClient) error {
				return c.RemoveBackend(ctx, ref, g.claim())
			}); err != nil {
				return err
			}
			return g.printRemoved(cmd, "backend", ref)
		},
	}
}

// parseBackendRef accepts a backend's ID or HOST:PORT.
func parseBackendRef(arg string) (string, error) {
	ref := strings.TrimSpace(arg)
	if id, err := strconv.ParseInt(ref, 10, 64); err == nil && id > 0 {
		return ref, nil
	}
	if ref, err := parseHostPort(ref); err == nil {
		return ref, nil
	}
	return "", usagef("backend must be an ID or HOST:PORT, got %q", arg)
}

// parseHostPort accepts HOST:PORT with a port in 1..65535.
func parseHostPort(s string) (string, error) {
	s = strings.TrimSpace(s)
	host, port, err := net.SplitHostPort(s)
	if err != nil || host == "" {
		return "", usagef("address must be HOST:PORT, got %q", s)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return "", usagef("port must be 1..65535, got %q", port)
	}
	return s, nil
}
