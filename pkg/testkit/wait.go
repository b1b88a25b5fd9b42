// Package testkit holds small helpers the tests of many packages share:
// waiting, boundedly, for a condition another goroutine makes true.
package testkit

import (
	"testing"
	"time"
)

// maxPoll is the longest pause between two looks at a condition.
const maxPoll = 10 * time.Millisecond

// Poll calls cond until it holds or timeout passes, and reports whether it
// held. It looks at once, then after pauses that grow from 1 ms to 10 ms;
// cond must be safe to call from the calling goroutine while others run.
func Poll(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	pause := time.Millisecond
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(pause)
		pause = min(2*pause, maxPoll)
	}
	return true
}

// Eventually polls cond (as Poll does) until it holds; when timeout passes
// first, the test fails, naming what it waited for. Call it from the test's
// goroutine (it may call t.Fatalf).
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Poll(timeout, cond) {
		t.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
}
