package main

import (
	"bytes"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
)

// --wait on the commands that admit a job: watch it until it is terminal
// and refreshed, with the exit codes of `jobs watch` (0 COMMITTED, 1
// NOT_COMMITTED or CANCELLED, 2 UNKNOWN, 4 --timeout-total).

const flagWait = "wait"

func addWaitFlags(jobs *cobra.Command) {
	for _, c := range jobs.Commands() {
		switch c.Name() {
		case "create-index", "drop-index", "optimize":
			c.Flags().Bool(flagWait, false, "follow the job until it is terminal and refreshed, exiting as `jobs watch` does")
			c.Flags().Duration("timeout-total", 0, "with --wait: give up (exit 4) after this long; 0 = no limit")
		}
	}
}

// waitAfterAdmit runs the watch of an admitted job when --wait was given;
// it reports whether it did (and the watch's end).
func (g *globals) waitAfterAdmit(cmd *cobra.Command, resp *adminapi.TAdmitResponse) (bool, error) {
	wait, _ := cmd.Flags().GetBool(flagWait)
	if !wait || resp.GetNoop() || !resp.IsSetJobID() {
		return false, nil
	}
	total, _ := cmd.Flags().GetDuration("timeout-total")
	if total < 0 {
		return true, usagef("--timeout-total must not be negative (0 = no limit), got %s", total)
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "job %d admitted; waiting for it\n", resp.GetJobID())
	w := &watcher{g: g, cmd: cmd, interval: defaultWatchInterval, total: total,
		out: cmd.OutOrStdout(), errOut: cmd.ErrOrStderr(), now: time.Now}
	w.live = !g.jsonOutput() && isTerminal(w.out)
	w.jobs = []*watchedJob{{id: resp.GetJobID()}}
	return true, w.run()
}

// renderJobs is what printJobs writes to the command's output, with
// exact times when exact.
func (g *globals) renderJobs(cmd *cobra.Command, jobs []*adminapi.TJobView, exact bool) (string, error) {
	out := cmd.OutOrStdout()
	var b bytes.Buffer
	fw := formatOf(out)
	fw.Writer, fw.verbose = &b, fw.verbose || exact
	cmd.SetOut(&fw)
	err := g.printJobs(cmd, jobs)
	cmd.SetOut(out)
	return b.String(), err
}

// watchJobList is `jobs list --watch`: the list is fetched every interval
// and printed again only when it changed (a blank line between two
// prints), until the command's context ends (an interrupt) or total
// passes. The first fetch's error ends the command; later ones are warned
// about and retried on the next tick.
func (g *globals) watchJobList(cmd *cobra.Command, fetch func() ([]*adminapi.TJobView, *int64, error), interval, total time.Duration) error {
	if err := checkWatchFlags(interval, total); err != nil {
		return err
	}
	var end <-chan time.Time
	if total > 0 {
		t := time.NewTimer(total)
		defer t.Stop()
		end = t.C
	}
	out := cmd.OutOrStdout()
	var last string
	for first := true; ; first = false {
		jobs, _, err := fetch()
		switch {
		case err != nil && first:
			return err
		case err != nil:
			fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s (retrying)\n", oneLine(err.Error()))
		default:
			// The list changed when its exact rendering did: ages (3m)
			// move on their own.
			exact, err := g.renderJobs(cmd, jobs, true)
			if err != nil {
				return err
			}
			if exact != last {
				s, err := g.renderJobs(cmd, jobs, false)
				if err != nil {
					return err
				}
				if last != "" {
					fmt.Fprintln(out)
				}
				if _, err := io.WriteString(out, s); err != nil {
					return err
				}
				last = exact
			}
		}
		t := time.NewTimer(interval)
		select {
		case <-cmd.Context().Done():
			t.Stop()
			return nil
		case <-end:
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}
