package broadcast

import "testing"

// A Broadcast closes every channel handed out before it, and no later one.
func TestBroadcastWakesEveryEarlierWaiter(t *testing.T) {
	var s Signal
	s.Broadcast() // no waiter: nothing to close
	a, b := s.Wait(), s.Wait()
	if a != b {
		t.Fatal("two waits before a broadcast got different channels")
	}
	select {
	case <-a:
		t.Fatal("closed before any broadcast")
	default:
	}
	s.Broadcast()
	<-a
	<-b
	c := s.Wait()
	select {
	case <-c:
		t.Fatal("a wait after the broadcast is already closed")
	default:
	}
}
