package rpc

import (
	"container/list"
	"encoding/binary"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lancemaster/lancemaster/pkg/certs"
)

// Admission of connections (docs/rpc.md, "Connection slots"). A connection
// goes through two pools:
//
//   - Pending, from accept until it is proven: it holds one of
//     Config.MaxPendingConns pending slots, its reads (the TLS handshake's
//     included, which runs on the first read) and writes are bounded by the
//     handshake deadline (Config.HandshakeTimeout from accept), and it may be
//     closed to make room for a newer connection: when the pending pool is
//     full, Accept closes the oldest unproven connection instead of waiting.
//     A silent or slow caller therefore never holds a slot past the handshake
//     deadline, and never makes Accept wait at all.
//   - Served, once proven: it holds one of Config.MaxConns served slots for
//     its class until it closes (idle connections are closed after the
//     socket timeout, as before). When its class has no free slot, it waits
//     for one, keeping its pending slot (no longer evictable), for at most
//     the socket timeout; then it is closed.
//
// What proves a connection: its first request has arrived whole (the frame
// header and all the bytes it announces). Under mutual TLS that implies a
// completed handshake with a client certificate verified against the CA.
//
// Its class: when the server verifies client certificates, the verified
// certificate's role. Masters and backends each have Config.ReservedConns
// served slots that no other class may take (they also share the rest);
// operators, certificates without a valid role, and every connection of a
// server that does not verify client certificates (plaintext) share what is
// left. In plaintext there is one class: the served pool is shared by
// everyone who sent a request, and the handshake deadline is the only
// protection (against silent and slow callers, not against busy ones).

// connClass is a served connection's class.
type connClass int

const (
	classOther connClass = iota // operators, no valid role, no verified certificate
	classMaster
	classBackend
	numClasses
)

func (c connClass) String() string {
	switch c {
	case classMaster:
		return "master"
	case classBackend:
		return "backend"
	}
	return "other"
}

// classOf is the class of a proven connection's caller; classify is false
// when the server does not verify client certificates.
func classOf(p *Caller, classify bool) connClass {
	if !classify || p == nil {
		return classOther
	}
	switch p.Identity().Role {
	case certs.RoleMaster:
		return classMaster
	case certs.RoleBackend:
		return classBackend
	}
	return classOther
}

// connState is where a connection stands in the admission; guarded by
// admission.mu.
type connState int

const (
	stateUnproven connState = iota // holds a pending slot; evictable
	stateWaiting                   // proven, holds a pending slot, waits for a served one
	stateServed                    // holds a served slot
	stateGone                      // holds nothing (closed, evicted, or given up)
)

// ConnStats describes a Server's connections now, and counts since start.
type ConnStats struct {
	// Pending: accepted, first request not yet arrived whole.
	Pending int
	// Waiting: proven, waiting for a served slot of their class.
	Waiting int
	// Served: holding a served slot; ServedBy by class ("master",
	// "backend", "other").
	Served   int
	ServedBy map[string]int
	// Evicted: unproven connections closed to make room for newer ones.
	Evicted int64
	// Expired: unproven connections closed at the handshake deadline (or at
	// the socket timeout, when that is shorter).
	Expired int64
	// GaveUp: proven connections closed because no served slot freed
	// within the socket timeout.
	GaveUp int64
}

// admission is the two pools of one listener.
//
// Concurrency: enter is called by the accept goroutine; prove by a
// connection's serving goroutine; release from any goroutine.
type admission struct {
	maxPending int
	reserved   [numClasses]int
	sharedCap  int           // served slots not reserved
	wait       time.Duration // longest wait for a served slot (SocketTimeout)
	classify   bool          // the server verifies client certificates

	freed chan struct{} // cap 1: a pending slot was freed (wakes enter)

	mu       sync.Mutex
	unproven list.List // of *servedConn, oldest first
	waiters  list.List // of *servedConn, first come first served
	pending  int       // unproven + waiting
	used     [numClasses]int

	acceptWaiting atomic.Int32 // 1 while enter waits for a pending slot (tests await it)
	peak          atomic.Int32 // most connections ever served at once
	evicted       atomic.Int64
	expired       atomic.Int64
	gaveUp        atomic.Int64
}

