//go:build unix

package rpc

import (
	"crypto/tls"
	"errors"
	"syscall"
)

// alive reports whether an idle connection can carry a request: the peer
// has not closed it (no EOF or reset pending) and has sent nothing unasked
// (an idle Thrift connection never has bytes to read). It peeks without
// blocking and without consuming, below TLS when there is TLS. When the
// socket cannot be inspected it reports true; a call on a connection that
// turns out dead then fails before any response byte (see the stale retry
// of the backend client).
func alive(c *Conn) bool {
	if c.raw.isClosed() {
		return false
	}
	nc := c.raw.Conn
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	ok = false
	err = rc.Read(func(fd uintptr) bool {
		var b [1]byte
		for {
			_, _, rerr := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			if errors.Is(rerr, syscall.EINTR) {
				continue
			}
			// No error: unasked bytes (out of step) or EOF (the peer
			// closed). EAGAIN: nothing to read, alive. Anything else
			// (a reset): dead.
			ok = errors.Is(rerr, syscall.EAGAIN) || errors.Is(rerr, syscall.EWOULDBLOCK)
			return true // never wait for readiness
		}
	})
	return err == nil && ok
}
