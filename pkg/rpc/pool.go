package rpc

import (
	"context"
	"sync"
	"time"
)

// Connection pool of the backend client (Inspect, Heartbeat, Query).
const (
	// DefaultMaxConnsPerAddr bounds the inspect calls in flight to one
	// backend address, and the idle connections kept for it: an inspect
	// waits (within its context) for a slot rather than dialling more.
	// Heartbeats and queries, a few per second, do not wait (callPooled). Each one holds one of the
	// backend server's connection slots (MaxConns, 256 by default), so three
	// masters hold at most 96 however many admissions they inspect at once,
	// and a burst of admissions cannot take the slots a dispatch needs.
	// Inspect takes about a millisecond, so 32 connections serve tens of
	// thousands of calls a second; without the bound, 256 concurrent
	// admissions dialled and closed a connection per inspect, ~14% of a
	// master's CPU in the admission benchmark (docs/benchmarks.md).
	DefaultMaxConnsPerAddr = 32
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
//
// Bounded calls take one of maxIdle slots of their address first
// (acquire); a connection is dialled only when none is idle, so the open
// connections per address are at most maxIdle plus the unbounded calls in
// flight (heartbeats and queries, one or two). The slot tables are kept per
// address ever used (a few bytes each; addresses are registered backends).
type connPool struct {
	maxIdle int
	maxAge  time.Duration
	alive   func(*Conn) bool // the liveness check before reuse (tests replace it)

	mu    sync.Mutex
	idle  map[string][]idleConn // each list oldest first
	slots map[string]chan struct{}
	timer *time.Timer // the janitor, armed while idle is non-empty
	armed bool
}

type idleConn struct {
	c     *Conn
	since time.Time
}

func newConnPool(maxIdle int, maxAge time.Duration) *connPool {
	return &connPool{maxIdle: max(maxIdle, 1), maxAge: max(maxAge, time.Millisecond), alive: alive,
		idle: map[string][]idleConn{}, slots: map[string]chan struct{}{}}
}

// acquire takes one of addr's slots, waiting until one is free or ctx ends
// (its error is then returned). Every successful acquire is followed by
// one release.
func (p *connPool) acquire(ctx context.Context, addr string) error {
	p.mu.Lock()
	sem, ok := p.slots[addr]
	if !ok {
		sem = make(chan struct{}, p.maxIdle)
		p.slots[addr] = sem
	}
	p.mu.Unlock()
	select {
	case sem <- struct{}{}:
		return nil
	default:
	}
	select {
	case sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// release gives back a slot taken by acquire.
func (p *connPool) release(addr string) {
	p.mu.Lock()
	sem := p.slots[addr]
	p.mu.Unlock()
	<-sem
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