func newAdmission(cfg Config, classify bool) *admission {
	cfg = cfg.withDefaults()
	a := &admission{
		maxPending: cfg.MaxPendingConns,
		sharedCap:  cfg.MaxConns,
		wait:       cfg.SocketTimeout,
		classify:   classify,
		freed:      make(chan struct{}, 1),
	}
	if classify {
		a.reserved[classMaster] = cfg.ReservedConns
		a.reserved[classBackend] = cfg.ReservedConns
		a.sharedCap -= 2 * cfg.ReservedConns
	}
	return a
}

// enter gives sc a pending slot, closing the oldest unproven connection when
// the pool is full. Only when every pending connection is proven (waiting
// for a served slot) does it wait, until one leaves or closing is closed.
// It returns false when closing was closed.
func (a *admission) enter(sc *servedConn, closing <-chan struct{}) bool {
	for {
		a.mu.Lock()
		var victim *servedConn
		if a.pending >= a.maxPending {
			if e := a.unproven.Front(); e != nil {
				victim = e.Value.(*servedConn)
				a.unproven.Remove(e)
				victim.state = stateGone
				victim.evicted.Store(true)
				a.pending--
			}
		}
		if a.pending < a.maxPending {
			a.pending++
			sc.state = stateUnproven
			sc.elem = a.unproven.PushBack(sc)
			a.mu.Unlock()
			if victim != nil {
				a.evicted.Add(1)
				victim.Close()
			}
			return true
		}
		a.mu.Unlock()
		a.acceptWaiting.Store(1)
		select {
		case <-a.freed:
			a.acceptWaiting.Store(0)
		case <-closing:
			a.acceptWaiting.Store(0)
			return false
		}
	}
}

// prove moves sc, whose first request has arrived, to a served slot of its
// class, waiting for one up to the socket timeout. It returns false when sc
// was closed meanwhile or (timedOut) no slot freed in time; sc must then be
// closed.
func (a *admission) prove(sc *servedConn) (ok, timedOut bool) {
	class := classOf(sc.peer, a.classify)
	a.mu.Lock()
	if sc.state != stateUnproven {
		a.mu.Unlock()
		return false, false
	}
	a.unproven.Remove(sc.elem)
	sc.class = class
	if a.waitersOf(class) == 0 && a.canTake(class) {
		a.serve(sc)
		a.mu.Unlock()
		return true, false
	}
	sc.state = stateWaiting
	sc.granted = make(chan struct{})
	sc.elem = a.waiters.PushBack(sc)
	a.mu.Unlock()

	t := time.NewTimer(a.wait)
	defer t.Stop()
	select {
	case <-sc.granted:
	case <-t.C:
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	switch sc.state {
	case stateServed:
		return true, false
	case stateWaiting: // the timer fired first
		a.waiters.Remove(sc.elem)
		sc.state = stateGone
		a.pending--
		a.signal()
		a.gaveUp.Add(1)
		return false, true
	}
	return false, false
}

// release gives back whatever sc holds. It is idempotent.
func (a *admission) release(sc *servedConn) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch sc.state {
	case stateUnproven:
		a.unproven.Remove(sc.elem)
		a.pending--
		a.signal()
	case stateWaiting:
		a.waiters.Remove(sc.elem)
		a.pending--
		a.signal()
		close(sc.granted)
	case stateServed:
		a.used[sc.class]--
		a.grant()
	}
	sc.state = stateGone
}

// serve gives sc a served slot of its class: it leaves the pending pool.
// Call with mu held, with canTake(sc.class) true.
func (a *admission) serve(sc *servedConn) {
	a.used[sc.class]++
	sc.state = stateServed
	a.pending--
	a.signal()
	n := int32(0)
	for _, u := range a.used {
		n += int32(u)
	}
	if n > a.peak.Load() {
		a.peak.Store(n)
	}
}

