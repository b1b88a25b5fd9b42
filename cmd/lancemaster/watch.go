package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
)

// Exit codes of jobs watch: the outcome of the jobs (issue 3, item 9). They
// differ from the other commands' on purpose: 2 is an UNKNOWN outcome here
// (a usage error of watch still exits 2 too), and 4 is watch's own.
// exitUnreachable (3) keeps its meaning: no master answered at the start.
const (
	watchAllCommitted = exitOK // every job COMMITTED
	watchNotCommitted = 1      // some job NOT_COMMITTED or CANCELLED, none UNKNOWN
	watchUnknown      = 2      // some job UNKNOWN
	watchTimedOut     = 4      // --timeout-total passed first
)

const defaultWatchInterval = time.Second

// errWatchTimedOut is the cause of the watch context when --timeout-total
// passes, told apart from a cancelled parent.
var errWatchTimedOut = errors.New("watch timed out")

var watchHeader = []string{"ID", "INDEX", "MUTATION", "STATE", "REFRESH", "RESULT", "BACKEND", "UPDATED"}

func newJobsWatchCmd(g *globals) *cobra.Command {
	var (
		interval, total time.Duration
		consistent      bool
	)
	c := &cobra.Command{
		Use:   "watch ID [ID...]",
		Short: "Follow jobs until every one is terminal and refreshed",
		Long: "Polls the jobs every --interval and shows a table of them until every job is terminal and\n" +
			"refreshed: COMMITTED or NOT_COMMITTED with refresh DONE or NOT_REQUIRED, UNKNOWN with refresh\n" +
			"NOT_REQUIRED or force-released, or CANCELLED. On a terminal the table is redrawn in place;\n" +
			"otherwise it is printed again only when it changed. A lost master connection is retried on the\n" +
			"next tick; a job that does not exist ends the watch.\n\n" +
			"Exit codes: 0 every job COMMITTED; 1 some NOT_COMMITTED or CANCELLED (none UNKNOWN); 2 some\n" +
			"UNKNOWN (and, as for every command, a usage error); 3 no master answered at the start;\n" +
			"4 --timeout-total passed first. An error answer (NOT_FOUND, ...) exits 1.",
		Example: "  lancemaster jobs watch 42 43\n" +
			"  lancemaster jobs watch 42 --interval 5s --timeout-total 2h -o json",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ids, err := parseJobIDs(args)
			if err != nil {
				return err
			}
			if interval <= 0 {
				return usagef("--interval must be positive, got %s", interval)
			}
			if total < 0 {
				return usagef("--timeout-total must not be negative (0 = no limit), got %s", total)
			}
			w := &watcher{
				g: g, cmd: cmd, interval: interval, total: total, consistent: consistent,
				out: cmd.OutOrStdout(), errOut: cmd.ErrOrStderr(), now: time.Now,
			}
			w.live = !g.jsonOutput() && isTerminal(w.out)
			for _, id := range ids {
				w.jobs = append(w.jobs, &watchedJob{id: id})
			}
			return w.run()
		},
	}
	f := c.Flags()
	f.DurationVar(&interval, "interval", defaultWatchInterval, "time between two polls of the jobs")
	f.DurationVar(&total, "timeout-total", 0, "give up (exit 4) after this long; 0 = no limit (--timeout bounds each call)")
	f.BoolVar(&consistent, "consistent", false, "read through the leader instead of the nearest master")
	return c
}

