package rpc

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/apache/thrift/lib/go/thrift"
	"go.uber.org/zap"
)

// MaxRequestsPerConn bounds the requests a Server runs at once for one
// connection. A client that pipelines more (a MuxConn) waits: the server
// stops reading that connection until one of its requests has been
// answered, and TCP holds the rest.
const MaxRequestsPerConn = 64

// Pipelined serving. A Server reads each request frame whole, then runs it
// in a goroutine of its own and reads the connection's next request at
// once: a client may send many requests on one connection without waiting
// for their replies (MuxConn does), and one slow request does not hold up
// the others. Replies go back as they are ready, each carrying its
// request's sequence id, so they may come out of order; replies ready
// together leave in one write.
//
// A client that waits for each reply before its next request (the
// generated clients over a Conn) sees exactly what a one-at-a-time server
// gives it.

// pipeline is what a Server's connections share: the context every handler
// runs in, cancelled by Close once the connections are closed, the handlers
// in flight, which Close waits for, and the goroutines that run them
// (workers.go), which Close ends.
type pipeline struct {
	log     *zap.Logger
	conf    *thrift.TConfiguration
	base    context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	workers workers
}

func newPipeline(conf *thrift.TConfiguration, log *zap.Logger) *pipeline {
	base, cancel := context.WithCancel(context.Background())
	return &pipeline{log: log, conf: conf, base: base, cancel: cancel}
}

// connProcessorFactory gives each connection its pipelined processor.
type connProcessorFactory struct {
	p  thrift.TProcessor
	pl *pipeline
}

func (f connProcessorFactory) GetProcessor(t thrift.TTransport) thrift.TProcessor {
	sc := t.(*servedConn) // what cappedListener.Accept returns
	return &connProcessor{TProcessor: f.p, pl: f.pl, sc: sc, ctx: context.WithValue(f.pl.base, peerKey{}, sc.peer),
		slots: make(chan struct{}, MaxRequestsPerConn)}
}

// connProcessor serves one connection. The Thrift server calls Process for
// one request at a time, from the connection's goroutine; Process reads the
// request frame and returns once it is handed to a goroutine that runs it. Each request's
// context carries the connection's Caller (authz.go).
type connProcessor struct {
	thrift.TProcessor // the middlewares and the handlers
	pl                *pipeline
	sc                *servedConn
	ctx               context.Context // the pipeline's, with the connection's Caller
	slots             chan struct{}
	out               replyWriter
}

func (c *connProcessor) Process(_ context.Context, in, _ thrift.TProtocol) (bool, thrift.TException) {
	frame, err := readFrame(in.Transport())
	if err != nil {
		if hook := testHookStreamEnded.Load(); hook != nil {
			(*hook)()
		}
		// The requests already read are answered first, as a server that
		// serves one request at a time answers its request before it reads
		// the end of the stream (a client may close its side after its last
		// request): the connection closes once they are all done.
		for range cap(c.slots) {
			c.slots <- struct{}{}
		}
		// As the generated processor fails a message it cannot begin to
		// read: the connection ends, and the server does not log it
		// (servedConn.Read has logged what deserves it).
		return false, thrift.NewTProtocolException(err)
	}
	select {
	case c.slots <- struct{}{}:
	case <-c.pl.base.Done():
		return false, nil
	}
	c.pl.wg.Add(1)
	c.pl.workers.run(request{c, frame})
	return true, nil
}

// testHookStreamEnded, when set (tests only), runs when a connection's
// reader has met the end of its stream.
var testHookStreamEnded atomic.Pointer[func()]

// readFrame reads the rest of the current request frame whole, starting the
// next frame when the last one is done. The framed transport has already
// bounded the frame by MaxFrameSize.
func readFrame(t thrift.TTransport) ([]byte, error) {
	var first [1]byte
	if _, err := io.ReadFull(t, first[:]); err != nil {
		return nil, err
	}
	frame := make([]byte, 1+t.RemainingBytes())
	frame[0] = first[0]
	if _, err := io.ReadFull(t, frame[1:]); err != nil {
		return nil, err
	}
	return frame, nil
}

// serve runs one request through the processor (middlewares, then the
// handler) on in-memory protocols, and queues the reply.
func (c *connProcessor) serve(frame []byte) {
	defer c.pl.wg.Done()
	defer func() { <-c.slots }()
	in := thrift.NewTBinaryProtocolConf(&thrift.TMemoryBuffer{Buffer: bytes.NewBuffer(frame)}, c.pl.conf)
	reply := &thrift.TMemoryBuffer{Buffer: bytes.NewBuffer(make([]byte, 4, 256))} // the frame length first
	out := thrift.NewTBinaryProtocolConf(reply, c.pl.conf)

	ok, err := c.TProcessor.Process(c.ctx, in, out)

	b := reply.Bytes()
	if size := len(b) - 4; size > int(c.pl.conf.GetMaxFrameSize()) {
		// The one-at-a-time server's framed transport refused such a reply
		// and the connection ended; so does this one.
		c.pl.log.Warn("rpc: reply larger than the frame limit; closing the connection", zap.Int("bytes", size))
		c.sc.Close()
		return
	} else if size > 0 {
		binary.BigEndian.PutUint32(b, uint32(size))
	} else {
		b = nil
	}
	// A request the processor could not read (ok false, after it answered
	// the error) ends the connection, as it did one request at a time; an
	// UNKNOWN_METHOD answer does not.
	var ae thrift.TApplicationException
	end := !ok && !(errors.As(err, &ae) && ae.TypeId() == thrift.UNKNOWN_METHOD)
	c.out.send(c.sc, b, end)
}

// replyWriter sends a connection's replies: whoever queues a reply while no
// write is running writes everything queued, again and again until the
// queue is empty, so replies that are ready together leave in one write.
//
// Concurrency: send is safe for concurrent use; at most one write runs.
type replyWriter struct {
	mu      sync.Mutex
	queued  []byte
	spare   []byte
	writing bool
	end     bool // close the connection once the queue is written
	broken  bool // a write failed: the connection is closed
}

// send queues frame (nil: nothing to send) and, with end, closes the
// connection once everything queued is written.
func (w *replyWriter) send(sc *servedConn, frame []byte, end bool) {
	w.mu.Lock()
	if w.broken {
		w.mu.Unlock()
		return
	}
	w.queued = append(w.queued, frame...)
	w.end = w.end || end
	if w.writing {
		w.mu.Unlock()
		return
	}
	w.writing = true
	w.mu.Unlock()
	// Let the replies that are about to queue do so: they leave in this
	// write rather than in a write each.
	runtime.Gosched()
	w.mu.Lock()
	for len(w.queued) > 0 && !w.broken {
		buf := w.queued
		w.queued, w.spare = w.spare[:0], nil
		w.mu.Unlock()
		_, err := sc.TSocket.Write(buf)
		w.mu.Lock()
		if cap(buf) <= maxKeptWriteBuf {
			w.spare = buf[:0]
		}
		w.broken = err != nil
	}
	w.writing = false
	closeNow := w.broken || w.end
	if closeNow {
		w.broken, w.queued = true, nil
	}
	w.mu.Unlock()
	if closeNow {
		sc.Close()
	}
}
