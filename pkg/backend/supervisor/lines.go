package supervisor

import (
	"bytes"
	"context"
	"sync"
)

// MaxStderrLineBytes bounds one line handed to a stderr line observer; a
// longer line is skipped whole (never cut: a cut announcement could parse
// as another).
const MaxStderrLineBytes = 4096

type stderrLinesKey struct{}

// WithStderrLines returns a context under which Run hands fn every line the
// worker writes on stderr, as it arrives: without its line ending, at most
// MaxStderrLineBytes, scrubbed of the request's storage option values. fn
// is called from one goroutine per Run, in order, and never after Run
// returns; while it runs the worker's stderr is not read, so it must be
// quick (a pipe buffer of output may wait meanwhile). The stderr ring is
// fed as before.
func WithStderrLines(ctx context.Context, fn func(line []byte)) context.Context {
	return context.WithValue(ctx, stderrLinesKey{}, fn)
}

// StderrLines returns the observer WithStderrLines put in ctx, or nil (a
// fake Runner uses it to play a worker's stderr).
func StderrLines(ctx context.Context) func(line []byte) {
	fn, _ := ctx.Value(stderrLinesKey{}).(func([]byte))
	return fn
}

// lineWriter splits what is written into lines for an observer.
type lineWriter struct {
	mu       sync.Mutex // held while fn runs; stop waits for it
	stopped  bool
	fn       func([]byte)
	secrets  [][]byte
	buf      []byte
	skipping bool // the current line is longer than MaxStderrLineBytes
}

func (l *lineWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			l.add(p)
			break
		}
		l.add(p[:i])
		l.flush()
		p = p[i+1:]
	}
	return n, nil
}

func (l *lineWriter) add(p []byte) {
	if l.skipping {
		return
	}
	if len(l.buf)+len(p) > MaxStderrLineBytes {
		l.skipping, l.buf = true, l.buf[:0]
		return
	}
	l.buf = append(l.buf, p...)
}

// flush hands the current line to the observer (also called at EOF for a
// last line without a newline).
func (l *lineWriter) flush() {
	if !l.skipping && len(l.buf) > 0 {
		line := append([]byte(nil), scrub(bytes.TrimSuffix(l.buf, []byte{'\r'}), l.secrets, false)...)
		l.mu.Lock()
		if !l.stopped {
			l.fn(line)
		}
		l.mu.Unlock()
	}
	l.buf, l.skipping = l.buf[:0], false
}

// stop returns once no call of the observer is in progress; none follows.
// Safe on a nil *lineWriter.
func (l *lineWriter) stop() {
	if l == nil {
		return
	}
	l.mu.Lock()
	l.stopped = true
	l.mu.Unlock()
}