// parseJobIDs parses every ID argument; a repeated id is watched once.
func parseJobIDs(args []string) ([]int64, error) {
	ids := make([]int64, 0, len(args))
	seen := make(map[int64]bool, len(args))
	for _, a := range args {
		id, err := parseJobID(a)
		if err != nil {
			return nil, err
		}
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// isTerminal reports whether w is a terminal that understands ANSI cursor
// movement. A writer may say so itself (tests do).
func isTerminal(w io.Writer) bool {
	if f, ok := w.(*formatWriter); ok {
		w = f.Writer // the output options' wrapper (output.go)
	}
	if t, ok := w.(interface{ IsTerminal() bool }); ok {
		return t.IsTerminal()
	}
	f, ok := w.(*os.File)
	if !ok || os.Getenv("TERM") == "dumb" {
		return false
	}
	return isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())
}

// watchedJob is one job of the watch and the latest view of it.
type watchedJob struct {
	id   int64
	view *adminapi.TJobView // nil until a master has answered for it
	done bool               // terminal and refreshed: never polled again
}

// watcher runs one jobs watch.
type watcher struct {
	g          *globals
	cmd        *cobra.Command
	jobs       []*watchedJob
	interval   time.Duration
	total      time.Duration
	consistent bool
	out        io.Writer
	errOut     io.Writer
	now        func() time.Time
	// live: stdout is a terminal and the output a table, so the table is
	// redrawn in place every tick and status lines are part of it.
	live bool

	deadline time.Time // --timeout-total: the end of the watch; zero if none
	answered bool      // some master has answered (exit 3 only before)
	failure  string    // the last tick's transient failure, "" if none
	printed  string    // not live: the table last printed
	drawn    int       // live: lines of the block on the screen
}

func (w *watcher) run() error {
	ctx := w.cmd.Context()
	if w.total > 0 {
		w.deadline = w.now().Add(w.total)
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadlineCause(ctx, w.deadline, errWatchTimedOut)
		defer cancel()
	}
	// g.call bounds each call by --timeout within this context, so
	// --timeout-total also interrupts a call in flight.
	w.cmd.SetContext(ctx)

	ticker := time.NewTicker(w.interval)
	defer ticker.Stop()
	for {
		err := w.poll(ctx)
		if w.expired(ctx) {
			return w.timedOut()
		}
		if err != nil {
			return err
		}
		if w.allDone() {
			w.draw(fmt.Sprintf("all %d jobs terminal and refreshed", len(w.jobs)))
			return w.finish()
		}
		status := fmt.Sprintf("%d of %d jobs terminal and refreshed; polling every %s (last %s)",
			w.countDone(), len(w.jobs), w.interval, w.now().UTC().Format("15:04:05Z"))
		if w.failure != "" {
			status = fmt.Sprintf("retrying every %s: %s", w.interval, w.failure)
		}
		w.draw(status)
		select {
		case <-ctx.Done():
			if w.expired(ctx) {
				return w.timedOut()
			}
			return ctx.Err()
		case <-ticker.C:
		}
	}
}

// expired reports whether --timeout-total has passed. A call may fail on
// the deadline a moment before the context says so.
func (w *watcher) expired(ctx context.Context) bool {
	return context.Cause(ctx) == errWatchTimedOut || (!w.deadline.IsZero() && !w.now().Before(w.deadline))
}

// poll asks for every job that is not done yet, one call each. A transient
// failure ends the tick (the rest are asked on the next one) and becomes
// the status; an error answer other than a transient one ends the watch.
func (w *watcher) poll(ctx context.Context) error {
	failure := ""
	for _, j := range w.jobs {
		if j.done {
			continue
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var view *adminapi.TJobView
		err := w.g.call(w.cmd, func(ctx context.Context, c *adminapi.LanceMasterServiceClient) (err error) {
			view, err = c.ShowJob(ctx, j.id, w.consistent)
			return err
		})
		if err == nil {
			w.answered = true
			if view == nil || view.JobID != j.id {
				return fmt.Errorf("asked for job %d, the master answered with another view", j.id)
			}
			// Views come from whichever master answers: never go back to
			// an older revision than the one already shown.
			if j.view == nil || view.GetRev() >= j.view.GetRev() {
				j.view = view
			}
			j.done = settled(j.view)
			continue
		}
		if ctx.Err() != nil || w.expired(ctx) {
			return err
		}
		if !w.transient(err) {
			return err
		}
		_, line := describeError(err)
		failure = fmt.Sprintf("job %d: %s", j.id, line)
		break
	}
	w.setFailure(failure)
	return nil
}

// transient reports whether err is retried on the next tick: a master that
// could not be reached or whose connection broke (once some master has
// answered: at the start it is exit 3 as for every command), or an answer
// that says the cluster is briefly unable to serve.
func (w *watcher) transient(err error) bool {
	var ae *adminapi.TAdminError
	if errors.As(err, &ae) {
		w.answered = true
		switch ae.GetCode() {
		case adminapi.TErrorCode_UNAVAILABLE, adminapi.TErrorCode_TIMEOUT, adminapi.TErrorCode_NOT_LEADER:
			return true
		}
		return false
	}
	code, _ := describeError(err)
	return code == exitUnreachable && w.answered
}

// setFailure records the tick's transient failure. Off a terminal, a line
// goes to stderr when failures start and when they stop, not every tick.
func (w *watcher) setFailure(failure string) {
	if !w.live {
		switch {
		case failure != "" && w.failure == "":
			fmt.Fprintf(w.errOut, "watch: %s; retrying every %s\n", failure, w.interval)
		case failure == "" && w.failure != "":
			fmt.Fprintln(w.errOut, "watch: the master answers again")
		}
	}
	w.failure = failure
}

// draw shows the table: on a terminal the block (the table and the status
// line) replaces the previous one; otherwise the table alone is printed
// when it differs from the one printed last. -o json shows no table.
func (w *watcher) draw(status string) {
	if w.g.jsonOutput() {
		return
	}
	table := w.table()
	if !w.live {
		if table == w.printed {
			return
		}
		if w.printed != "" {
			io.WriteString(w.out, "\n")
		}
		io.WriteString(w.out, table)
		w.printed = table
		return
	}
	block := table + oneLine(status) + "\n"
	var b strings.Builder
	if w.drawn > 0 {
		// Back to the first line of the previous block, and clear from
		// there to the end of the screen.
		fmt.Fprintf(&b, "\r\x1b[%dA\x1b[J", w.drawn)
	}
	// Autowrap off while writing, so a line wider than the terminal is cut
	// instead of taking two rows that the next redraw would not move up
	// over; on again in the same write.
	b.WriteString("\x1b[?7l")
	b.WriteString(block)
	b.WriteString("\x1b[?7h")
	io.WriteString(w.out, b.String())
	w.drawn = strings.Count(block, "\n")
}

func (w *watcher) table() string {
	rows := make([][]string, 0, len(w.jobs))
	for _, j := range w.jobs {
		id := strconv.FormatInt(j.id, 10)
		v := j.view
		if v == nil {
			rows = append(rows, []string{id, dash, dash, dash, dash, dash, dash, dash})
			continue
		}
		state := str(v.MutationState)
		if p := v.GetBuildPhase(); p != "" && state == "RUNNING" {
			// The worker's last phase, and its elapsed time when it entered it.
			if v.IsSetBuildElapsedMs() {
				p += " at " + durationMs(v.GetBuildElapsedMs())
			}
			state += " (" + sanitize(p) + ")"
		}
		if v.GetForceReleased() {
			state += " (released)"
		}
		if v.GetRestoreHold() {
			state += " (held)"
		}
		result := str(v.ResultCode)
		if r := v.GetCompletionReason(); r != "" && r != "NONE" {
			result += " (" + r + ")"
		}
		rows = append(rows, []string{id, indexCell(v), str(v.MutationType), state,
			str(v.RefreshState), result, i64(v.BackendID), timeMs(v.UpdateTimeMs)})
	}
	var b strings.Builder
	_ = printTable(&b, watchHeader, rows)
	return b.String()
}

func (w *watcher) allDone() bool { return w.countDone() == len(w.jobs) }

func (w *watcher) countDone() int {
	n := 0
	for _, j := range w.jobs {
		if j.done {
			n++
		}
	}
	return n
}

// finish ends a watch whose jobs are all terminal and refreshed.
func (w *watcher) finish() error {
	if w.g.jsonOutput() {
		if err := printJSON(w.out, w.views()); err != nil {
			return err
		}
	}
	var unknown, failed []string
	for _, j := range w.jobs {
		switch st := mutationState(j.view); st {
		case "UNKNOWN":
			unknown = append(unknown, strconv.FormatInt(j.id, 10))
		case "NOT_COMMITTED", "CANCELLED":
			failed = append(failed, fmt.Sprintf("%d %s", j.id, st))
		}
	}
	if len(failed) > 0 {
		fmt.Fprintf(w.errOut, "watch: %d of %d jobs did not commit: %s\n", len(failed), len(w.jobs), strings.Join(failed, ", "))
	}
	switch {
	case len(unknown) > 0:
		fmt.Fprintf(w.errOut, "watch: %d of %d jobs ended UNKNOWN (the index may or may not have changed): %s\n",
			len(unknown), len(w.jobs), strings.Join(unknown, ", "))
		return &exitCodeError{code: watchUnknown, msg: "some job is UNKNOWN"}
	case len(failed) > 0:
		return &exitCodeError{code: watchNotCommitted, msg: "some job did not commit"}
	}
	return nil
}

// timedOut ends a watch when --timeout-total passed: the current table (or
// the current views), the jobs still open, exit 4.
func (w *watcher) timedOut() error {
	w.draw("watch timed out after " + w.total.String())
	if w.g.jsonOutput() {
		if err := printJSON(w.out, w.views()); err != nil {
			return err
		}
	}
	var open []string
	for _, j := range w.jobs {
		if j.done {
			continue
		}
		if j.view == nil {
			open = append(open, fmt.Sprintf("%d not seen", j.id))
		} else {
			open = append(open, fmt.Sprintf("%d %s/%s", j.id, mutationState(j.view), refreshState(j.view)))
		}
	}
	fmt.Fprintf(w.errOut, "Error: watch timed out after %s: %d of %d jobs not terminal and refreshed (%s)\n",
		w.total, len(open), len(w.jobs), sanitize(strings.Join(open, ", ")))
	return &exitCodeError{code: watchTimedOut, msg: errWatchTimedOut.Error()}
}

// views are the latest views in argument order; a job no master has
// answered for yet is just its id.
func (w *watcher) views() []*adminapi.TJobView {
	out := make([]*adminapi.TJobView, 0, len(w.jobs))
	for _, j := range w.jobs {
		v := j.view
		if v == nil {
			v = &adminapi.TJobView{JobID: j.id}
		}
		out = append(out, v)
	}
	return out
}

// settled reports whether a job is terminal and refreshed: nothing about it
// changes any more without an operator.
func settled(v *adminapi.TJobView) bool {
	if v == nil {
		return false
	}
	rs := refreshState(v)
	switch mutationState(v) {
	case "COMMITTED", "NOT_COMMITTED":
		return rs == "DONE" || rs == "NOT_REQUIRED"
	case "UNKNOWN":
		return rs == "NOT_REQUIRED" || v.GetForceReleased()
	case "CANCELLED":
		return true
	}
	return false
}

// mutationState reads a missing value as UNKNOWN (DESIGN.md §2).
func mutationState(v *adminapi.TJobView) string {
	if s := v.GetMutationState(); s != "" {
		return s
	}
	return "UNKNOWN"
}

// refreshState reads a missing value as REQUIRED (DESIGN.md §2).
func refreshState(v *adminapi.TJobView) string {
	if s := v.GetRefreshState(); s != "" {
		return s
	}
	return "REQUIRED"
}
