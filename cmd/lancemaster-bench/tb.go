package main

import (
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/lancemaster/lancemaster/pkg/rpc/rpctest"
)

// benchTB is the sliver of testing.TB that rpctest.NewFakeBackend uses
// (Helper, Fatalf, Cleanup), so the benchmark can run the same fake backend
// the tests use. Any other method panics through the nil embedded TB.
type benchTB struct {
	testing.TB

	mu       sync.Mutex
	err      error
	cleanups []func()
}

func (t *benchTB) Helper() {}

func (t *benchTB) Cleanup(f func()) {
	t.mu.Lock()
	t.cleanups = append(t.cleanups, f)
	t.mu.Unlock()
}

// Fatalf records the failure and ends the calling goroutine, as testing does.
func (t *benchTB) Fatalf(format string, args ...any) {
	t.mu.Lock()
	t.err = fmt.Errorf(format, args...)
	t.mu.Unlock()
	runtime.Goexit()
}

// cleanup runs the registered cleanups, last first.
func (t *benchTB) cleanup() {
	t.mu.Lock()
	fs := t.cleanups
	t.cleanups = nil
	t.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}

// startFakeBackend starts an rpctest.FakeBackend on 127.0.0.1; stop closes it.
func startFakeBackend() (fb *rpctest.FakeBackend, stop func(), err error) {
	tb := &benchTB{}
	done := make(chan struct{})
	go func() { // Fatalf ends this goroutine, not the caller's
		defer close(done)
		fb = rpctest.NewFakeBackend(tb)
	}()
	<-done
	if tb.err != nil {
		tb.cleanup()
		return nil, nil, tb.err
	}
	return fb, tb.cleanup, nil
}
