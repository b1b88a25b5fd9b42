package main

import (
	"context"
	"sync"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/pkg/rpc"
)

// benchConns is how many connections a load point's clients share, as the
// etcd section's clients share 16 gRPC connections: client g calls over
// connection g mod benchConns, with the calls of the others in flight.
const benchConns = 16

// sharedConns are the connections to one master that a load point's
// clients share (rpc.MuxConn: many calls in flight on each). A connection
// that failed is dialled again by the next call over it; follow moves them
// all to another master (a NOT_LEADER answer naming the leader).
//
// Concurrency: safe for concurrent use.
type sharedConns struct {
	mu    sync.Mutex
	addr  string
	conns [benchConns]*rpc.MuxConn
}

func newSharedConns(addr string) *sharedConns { return &sharedConns{addr: addr} }

// client returns an admin API client for one call of client g, on g's
// connection, dialled when there is none or it failed. The connection is
// shared; the generated client is not (it keeps its last call's response
// metadata), so each call gets its own.
func (s *sharedConns) client(ctx context.Context, g int) (*adminapi.LanceMasterServiceClient, error) {
	i := g % benchConns
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.conns[i]; c == nil || c.Err() != nil {
		c, err := rpc.DialMux(ctx, s.addr, rpc.DefaultConfig())
		if err != nil {
			return nil, err
		}
		s.conns[i] = c
	}
	return adminapi.NewLanceMasterServiceClient(s.conns[i]), nil
}

// follow points the connections at addr: the ones open to another master
// are closed.
func (s *sharedConns) follow(addr string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if addr == s.addr {
		return
	}
	s.addr = addr
	s.closeLocked()
}

func (s *sharedConns) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closeLocked()
}

func (s *sharedConns) closeLocked() {
	for i, c := range s.conns {
		if c != nil {
			c.Close()
		}
		s.conns[i] = nil
	}
}
