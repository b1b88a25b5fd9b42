package main

import (
	"strconv"
	"strings"
	"sync"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// maxLogLines bounds what a logCapture keeps: the first warnings explain a
// failed load point; thousands of repeats would not.
const maxLogLines = 20

// logCapture keeps the first warnings and errors the masters (and their raft)
// log during a load point, so that a request answered INTERNAL ("see the
// master's log") can be explained in the report.
type logCapture struct {
	mu      sync.Mutex
	lines   []string
	dropped int
}

// Write implements zapcore.WriteSyncer; zap writes one entry per call.
func (c *logCapture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.lines) < maxLogLines {
		c.lines = append(c.lines, strings.TrimRight(string(p), "\n"))
	} else {
		c.dropped++
	}
	return len(p), nil
}

func (c *logCapture) Sync() error { return nil }

// logger returns a zap logger writing warnings and above to c.
func (c *logCapture) logger() *zap.Logger {
	enc := zap.NewDevelopmentEncoderConfig()
	return zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(enc), c, zap.WarnLevel))
}

// reset forgets what was captured (the start-up election's warnings).
func (c *logCapture) reset() {
	c.mu.Lock()
	c.lines, c.dropped = nil, 0
	c.mu.Unlock()
}

// snapshot returns the captured lines (and how many more were dropped).
func (c *logCapture) snapshot() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := append([]string(nil), c.lines...)
	if c.dropped > 0 {
		out = append(out, "... and "+strconv.Itoa(c.dropped)+" more")
	}
	return out
}