// grant serves the waiters that fit, first come first served. Call with mu
// held.
func (a *admission) grant() {
	for e := a.waiters.Front(); e != nil; {
		next := e.Next()
		if w := e.Value.(*servedConn); a.canTake(w.class) {
			a.waiters.Remove(e)
			a.serve(w)
			close(w.granted)
		}
		e = next
	}
}

// canTake reports whether class may take a served slot now: one of its
// reserved slots, or a shared one. Call with mu held.
func (a *admission) canTake(class connClass) bool {
	if a.used[class] < a.reserved[class] {
		return true
	}
	shared := 0
	for c, u := range a.used {
		shared += max(0, u-a.reserved[c])
	}
	return shared < a.sharedCap
}

func (a *admission) waitersOf(class connClass) int {
	n := 0
	for e := a.waiters.Front(); e != nil; e = e.Next() {
		if e.Value.(*servedConn).class == class {
			n++
		}
	}
	return n
}

// signal wakes enter if it waits for a pending slot. Call with mu held.
func (a *admission) signal() {
	select {
	case a.freed <- struct{}{}:
	default:
	}
}

func (a *admission) stats() ConnStats {
	a.mu.Lock()
	defer a.mu.Unlock()
	st := ConnStats{
		Pending:  a.unproven.Len(),
		Waiting:  a.waiters.Len(),
		ServedBy: make(map[string]int, numClasses),
		Evicted:  a.evicted.Load(),
		Expired:  a.expired.Load(),
		GaveUp:   a.gaveUp.Load(),
	}
	for c, u := range a.used {
		st.Served += u
		st.ServedBy[connClass(c).String()] = u
	}
	return st
}

// firstFrame watches the bytes of a connection until its first frame has
// arrived whole: a 4-byte big-endian length, then that many bytes. A length
// the framed transport refuses (negative, over MaxFrameSize) ends the
// connection before it completes.
type firstFrame struct {
	hdr  [4]byte
	got  int   // header bytes seen
	need int64 // body bytes still to come, once the header is complete
}

// feed reports whether the frame is complete once b has arrived.
func (f *firstFrame) feed(b []byte) bool {
	for f.got < 4 && len(b) > 0 {
		f.hdr[f.got] = b[0]
		f.got++
		b = b[1:]
		if f.got == 4 {
			f.need = int64(binary.BigEndian.Uint32(f.hdr[:]))
		}
	}
	if f.got < 4 {
		return false
	}
	f.need -= int64(len(b))
	return f.need <= 0
}

// clampConn is an accepted connection whose read and write deadlines are
// clamped to the handshake deadline until lift: Thrift's socket sets now +
// SocketTimeout before every read and write, which would otherwise let an
// unproven caller trickle bytes for as long as it likes.
type clampConn struct {
	net.Conn
	limit atomic.Int64 // unix nanoseconds; 0: lifted
}

func newClampConn(conn net.Conn, deadline time.Time) *clampConn {
	c := &clampConn{Conn: conn}
	c.limit.Store(deadline.UnixNano())
	// Until the first read arms one, the handshake deadline bounds the
	// TLS handshake's writes as well.
	conn.SetDeadline(deadline)
	return c
}

func (c *clampConn) clamp(t time.Time) time.Time {
	l := c.limit.Load()
	if l == 0 {
		return t
	}
	if lt := time.Unix(0, l); t.IsZero() || lt.Before(t) {
		return lt
	}
	return t
}

func (c *clampConn) SetDeadline(t time.Time) error      { return c.Conn.SetDeadline(c.clamp(t)) }
func (c *clampConn) SetReadDeadline(t time.Time) error  { return c.Conn.SetReadDeadline(c.clamp(t)) }
func (c *clampConn) SetWriteDeadline(t time.Time) error { return c.Conn.SetWriteDeadline(c.clamp(t)) }

// lift ends the clamp; the next read or write arms the socket timeout.
func (c *clampConn) lift() { c.limit.Store(0) }
