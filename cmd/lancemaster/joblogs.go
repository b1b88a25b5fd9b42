package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/pkg/job"
)

// maxJobLogBytes is the largest --max-bytes (the masters' and backends' bound).
const maxJobLogBytes = job.MaxJobLogBytes

func newJobsLogsCmd(g *globals) *cobra.Command {
	var maxBytes int
	c := &cobra.Command{
		Use:   "logs ID [--max-bytes N]",
		Short: "Print the redacted log of a job's worker",
		Long: "Prints the worker's stderr of the job's current dispatch, redacted of storage credentials and\n" +
			"the invocation secret: from the backend while it still holds the invocation (running, or\n" +
			"finished and not yet dropped), else the last 4 KiB the journal kept from the worker's report.\n" +
			"The log goes to stdout; where it came from (backend, journal or none), why, and for a running\n" +
			"build its phase and elapsed time go to stderr. -o json prints the whole answer on stdout.",
		Example: "  lancemaster jobs logs 42\n  lancemaster jobs logs 42 --max-bytes 8192 > job42.log",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseJobID(args[0])
			if err != nil {
				return err
			}
			if maxBytes < 0 || maxBytes > maxJobLogBytes {
				return usagef("--max-bytes must be 1..%d (0 = all the backend keeps, up to %d), got %d", maxJobLogBytes, maxJobLogBytes, maxBytes)
			}
			var logs *adminapi.TJobLogs
			if err := g.call(cmd, func(ctx context.Context, c *adminapi.LanceMasterServiceClient) (err error) {
				logs, err = c.JobLogs(ctx, id, int32(maxBytes))
				return err
			}); err != nil {
				return err
			}
			if logs == nil {
				return fmt.Errorf("the master answered no log")
			}
			if g.jsonOutput() {
				return printJSON(cmd.OutOrStdout(), logs)
			}
			if _, err := io.WriteString(cmd.OutOrStdout(), printableLog(logs.Log)); err != nil {
				return err
			}
			fmt.Fprintln(cmd.ErrOrStderr(), logSummary(id, logs))
			return nil
		},
	}
	c.Flags().IntVar(&maxBytes, "max-bytes", 0, "print at most the newest N bytes (0 = up to 256 KiB)")
	return c
}

// printableLog keeps the log's lines and tabs but no other control
// character (a worker's output must not drive the terminal).
func printableLog(s string) string {
	return strings.Map(func(r rune) rune {
		if r != '\n' && r != '\t' && unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
}

// logSummary is the stderr line: the source, truncation, phase and note.
func logSummary(id int64, l *adminapi.TJobLogs) string {
	parts := []string{fmt.Sprintf("job %d: log from %s", id, sanitize(l.Source))}
	if l.GetTruncated() {
		parts = append(parts, "older lines not shown")
	}
	if p := l.GetPhase(); p != "" {
		ph := "phase " + sanitize(p)
		if l.IsSetElapsedMs() {
			ph += " after " + durationMs(l.GetElapsedMs())
		}
		parts = append(parts, ph)
	}
	if n := l.GetNote(); n != "" {
		parts = append(parts, sanitize(n))
	}
	return strings.Join(parts, "; ")
}

// durationMs shows milliseconds as a duration rounded to what a person reads.
func durationMs(ms int64) string {
	d := time.Duration(ms) * time.Millisecond
	switch {
	case d >= time.Minute:
		return d.Round(time.Second).String()
	case d >= time.Second:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.String()
}
