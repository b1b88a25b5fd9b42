package clocktest

import (
	"sync"
	"testing"
	"time"
)

func TestClockMovesOnlyWhenTold(t *testing.T) {
	c := New(Epoch)
	if !c.Now().Equal(Epoch) || !c.Now().Equal(c.Now()) {
		t.Fatalf("Now = %v, want %v until moved", c.Now(), Epoch)
	}
	c.Advance(90 * time.Second)
	if got := c.Now().Sub(Epoch); got != 90*time.Second {
		t.Fatalf("after Advance: %v past the start, want 90s", got)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	c.Set(at)
	if !c.Now().Equal(at) {
		t.Fatalf("after Set: %v, want %v", c.Now(), at)
	}
}

func TestClockIsSafeForConcurrentUse(t *testing.T) {
	c := New(Epoch)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				c.Advance(time.Millisecond)
				_ = c.Now()
			}
		}()
	}
	wg.Wait()
	if got := c.Now().Sub(Epoch); got != 800*time.Millisecond {
		t.Fatalf("%v past the start, want 800ms (an Advance was lost)", got)
	}
}
