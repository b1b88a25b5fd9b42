package testkit

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// Free loopback ports for servers whose addresses must be known before
// they start: a Raft peer list names every member before any of them binds,
// and a restarted master binds its old address again.
//
// A port the kernel picks for ":0" comes from its ephemeral range, which
// is also where every outgoing connection of every process on the machine
// takes its source port. Released and bound again a moment later, such a
// port can be taken in between — CI saw "bind: address already in use" when
// test binaries ran side by side. So ports come from below the ephemeral
// range, where no outgoing connection lands, and each is held by an
// advisory lock (flock on a file under the temp dir) while in use, so two
// processes never hand out the same one. A port is bound once to check that
// no server holds it. Locks die with the process that held them.

// portFloor is the lowest port handed out; ports below it are left to
// well-known services.
const portFloor = 20000

var ports = struct {
	sync.Mutex
	held map[int]*os.File // port → its locked file
}{held: map[int]*os.File{}}

// ReservePorts reserves n distinct free loopback ports until ReleasePorts
// (or the end of the process). Safe for concurrent use.
func ReservePorts(n int) ([]int, error) {
	lo, hi := portRange()
	if hi-lo < n {
		return nil, fmt.Errorf("testkit: no port range below the ephemeral ports (%d–%d)", lo, hi)
	}
	dir := filepath.Join(os.TempDir(), "lancemaster-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, fmt.Errorf("testkit: port locks: %w", err)
	}
	ports.Lock()
	defer ports.Unlock()
	var got []int
	span := hi - lo
	start := rand.IntN(span)
	for i := 0; i < span && len(got) < n; i++ {
		p := lo + (start+i)%span
		if _, mine := ports.held[p]; mine {
			continue
		}
		f, ok := lockPort(dir, p)
		if !ok {
			continue
		}
		if !bindable(p) {
			_ = f.Close()
			continue
		}
		ports.held[p] = f
		got = append(got, p)
	}
	if len(got) < n {
		releaseLocked(got)
		return nil, fmt.Errorf("testkit: only %d of %d free ports in %d–%d", len(got), n, lo, hi)
	}
	return got, nil
}

// ReleasePorts gives reserved ports back; their servers must be closed.
func ReleasePorts(ps []int) {
	ports.Lock()
	defer ports.Unlock()
	releaseLocked(ps)
}

func releaseLocked(ps []int) {
	for _, p := range ps {
		if f, ok := ports.held[p]; ok {
			_ = f.Close() // drops the flock
			delete(ports.held, p)
		}
	}
}

// Ports reserves n free loopback ports for the test; they are released
// when the test and its cleanups registered before this call are done.
func Ports(t testing.TB, n int) []int {
	t.Helper()
	ps, err := ReservePorts(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ReleasePorts(ps) })
	return ps
}

// Addr is "127.0.0.1:port".
func Addr(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

// lockPort takes the process-wide lock of port p, without waiting.
func lockPort(dir string, p int) (*os.File, bool) {
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(p)), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, false
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		return nil, false
	}
	return f, true
}

// bindable reports whether no server listens on 127.0.0.1:p.
func bindable(p int) bool {
	l, err := net.Listen("tcp", Addr(p))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

// portRange is [portFloor, the first ephemeral port) — Linux's default
// ephemeral range starts at 32768.
func portRange() (lo, hi int) {
	lo, hi = portFloor, 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil {
				hi = v
			}
		}
	}
	if hi-lo < 1000 { // an unusual range: stay clear of nothing but the lockers
		lo, hi = portFloor, 1<<16
	}
	return lo, hi
}
