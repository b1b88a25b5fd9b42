package faults

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"time"
)

// control is the fault switchboard every proxy and seam consults: which
// masters are paused, and what happens to reports. Safe for concurrent use;
// waits are woken by every change and by close.
type control struct {
	mu     sync.Mutex
	cond   *sync.Cond
	paused []bool
	closed bool

	reportMode reportMode
	reportP    float64
	rng        *rand.Rand // report decisions; guarded by mu
	counts     map[string]int
}

// reportMode is what the master proxies do to report calls.
type reportMode int

const (
	reportsPass       reportMode = iota
	reportsDropBefore            // the call never reaches the master (the backend retries)
	reportsDropAfter             // the master applies it, the answer is lost (the backend retries)
	reportsDuplicate             // the master receives the call twice
	reportsMisroute              // the call goes to another master (a follower forwards)
	reportsBlackhole             // every report is dropped before the master
)

func (m reportMode) String() string {
	return [...]string{"pass", "drop-before", "drop-after", "duplicate", "misroute", "blackhole"}[m]
}

func newControl(n int, seed uint64) *control {
	c := &control{paused: make([]bool, n), rng: rand.New(rand.NewPCG(seed, 0x5eed)), counts: map[string]int{}}
	c.cond = sync.NewCond(&c.mu)
	return c
}

func (c *control) setPaused(i int, v bool) {
	c.mu.Lock()
	c.paused[i] = v
	c.mu.Unlock()
	c.cond.Broadcast()
}

func (c *control) isPaused(i int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.paused[i]
}

func (c *control) setReports(m reportMode, p float64) {
	c.mu.Lock()
	c.reportMode, c.reportP = m, p
	c.mu.Unlock()
}

func (c *control) close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.cond.Broadcast()
}

func (c *control) count(what string) {
	c.mu.Lock()
	c.counts[what]++
	c.mu.Unlock()
}

func (c *control) snapshotCounts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.counts))
	for k, v := range c.counts {
		out[k] = v
	}
	return out
}

// waitUnpaused blocks while any of nodes (-1 entries ignored) is paused; it
// reports false once the control is closed (teardown).
func (c *control) waitUnpaused(nodes ...int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		if c.closed {
			return false
		}
		blocked := false
		for _, n := range nodes {
			if n >= 0 && n < len(c.paused) && c.paused[n] {
				blocked = true
			}
		}
		if !blocked {
			return true
		}
		c.cond.Wait()
	}
}

// reportAction decides the fate of one report call.
func (c *control) reportAction() reportMode {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.reportMode
	if m == reportsPass || (m != reportsBlackhole && c.rng.Float64() >= c.reportP) {
		return reportsPass
	}
	c.counts["report "+m.String()]++
	return m
}

// misrouteTarget picks another master for a misrouted report.
func (c *control) pick(n int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rng.IntN(n)
}

// connSet tracks a proxy's connections so Close can end every pipe.
type connSet struct {
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

func (s *connSet) add(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		c.Close()
		return false
	}
	if s.conns == nil {
		s.conns = map[net.Conn]struct{}{}
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *connSet) remove(c net.Conn) {
	c.Close()
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

func (s *connSet) closeAll() {
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// proxyListener is what both proxies share: a listener on 127.0.0.1 whose
// connections are tracked (connSet) and served by handle, one goroutine
// each. handle must call conns.wg.Done when it returns; close ends the
// listener and every connection, and waits for their goroutines.
type proxyListener struct {
	ln    net.Listener
	conns connSet
}

func (l *proxyListener) listen(handle func(net.Conn)) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	l.ln = ln
	l.conns.wg.Add(1)
	go l.serve(handle)
	return nil
}

func (l *proxyListener) addr() string { return l.ln.Addr().String() }

func (l *proxyListener) close() {
	l.ln.Close()
	l.conns.closeAll()
}

func (l *proxyListener) serve(handle func(net.Conn)) {
	defer l.conns.wg.Done()
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return
		}
		if !l.conns.add(c) {
			continue
		}
		l.conns.wg.Add(1)
		go handle(c)
	}
}

// maxFrame bounds one Thrift frame the proxy relays (the masters' own
// bound is lower).
const maxFrame = 64 << 20

func readFrame(r io.Reader) ([]byte, error) {
	var h [4]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(h[:])
	if n > maxFrame {
		return nil, errors.New("frame too large")
	}
	b := make([]byte, 4+int(n))
	copy(b, h[:])
	if _, err := io.ReadFull(r, b[4:]); err != nil {
		return nil, err
	}
	return b, nil
}

// methodName reads the Thrift method name of a framed TBinaryProtocol
// message (strict or not); "" when it cannot.
func methodName(frame []byte) string {
	b := frame[4:]
	if len(b) < 8 {
		return ""
	}
	v := binary.BigEndian.Uint32(b)
	if v&0xffff0000 == 0x80010000 {
		n := int(binary.BigEndian.Uint32(b[4:]))
		if n >= 0 && 8+n <= len(b) {
			return string(b[8 : 8+n])
		}
		return ""
	}
	n := int(int32(v))
	if n >= 0 && 4+n <= len(b) {
		return string(b[4 : 4+n])
	}
	return ""
}

