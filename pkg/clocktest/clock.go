// Package clocktest holds a fake clock for tests: time that moves only when
// the test moves it.
package clocktest

import (
	"sync"
	"time"
)

// Epoch is a fixed instant tests may start a Clock at
// (1_700_000_000_000 ms after the Unix epoch).
var Epoch = time.UnixMilli(1_700_000_000_000)

// Clock is a fake clock: Now answers the same instant until Advance or Set
// moves it. Safe for concurrent use; its Now method value serves where a
// func() time.Time is wanted.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// New returns a Clock at start.
func New(start time.Time) *Clock { return &Clock{now: start} }

// Now is the clock's instant.
func (c *Clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

// Advance moves the clock forward by d (backward when d is negative).
func (c *Clock) Advance(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.now = c.now.Add(d) }

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) { c.mu.Lock(); defer c.mu.Unlock(); c.now = t }
