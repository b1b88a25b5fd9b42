package rpc

import (
	"sync"
	"testing"
	"time"
)

// Requests that come one after another run on the goroutine the first one
// started: a goroutine that has served a request waits for the next.
func TestRequestsRunOnAnIdleGoroutine(t *testing.T) {
	s := startBackend(t, holdInspects(func(int32, int) bool { return false }).backend(), DefaultConfig())
	m := dialMux(t, s.Addr().String(), DefaultConfig())
	for i := 1; i <= 20; i++ {
		if v, err := inspectVersion(testCtx(t), m, i); err != nil || v != int64(i) {
			t.Fatalf("call %d: version %d, %v", i, v, err)
		}
		// The reply leaves before its goroutine is idle again.
		waitFor(t, "the request's goroutine to wait for the next", func() bool {
			idle, _, _ := s.pl.workers.counts()
			return idle == 1
		})
	}
	if _, _, started := s.pl.workers.counts(); started != 1 {
		t.Fatalf("20 requests one after another started %d goroutines, want 1", started)
	}
}

// A burst of more requests at once than maxIdleWorkers runs each on a
// goroutine of its own; once it is over, maxIdleWorkers of them wait and the
// rest have ended. Close ends those that wait, and returns once they have.
func TestABurstLeavesMaxIdleWorkersWaitingAndCloseEndsThem(t *testing.T) {
	const conns = maxIdleWorkers/MaxRequestsPerConn + 1
	const n = conns * MaxRequestsPerConn // every connection's slots taken
	h := holdInspects(nil)
	s := startBackend(t, h.backend(), DefaultConfig())
	var wg sync.WaitGroup
	for range conns {
		m := dialMux(t, s.Addr().String(), DefaultConfig())
		for i := 1; i <= MaxRequestsPerConn; i++ {
			wg.Go(func() {
				if v, err := inspectVersion(testCtx(t), m, i); err != nil || v != int64(i) {
					t.Errorf("call %d: version %d, %v", i, v, err)
				}
			})
		}
	}
	waitFor(t, "every request to be in its handler", func() bool { return h.entered.Load() == n })
	close(h.release)
	wg.Wait()
	waitFor(t, "the burst's goroutines to wait or end", func() bool {
		idle, alive, _ := s.pl.workers.counts()
		return idle == alive
	})
	if idle, _, started := s.pl.workers.counts(); idle != maxIdleWorkers || started != n {
		t.Fatalf("after a burst of %d requests at once: %d goroutines started, %d wait; want %d and %d",
			n, started, idle, n, maxIdleWorkers)
	}

	closed := make(chan struct{})
	go func() {
		s.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return within 10 s: the idle goroutines were not ended")
	}
	if idle, alive, _ := s.pl.workers.counts(); idle != 0 || alive != 0 {
		t.Fatalf("after Close: %d goroutines alive, %d of them listed idle", alive, idle)
	}
}