func isReport(method string) bool {
	return method == "reportLanceIndexJobResult" || method == "reportLanceIndexJobTermination"
}

// rpcProxy stands in front of one master's Thrift listener: every caller
// (CLI, other masters' forwards, backends' reports) dials the proxy, whose
// address is the master's advertised RPC address. It relays frame by
// frame, holds frames while the master is paused, and applies the report
// faults.
type rpcProxy struct {
	w   *world
	idx int
	proxyListener
}

func startRPCProxy(w *world, idx int) (*rpcProxy, error) {
	p := &rpcProxy{w: w, idx: idx}
	if err := p.listen(p.handle); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *rpcProxy) dial(idx int) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", p.w.realAddr(idx, false), 2*time.Second)
	if err != nil {
		return nil, err
	}
	if !p.conns.add(c) {
		return nil, errors.New("proxy closed")
	}
	return c, nil
}

// roundTrip sends one frame on up and reads the reply frame.
func roundTrip(up net.Conn, frame []byte) ([]byte, error) {
	if _, err := up.Write(frame); err != nil {
		return nil, err
	}
	return readFrame(up)
}

func (p *rpcProxy) handle(client net.Conn) {
	defer p.conns.wg.Done()
	defer p.conns.remove(client)
	var up net.Conn
	defer func() {
		if up != nil {
			p.conns.remove(up)
		}
	}()
	ctl := p.w.ctl
	for {
		frame, err := readFrame(client)
		if err != nil {
			return
		}
		if !ctl.waitUnpaused(p.idx) {
			return
		}
		act := reportsPass
		if isReport(methodName(frame)) {
			act = ctl.reportAction()
		}
		var reply []byte
		switch act {
		case reportsDropBefore, reportsBlackhole:
			return
		case reportsMisroute:
			other := (p.idx + 1 + ctl.pick(nMasters-1)) % nMasters
			if !ctl.waitUnpaused(other) {
				return
			}
			side, err := p.dial(other)
			if err != nil {
				return
			}
			reply, err = roundTrip(side, frame)
			p.conns.remove(side)
			if err != nil {
				return
			}
		default:
			if up == nil {
				if up, err = p.dial(p.idx); err != nil {
					up = nil
					return
				}
			}
			if reply, err = roundTrip(up, frame); err != nil {
				return
			}
			if act == reportsDuplicate {
				if reply, err = roundTrip(up, frame); err != nil {
					return
				}
			}
			if act == reportsDropAfter {
				return
			}
		}
		// A pause that began during the call holds its answer too.
		if !ctl.waitUnpaused(p.idx) {
			return
		}
		if _, err := client.Write(reply); err != nil {
			return
		}
		if id, ok := takenReport(frame, reply); ok {
			p.w.ledger.reportTaken(id, p.w.clock.nowMs())
		}
	}
}

// raftProxy stands in front of one master's raft transport. It tells the
// sending master from the first bytes of a connection (raft's RPC header
// carries the sender's advertised address, which is its raft proxy's), and
// holds every byte from or to a paused master: a paused master neither
// hears nor is heard, while the other two still reach each other.
type raftProxy struct {
	w   *world
	idx int
	proxyListener
}

func startRaftProxy(w *world, idx int) (*raftProxy, error) {
	p := &raftProxy{w: w, idx: idx}
	if err := p.listen(p.handle); err != nil {
		return nil, err
	}
	return p, nil
}

// source finds which master's advertised raft address buf names.
func (p *raftProxy) source(buf []byte) int {
	for j, a := range p.w.raftAdvertise {
		if j != p.idx && bytes.Contains(buf, []byte(a)) {
			return j
		}
	}
	return -1
}

func (p *raftProxy) handle(c net.Conn) {
	defer p.conns.wg.Done()
	defer p.conns.remove(c)
	src := -1
	var head []byte
	tmp := make([]byte, 4096)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	for src < 0 && len(head) < 8192 {
		n, err := c.Read(tmp)
		head = append(head, tmp[:n]...)
		src = p.source(head)
		if err != nil {
			if isTimeout(err) && len(head) > 0 {
				break // forwarded untagged: gated on the destination only
			}
			return
		}
	}
	_ = c.SetReadDeadline(time.Time{})
	if src < 0 {
		p.w.ctl.count("raft conn untagged")
	}
	if !p.w.ctl.waitUnpaused(src, p.idx) {
		return
	}
	up, err := net.DialTimeout("tcp", p.w.realAddr(p.idx, true), 2*time.Second)
	if err != nil {
		return
	}
	if !p.conns.add(up) {
		return
	}
	defer p.conns.remove(up)
	if _, err := up.Write(head); err != nil {
		return
	}
	done := make(chan struct{}, 2)
	pipe := func(dst, srcConn net.Conn) {
		defer func() { done <- struct{}{} }()
		buf := make([]byte, 32<<10)
		for {
			n, err := srcConn.Read(buf)
			if n > 0 {
				if !p.w.ctl.waitUnpaused(src, p.idx) {
					return
				}
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}
	go pipe(up, c)
	go pipe(c, up)
	<-done
	c.Close()
	up.Close()
	<-done
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
