package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
)

// backends show, drain and undrain (docs/cli.md, docs/operations.md).

func newBackendsShowCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "show ID|HOST:PORT",
		Short: "Everything the leader knows of one backend, with the jobs holding its slots",
		Long: "Show one backend: its address, whether it is drained (and by whom, when), and the leader's\n" +
			"heartbeat view (alive, process epoch, version, accepting, capacity, last heard), then the jobs\n" +
			"holding its possible-live slots. The heartbeat view is \"-\" when the leader could not be asked.",
		Example: "  lancemaster backends show 3\n  lancemaster backends show 10.0.0.21:7301 -o json",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref, err := parseBackendRef(args[0])
			if err != nil {
				return err
			}
			var be *adminapi.TBackend
			if err := g.call(cmd, func(ctx context.Context, c *adminapi.LanceMasterServiceClient) (err error) {
				be, err = c.ShowBackend(ctx, ref)
				return err
			}); err != nil {
				return err
			}
			if g.jsonOutput() {
				return printJSON(cmd.OutOrStdout(), be)
			}
			return printBackend(cmd.OutOrStdout(), be)
		},
	}
}

func newBackendsDrainCmd(g *globals, drain bool) *cobra.Command {
	use, short, long := "drain ID|HOST:PORT", "Dispatch nothing new to a backend; its running jobs finish",
		"Drain a backend: the leader dispatches no new job to it, while the jobs it runs finish, report\n"+
			"and are reconciled as before, and heartbeats go on. The drain is journaled: a new leader keeps\n"+
			"it. Wait until `backends show` lists no job, then stop or upgrade the backend, and undrain it\n"+
			"(docs/operations.md, rolling backend upgrade)."
	if !drain {
		use, short, long = "undrain ID|HOST:PORT", "Let the leader dispatch to a drained backend again",
			"Undrain a backend: the leader dispatches to it again once it is alive and accepting."
	}
	return &cobra.Command{
		Use:         use,
		Annotations: writeCommand(),
		Short:       short,
		Long:        long,
		Example:     "  lancemaster backends " + use[:len(use)-len(" ID|HOST:PORT")] + " 3",
		Args:        cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref, err := parseBackendRef(args[0])
			if err != nil {
				return err
			}
			req := &adminapi.TDrainBackendRequest{Backend: ref, Drained: drain, Actor: g.actor()}
			var resp *adminapi.TDrainBackendResponse
			if err := g.call(cmd, func(ctx context.Context, c *adminapi.LanceMasterServiceClient) (err error) {
				resp, err = c.DrainBackend(ctx, req)
				return err
			}); err != nil {
				return err
			}
			if g.jsonOutput() {
				return printJSON(cmd.OutOrStdout(), resp)
			}
			be, out := resp.Backend, cmd.OutOrStdout()
			verb := "drained"
			if !drain {
				verb = "undrained"
			}
			switch {
			case resp.GetUnchanged() && drain:
				_, err = fmt.Fprintf(out, "backend %d (%s) was already drained; nothing changed\n", be.BackendID, sanitize(be.Address))
			case resp.GetUnchanged():
				_, err = fmt.Fprintf(out, "backend %d (%s) was not drained; nothing changed\n", be.BackendID, sanitize(be.Address))
			default:
				_, err = fmt.Fprintf(out, "backend %d (%s) %s\n", be.BackendID, sanitize(be.Address), verb)
			}
			if err != nil || !drain {
				return err
			}
			n := len(be.Invocations)
			if n == 0 && be.GetHeldSlots() == 0 {
				_, err = fmt.Fprintln(out, "it holds no slot: it can be stopped now")
			} else {
				_, err = fmt.Fprintf(out, "%d jobs still hold its slots; wait until `lancemaster backends show %d` lists none\n",
					max(n, int(be.GetHeldSlots())), be.BackendID)
			}
			return err
		},
	}
}

func drainedWord(b *adminapi.TBackend) string {
	if b.GetDrained() {
		return "yes"
	}
	return "no"
}

// lastHeard is LAST HEARD: the latest OK heartbeat, "never" when the
// leader heartbeats it without one, "-" when the leader was not asked.
func lastHeard(w io.Writer, b *adminapi.TBackend) string {
	if b.IsSetLastHeardMs() {
		return when(w, b.LastHeardMs)
	}
	if b.IsSetAlive() {
		return "never"
	}
	return dash
}

func printBackend(out io.Writer, b *adminapi.TBackend) error {
	heard := lastHeard(out, b)
	if b.IsSetLastHeardMs() {
		heard = whenAgo(out, b.LastHeardMs)
	}
	drained := drainedWord(b)
	if b.IsSetDrainTimeMs() {
		verb := "drained"
		if !b.GetDrained() {
			verb = "undrained"
		}
		drained += fmt.Sprintf(" (%s %s by %s)", verb, whenAgo(out, b.DrainTimeMs), str(b.DrainActor))
	}
	accepting := yesNo(b.Accepting)
	if r := b.GetNotAcceptingReason(); r != "" && !b.GetAccepting() {
		accepting += " (" + r + ")"
	}
	kvs := [][2]string{
		{"id", formatInt(b.BackendID)},
		{"address", b.Address},
		{"added", whenAgo(out, b.AddTimeMs)},
		{"drained", drained},
		{"alive", yesNo(b.Alive)},
		{"dispatchable", yesNo(b.Dispatchable)},
		{"accepting", accepting},
		{"process epoch", i64(b.ProcessEpoch)},
		{"version", str(b.Version)},
		{"last heard", heard},
		{"slots", fmt.Sprintf("%s held of %s", i32(b.HeldSlots), i32(b.Capacity))},
	}
	if err := printKeyValues(out, kvs); err != nil {
		return err
	}
	if len(b.Invocations) == 0 {
		_, err := fmt.Fprintln(out, "\nno job holds a slot")
		return err
	}
	if _, err := io.WriteString(out, "\n"); err != nil {
		return err
	}
	rows := make([][]string, 0, len(b.Invocations))
	for _, inv := range b.Invocations {
		rows = append(rows, []string{formatInt(inv.JobID), str(inv.MutationState), str(inv.MutationType), str(inv.Target),
			str(inv.IndexName), str(inv.InvocationID), i64(inv.ProcessEpoch), when(out, inv.DispatchTimeMs), str(inv.BuildPhase)})
	}
	return printTable(out, []string{"JOB", "STATE", "MUTATION", "TABLE", "INDEX", "INVOCATION", "EPOCH", "DISPATCHED", "PHASE"}, rows)
}
