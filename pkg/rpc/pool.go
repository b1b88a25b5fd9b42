package rpc

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lancemaster/lancemaster/pkg/certs"
)

// The backend client's reads (Inspect, Heartbeat, Query, Resolve, JobLog)
// share one connection per backend address, with many calls in flight.
const (
	// DefaultMaxCallsPerAddr bounds the inspect and resolve calls in flight
	// to one backend address: one more waits (within its context) for one
	// of them to end. Heartbeats and queries, a few per second, do not
	// wait (callPooled). An inspect takes about a millisecond, so 32 in
	// flight serve tens of thousands of admissions a second, and a burst of
	// admissions cannot take more than 32 of the backend's handlers.
	DefaultMaxCallsPerAddr = 32
	// maxIdleAgeCap bounds how long a connection may carry no call before
	// it is closed: an idle client should not hold a backend's connection
	// slot for long. The client also keeps it under half its
	// SocketTimeout, after which servers close idle connections.
	maxIdleAgeCap = 2 * time.Second
)

// callSlots bounds the calls in flight per address.
//
// Concurrency: safe for concurrent use. The tables are kept per address
// ever used (a few bytes each; addresses are registered backends).
type callSlots struct {
	n     int
	mu    sync.Mutex
	slots map[string]chan struct{}
}

func newCallSlots(n int) *callSlots {
	return &callSlots{n: max(n, 1), slots: map[string]chan struct{}{}}
}

// acquire takes one of addr's slots, waiting until one is free or ctx ends
// (its error is then returned). Every successful acquire is followed by
// one release.
func (p *callSlots) acquire(ctx context.Context, addr string) error {
	p.mu.Lock()
	sem, ok := p.slots[addr]
	if !ok {
		sem = make(chan struct{}, p.n)
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
func (p *callSlots) release(addr string) {
	p.mu.Lock()
	sem := p.slots[addr]
	p.mu.Unlock()
	<-sem
}

// inUse is how many of addr's slots are taken.
func (p *callSlots) inUse(addr string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.slots[addr])
}

// MuxPool keeps one MuxConn per address, shared by every call to it. A
// connection that failed, or that has carried no call for maxAge (the
// shorter of 2 s and half the SocketTimeout: servers close connections idle
// for their SocketTimeout), is replaced by a fresh one at the next call. A
// janitor, running every maxAge/2 while the pool holds any connection,
// closes those idle for maxAge, so that an idle client does not hold a
// server's connection slot.
//
// Concurrency: safe for concurrent use. Calls to one address that find no
// working connection wait for one dial, not one each.
type MuxPool struct {
	cfg    Config
	roles  []certs.Role
	maxAge time.Duration

	mu     sync.Mutex
	addrs  map[string]*muxSlot
	timer  *time.Timer // the janitor, armed while any address has a connection
	armed  bool
	closed bool
}

// muxSlot is one address's connection. dial is a lock held while the
// connection is replaced (a channel, so that a waiting call honours ctx).
type muxSlot struct {
	dial chan struct{}
	conn atomic.Pointer[MuxConn] // stored with dial held
}

// NewMuxPool returns a pool of connections dialled with cfg (DialMux); with
// Config.Certs, a server's certificate must carry one of roles, when any are
// given.
func NewMuxPool(cfg Config, roles ...certs.Role) *MuxPool {
	cfg = cfg.withDefaults()
	return newMuxPool(cfg, min(maxIdleAgeCap, cfg.SocketTimeout/2), roles...)
}

func newMuxPool(cfg Config, maxAge time.Duration, roles ...certs.Role) *MuxPool {
	return &MuxPool{cfg: cfg, roles: roles, maxAge: max(maxAge, time.Millisecond), addrs: map[string]*muxSlot{}}
}

// Get returns addr's working connection, dialling one when there is none;
// fresh says it was dialled for this call. A failed dial is its *SendError
// (nothing sent); so is a pool already closed.
func (p *MuxPool) Get(ctx context.Context, addr string) (conn *MuxConn, fresh bool, err error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, false, &SendError{Op: OpDial, Addr: addr, Err: net.ErrClosed}
	}
	s, ok := p.addrs[addr]
	if !ok {
		s = &muxSlot{dial: make(chan struct{}, 1)}
		p.addrs[addr] = s
	}
	p.mu.Unlock()
	if c := s.conn.Load(); c != nil && c.claim(time.Now(), p.maxAge) {
		return c, false, nil
	}
	select {
	case s.dial <- struct{}{}:
	case <-ctx.Done():
		return nil, false, &SendError{Op: OpDial, Addr: addr, Err: ctx.Err()}
	}
	defer func() { <-s.dial }()
	if c := s.conn.Load(); c != nil {
		if c.claim(time.Now(), p.maxAge) {
			return c, false, nil // another call replaced it meanwhile
		}
		c.Close() // failed, or idle long enough for the server to be closing it
		s.conn.Store(nil)
	}
	c, err := DialMux(ctx, addr, p.cfg, p.roles...)
	if err != nil {
		return nil, false, err
	}
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed { // Close ran during the dial: this connection would outlive the pool
		c.Close()
		return nil, false, &SendError{Op: OpDial, Addr: addr, Err: net.ErrClosed}
	}
	s.conn.Store(c)
	p.arm()
	return c, true, nil
}

// arm starts the janitor unless it is running.
func (p *MuxPool) arm() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.armed || p.closed {
		return
	}
	p.armed = true
	if p.timer == nil {
		p.timer = time.AfterFunc(p.maxAge/2, p.janitor)
		return
	}
	p.timer.Reset(p.maxAge / 2)
}

// janitor closes the connections that failed or have been idle for maxAge,
// and runs again while any is left. An address whose connection is being
// replaced is looked at next time. A call claims a connection before it
// uses it (MuxConn.claim), so none is closed under a call about to start.
func (p *MuxPool) janitor() {
	left := false
	now := time.Now()
	for _, s := range p.slots() {
		select {
		case s.dial <- struct{}{}:
		default:
			left = true
			continue
		}
		if c := s.conn.Load(); c != nil {
			if c.expired(now, p.maxAge) {
				c.Close()
				s.conn.Store(nil)
			} else {
				left = true
			}
		}
		<-s.dial
	}
	p.mu.Lock()
	p.armed = false
	p.mu.Unlock()
	if left {
		p.arm()
	}
}

func (p *MuxPool) slots() []*muxSlot {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*muxSlot, 0, len(p.addrs))
	for _, s := range p.addrs {
		out = append(out, s)
	}
	return out
}

// Close closes every connection (their calls in flight fail) and makes
// later Gets fail. It is idempotent.
func (p *MuxPool) Close() {
	p.mu.Lock()
	p.closed = true
	if p.timer != nil {
		p.timer.Stop()
	}
	p.mu.Unlock()
	for _, s := range p.slots() {
		s.dial <- struct{}{}
		if c := s.conn.Load(); c != nil {
			c.Close()
			s.conn.Store(nil)
		}
		<-s.dial
	}
}
