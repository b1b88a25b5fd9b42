// Package broadcast is a wake-up for any number of waiters: a Signal's
// Wait returns a channel that its next Broadcast closes.
//
// A waiter takes the channel before it reads the condition it waits for,
// and waits only when the condition does not hold yet: a Broadcast between
// the two closes the channel it holds, so no change is missed.
package broadcast

import "sync"

// Signal is a broadcast. The zero value is ready; it is safe for concurrent
// use. Broadcast with no waiter costs a lock and nothing else.
type Signal struct {
	mu sync.Mutex
	ch chan struct{}
}

// Wait returns a channel closed by the next Broadcast.
func (s *Signal) Wait() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

// Broadcast wakes every waiter: it closes the channel Wait has handed out
// since the last Broadcast, if any.
func (s *Signal) Broadcast() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
}
