package rpc

import "sync"

// The goroutines that run a Server's requests.
//
// A handler's call chain (the middlewares, the generated processor, an
// admission and its inspect) is deeper than the stack a new goroutine starts
// with. Run on a goroutine started for it, every request grew that stack
// once, copying it: about 5% of a master's CPU at 256 clients in the
// admission benchmark (docs/benchmarks.md). So a request runs on a goroutine
// that has run requests before and waits for the next one, when one waits,
// and a new goroutine is started only when none does. The one that became
// idle last is taken first: its stack is the likeliest to be grown still (a
// garbage collection shrinks the stack of a goroutine that waits).

// maxIdleWorkers bounds the goroutines of one Server that wait for a
// request: one that finishes its request while that many wait, ends. A
// burst of more requests than that starts goroutines, which end once the
// burst is over; how many run at once is bounded, as before, by the
// connections and MaxRequestsPerConn.
const maxIdleWorkers = 256

// request is one request frame of a connection, to be served.
type request struct {
	c     *connProcessor
	frame []byte
}

// worker is a goroutine that runs requests; it waits on next when idle.
type worker struct {
	next chan request // capacity 1: a worker is handed one request at a time
}

// workers runs a Server's requests.
//
// Concurrency: run is safe for concurrent use; close must come after the
// last run has returned (Server.Close calls it once the connections'
// goroutines have ended and the handlers with them).
type workers struct {
	mu      sync.Mutex
	idle    []*worker // the last to become idle at the end
	closed  bool
	started int // goroutines started so far
	ended   int // and of those, the ones that ended
	wg      sync.WaitGroup
}

// run serves r on the goroutine that became idle last, or on a new one when
// none is idle. It never blocks.
func (w *workers) run(r request) {
	w.mu.Lock()
	if n := len(w.idle); n > 0 {
		k := w.idle[n-1]
		w.idle[n-1] = nil
		w.idle = w.idle[:n-1]
		w.mu.Unlock()
		k.next <- r // the worker waits for exactly this one: room is certain
		return
	}
	w.started++
	w.wg.Add(1)
	w.mu.Unlock()
	go w.loop(&worker{next: make(chan request, 1)}, r)
}

// loop serves r, then each request handed to k, until the workers close or
// maxIdleWorkers others already wait.
func (w *workers) loop(k *worker, r request) {
	defer w.wg.Done()
	for {
		r.c.serve(r.frame)
		r = request{} // an idle goroutine keeps no frame and no connection
		w.mu.Lock()
		if w.closed || len(w.idle) >= maxIdleWorkers {
			w.ended++
			w.mu.Unlock()
			return
		}
		w.idle = append(w.idle, k)
		w.mu.Unlock()
		var ok bool
		if r, ok = <-k.next; !ok {
			w.mu.Lock()
			w.ended++
			w.mu.Unlock()
			return
		}
	}
}

// close ends the idle goroutines and waits for every goroutine to end.
func (w *workers) close() {
	w.mu.Lock()
	w.closed = true
	idle := w.idle
	w.idle = nil
	w.mu.Unlock()
	for _, k := range idle {
		close(k.next)
	}
	w.wg.Wait()
}

// counts returns how many goroutines wait for a request, how many are
// alive (waiting or serving) and how many were started so far.
func (w *workers) counts() (idle, alive, started int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.idle), w.started - w.ended, w.started
}
