package testkit

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestPollWaitsForAnotherGoroutine(t *testing.T) {
	var done atomic.Bool
	go func() { time.Sleep(20 * time.Millisecond); done.Store(true) }()
	if !Poll(10*time.Second, done.Load) {
		t.Fatal("Poll gave up on a condition that came true")
	}
}

func TestPollGivesUpAfterTheTimeout(t *testing.T) {
	var looks atomic.Int64
	start := time.Now()
	if Poll(30*time.Millisecond, func() bool { looks.Add(1); return false }) {
		t.Fatal("Poll reported a condition that never held")
	}
	if d := time.Since(start); d < 30*time.Millisecond {
		t.Fatalf("gave up after %v, before the 30ms timeout", d)
	}
	if looks.Load() < 2 {
		t.Fatalf("looked %d times, want a look after the first pause", looks.Load())
	}
}

// fatalTB records Fatalf instead of ending the test.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper()                        {}
func (f *fatalTB) Fatalf(format string, _ ...any) { f.msg = format }

func TestEventuallyFailsTheTestOnTimeout(t *testing.T) {
	tb := &fatalTB{TB: t}
	Eventually(tb, time.Millisecond, "never", func() bool { return false })
	if tb.msg == "" {
		t.Fatal("Eventually did not fail the test when the condition never held")
	}
	tb.msg = ""
	Eventually(tb, time.Second, "at once", func() bool { return true })
	if tb.msg != "" {
		t.Fatalf("Eventually failed the test for a condition that held: %s", tb.msg)
	}
}
