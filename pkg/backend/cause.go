package backend

import (
	"fmt"
	"strings"

	"golang.org/x/sys/unix"
)

// workerCause says, in one line for the master's journal and the operator,
// why a worker that ran ended without a trusted result (DESIGN.md §13.3),
// from what the supervisor knows: the cgroup's oom_kill count, the deadline
// or shutdown kill, the signal or exit status, and what was wrong with its
// output. E.g. "killed by the memory limit (cgroup oom_kill)", "killed at
// the deadline", "exited with signal 9 (SIGKILL)", "exited with status 3
// without a result", "exited with status 0 without a result (malformed
// result frame)".
func workerCause(out Outcome) string {
	f := out.Failure
	var cause string
	switch {
	case out.OOMKilled:
		cause, f = "killed by the memory limit (cgroup oom_kill)", strip(f, "oom-killed", "signal ")
	case f == "deadline" || strings.HasPrefix(f, "deadline; "):
		cause, f = "killed at the deadline", strip(f, "deadline")
	case f == "canceled" || strings.HasPrefix(f, "canceled; "):
		cause, f = "killed: the backend shut down", strip(f, "canceled")
	case out.Signal != "":
		cause, f = "exited with signal "+signalText(out.Signal), strip(f, "signal ")
	case out.ExitCode > 0:
		cause, f = fmt.Sprintf("exited with status %d without a result", out.ExitCode), strip(f, "exit status ")
	case out.ExitCode == 0 && f != "":
		cause = "exited with status 0 without a result"
	default:
		cause = "ended without a result"
	}
	if f != "" {
		if strings.HasPrefix(cause, "exited with status 0") {
			return cause + " (" + f + ")"
		}
		return cause + "; " + f
	}
	return cause
}

// describeFailure is workerCause (the name the read-only paths use).
func describeFailure(out Outcome) string { return workerCause(out) }

// strip drops from a supervisor failure the part the cause already says
// (its first "; "-separated element, when it has one of the prefixes).
func strip(f string, prefixes ...string) string {
	head, rest, _ := strings.Cut(f, "; ")
	for _, p := range prefixes {
		if strings.HasPrefix(head, p) {
			return rest
		}
	}
	return f
}

// signalText is "9 (SIGKILL)" for "SIGKILL".
func signalText(name string) string {
	if n := unix.SignalNum(name); n != 0 {
		return fmt.Sprintf("%d (%s)", int(n), name)
	}
	return name
}
