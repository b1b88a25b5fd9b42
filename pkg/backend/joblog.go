package backend

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/job"
)

// Bounds of a build's log (jobs logs, docs/backend.md).
const (
	// MaxJobLogBytes bounds one get_lance_index_job_log answer, and is the
	// default when the request asks for none (max_bytes ≤ 0).
	MaxJobLogBytes = job.MaxJobLogBytes
	// runningLogBytes is what an invocation keeps of its worker's stderr
	// while it runs; finishedLogBytes what it keeps once finished, until
	// its entry is forgotten (many finished invocations are held at once).
	runningLogBytes  = MaxJobLogBytes
	finishedLogBytes = 64 << 10
	// MaxLogTailBytes bounds the log tail a report carries (log_tail).
	MaxLogTailBytes = job.MaxLogTailBytes
)

// jobLog is one invocation's redacted worker stderr, line by line: every
// line it keeps has been scrubbed of the storage option keys and values and
// of the invocation secret (scrubber), made valid UTF-8, and stripped of
// control characters other than tab. It is fed by the supervisor's stderr
// line observer (lines longer than supervisor.MaxStderrLineBytes are left
// out there). Safe for concurrent use: it has its own lock, so the stderr
// reader never waits for the agent's.
type jobLog struct {
	mu      sync.Mutex
	buf     []byte // whole lines, each ending in '\n', oldest first
	limit   int
	dropped bool // older lines were dropped
	scrub   scrubber
}

func newJobLog(scrub scrubber) *jobLog { return &jobLog{limit: runningLogBytes, scrub: scrub} }

// add keeps one line (without its line ending).
func (l *jobLog) add(line []byte) {
	text := cleanLine(l.scrub.scrub(strings.ToValidUTF8(string(line), "?")))
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(append(l.buf, text...), '\n')
	// Trim in steps of a quarter, so a long build does not copy the buffer
	// on every line.
	if len(l.buf) > l.limit+l.limit/4 {
		l.trimLocked(l.limit)
	}
}

// shrink bounds what a finished invocation keeps.
func (l *jobLog) shrink() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.limit = finishedLogBytes
	l.trimLocked(l.limit)
	l.buf = append([]byte(nil), l.buf...) // release the larger array
}

func (l *jobLog) trimLocked(limit int) {
	if len(l.buf) <= limit {
		return
	}
	cut := lineStart(l.buf, len(l.buf)-limit)
	l.buf = append(l.buf[:0], l.buf[cut:]...)
	l.dropped = true
}

// tail returns the newest at most max bytes, starting at a line when one
// starts within them (else at a character), and whether anything older
// exists.
func (l *jobLog) tail(max int) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) <= max {
		return string(l.buf), l.dropped
	}
	return string(l.buf[lineStart(l.buf, len(l.buf)-max):]), true
}

// lineStart is the first line start at or after i (bytes before i are to
// be dropped); without one, the first character start at or after i.
func lineStart(b []byte, i int) int {
	if i <= 0 {
		return 0
	}
	if j := bytes.IndexByte(b[i-1:], '\n'); j >= 0 && i+j < len(b) {
		return i + j
	}
	for i < len(b) && !utf8.RuneStart(b[i]) {
		i++
	}
	return i
}

// cleanLine replaces control characters other than tab by spaces.
func cleanLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r != '\t' && unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
}

// logTail is the log tail a report carries: the newest MaxLogTailBytes of
// the invocation's log, or, when the log holds nothing (a Runner that does
// not feed the line observer), of the Runner's stderr tail, scrubbed.
func logTail(l *jobLog, stderr []byte, scrub scrubber) string {
	if l != nil {
		if s, _ := l.tail(MaxLogTailBytes); s != "" {
			return s
		}
	}
	fallback := newJobLog(scrub)
	for _, line := range strings.Split(strings.TrimRight(string(stderr), "\n"), "\n") {
		if line != "" {
			fallback.add([]byte(strings.TrimSuffix(line, "\r")))
		}
	}
	text, _ := fallback.tail(MaxLogTailBytes)
	return text
}

// GetLanceIndexJobLog answers a build's redacted worker log (jobs logs):
// the newest max_bytes (default and bound MaxJobLogBytes) of what the
// invocation keeps while this process holds it — queued, running, or
// finished and not yet forgotten — with truncated set when older lines
// exist, and for a running build its last phase and the time since its
// worker started. It is fenced like query on the cluster and, when the
// request carries one, the leader term (a higher term raises the fence);
// an invocation this process does not hold answers OK with the state query
// would give (UNKNOWN_INVOCATION or FORGOTTEN) and no log.
func (s *service) GetLanceIndexJobLog(_ context.Context, r *wire.TJobLogRequest) (*wire.TJobLogResponse, error) {
	a := s.a
	if r == nil {
		return &wire.TJobLogResponse{Status: statusf(wire.TStatusCode_INVALID_ARGUMENT, "no request")}, nil
	}
	if r.InvocationID == "" || len(r.InvocationID) > job.MaxInvocationIDBytes {
		return &wire.TJobLogResponse{Status: statusf(wire.TStatusCode_INVALID_ARGUMENT,
			"invocation_id must be 1..%d bytes", job.MaxInvocationIDBytes)}, nil
	}
	max := int(r.GetMaxBytes())
	if max <= 0 || max > MaxJobLogBytes {
		max = MaxJobLogBytes
	}
	term := int64(noLeaderTerm)
	if r.IsSetLeaderTerm() {
		term = r.GetLeaderTerm()
	}
	a.mu.Lock()
	if st := a.fenceClusterLocked(r.GetClusterID(), term); st != nil {
		a.mu.Unlock()
		return &wire.TJobLogResponse{Status: st}, nil
	}
	inv, held := a.table.get(r.InvocationID)
	var state wire.TLanceInvocationState
	var l *jobLog
	var phase string
	var elapsedMs int64
	if !held {
		state = a.table.status(r.InvocationID).State // UNKNOWN_INVOCATION or FORGOTTEN
	} else {
		state, l, phase = inv.state, inv.log, inv.phase
		if inv.state == wire.TLanceInvocationState_RUNNING && !inv.startedAt.IsZero() {
			elapsedMs = a.cfg.Clock().Sub(inv.startedAt).Milliseconds()
		}
	}
	a.mu.Unlock()
	resp := &wire.TJobLogResponse{Status: okStatus(), State: &state}
	if !held {
		return resp, nil
	}
	text, truncated := "", false
	if l != nil {
		text, truncated = l.tail(max)
	}
	resp.Log, resp.Truncated = &text, &truncated
	if state == wire.TLanceInvocationState_RUNNING {
		if phase != "" {
			resp.Phase = &phase
		}
		resp.ElapsedMs = &elapsedMs
	}
	return resp, nil
}
