package rpc

import (
	"sync"
	"time"
)

// Idle connection pool of the backend client (Inspect, Heartbeat, Query).
const (
	// DefaultMaxIdlePerAddr bounds the idle connections kept per backend
	// address. Each one holds one of the backend server's connection slots
	// (MaxConns, 256 by default) while idle: three masters keep at most 96,
	// and never more than their own recent concurrency, for at most 3 s.
	// Admission at 64-256 concurrent requests keeps dozens of inspects in
	// flight; with 8 idle, most calls still dialled (measured: 60-80%).
	DefaultMaxIdlePerAddr = 32
	// maxIdleAgeCap bounds how long a connection may sit idle before it is
	// closed. Reuse pays under load, when calls follow each other within
	// milliseconds, and for the 1 s heartbeats; an idle connection should
	// not hold a backend's connection slot for long. The client also keeps
	// it under half its SocketTimeout, after which servers close idle
	// connections.
	maxIdleAgeCap = 2 * time.Second
)

// connPool keeps idle client connections per address: a LIFO stack, so the
// most recently used (the least likely to be stale) is reused first. Only a
// connection whose last call succeeded is put back. A connection idle for
// longer than maxAge, or one the peer closed (see alive), is closed instead
// of reused; a timer closes expired ones while any connection is idle, and
// stops when none is.
//
// Concurrency: safe for concurrent use.
type connPool struct {
	maxIdle int
	maxAge  time.Duration
	alive   func(*Conn) bool // the liveness check before reuse (tests replace it)

	mu    sync.Mutex
	idle  map[string][]idleConn // each list oldest first
	timer *time.Timer           // the janitor, armed while idle is non-empty
	armed bool
}

type idleConn struct {
	c     *Conn
	since time.Time
}

func newConnPool(maxIdle int, maxAge time.Duration) *connPool {
	return &connPool{maxIdle: max(maxIdle, 1), maxAge: max(maxAge, time.Millisecond), alive: alive,
		idle: map[string][]idleConn{}}
}

// get returns an idle connection to addr that looks alive, or nil. The
// liveness check runs outside the lock.
func (p *connPool) get(addr string) *Conn {
	for {
		p.mu.Lock()
		list := p.idle[addr]
		if len(list) == 0 {
			p.mu.Unlock()
			return nil
		}
		ic := list[len(list)-1]
		list[len(list)-1] = idleConn{}
		p.setLocked(addr, list[:len(list)-1])
		p.mu.Unlock()
		if time.Since(ic.since) <= p.maxAge && p.alive(ic.c) {
			return ic.c
		}
		ic.c.Close()
	}
}

// put offers a connection whose last call succeeded for reuse. A closed or
// aborted connection is dropped; when addr already has maxIdle idle
// connections, the oldest is closed.
func (p *connPool) put(c *Conn) {
	if c.raw.isClosed() || c.raw.isAborted() {
		c.Close()
		return
	}
	var oldest *Conn
	p.mu.Lock()
	list := p.idle[c.addr]
	if len(list) >= p.maxIdle {
		oldest = list[0].c
		list = append(list[:0], list[1:]...)
	}
	p.idle[c.addr] = append(list, idleConn{c: c, since: time.Now()})
	p.armLocked()
	p.mu.Unlock()
	if oldest != nil {
		oldest.Close()
	}
}

// armLocked starts the janitor unless it is running.
func (p *connPool) armLocked() {
	if p.armed {
		return
	}
	p.armed = true
	if p.timer == nil {
		p.timer = time.AfterFunc(p.maxAge/2, p.janitor)
		return
	}
	p.timer.Reset(p.maxAge / 2)
}

// janitor closes the connections idle for longer than maxAge, and runs
// again in maxAge/2 while any connection is idle: an idle connection is
// closed at most 1.5 maxAge after its last call.
func (p *connPool) janitor() {
	var closing []*Conn
	p.mu.Lock()
	now := time.Now()
	for addr, list := range p.idle {
		n := 0
		for n < len(list) && now.Sub(list[n].since) > p.maxAge {
			closing = append(closing, list[n].c)
			n++
		}
		clear(list[:n])
		p.setLocked(addr, list[n:])
	}
	p.armed = false
	if len(p.idle) > 0 {
		p.armLocked()
	}
	p.mu.Unlock()
	closeAll(closing)
}

func (p *connPool) setLocked(addr string, list []idleConn) {
	if len(list) == 0 {
		delete(p.idle, addr)
		return
	}
	p.idle[addr] = list
}

// idleCount is how many idle connections addr has.
func (p *connPool) idleCount(addr string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle[addr])
}

func closeAll(cs []*Conn) {
	for _, c := range cs {
		c.Close()
	}
}
