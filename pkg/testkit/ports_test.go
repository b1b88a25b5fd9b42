package testkit

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
)

func TestPortsAreDistinctFreeAndBelowTheEphemeralRange(t *testing.T) {
	lo, hi := portRange()
	var mu sync.Mutex
	seen := map[int]bool{}
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ps, err := ReservePorts(25)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for _, p := range ps {
				if seen[p] {
					t.Errorf("port %d handed out twice", p)
				}
				seen[p] = true
				if p < lo || p >= hi {
					t.Errorf("port %d outside %d–%d", p, lo, hi)
				}
			}
		}()
	}
	wg.Wait()
	for p := range seen {
		l, err := net.Listen("tcp", Addr(p))
		if err != nil {
			t.Fatalf("reserved port %d is not free: %v", p, err)
		}
		l.Close()
	}
}

// A port another process holds the lock of is never handed out (another
// open file description of the lock file stands in for that process).
func TestPortsSkipAPortLockedElsewhere(t *testing.T) {
	ps := Ports(t, 1)
	ReleasePorts(ps)
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "lancemaster-ports", strconv.Itoa(ps[0])), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatalf("the released port's lock is still held: %v", err)
	}
	dir := filepath.Join(os.TempDir(), "lancemaster-ports")
	if g, ok := lockPort(dir, ps[0]); ok {
		g.Close()
		t.Fatalf("port %d, locked by another holder, could be reserved", ps[0])
	}
}

// A port some server listens on is skipped.
func TestPortsSkipAPortInUse(t *testing.T) {
	ps := Ports(t, 1)
	ReleasePorts(ps)
	l, err := net.Listen("tcp", Addr(ps[0]))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if bindable(ps[0]) {
		t.Fatalf("port %d has a listener but looks free", ps[0])
	}
}
