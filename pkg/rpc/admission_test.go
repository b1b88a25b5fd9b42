package rpc

import (
	"context"
	"testing"

	"github.com/lancemaster/lancemaster/gen-go/wire"
)

// heldConn dials a backend server, makes a heartbeat on the connection and
// returns it open (proven: it holds a served slot), closed when the test
// ends.
func heldConn(t *testing.T, addr string, cfg Config) *Conn {
	t.Helper()
	ctx := testCtx(t)
	c, err := Dial(ctx, addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := wire.NewLanceBackendServiceClient(c.Client()).Heartbeat(ctx, &wire.THeartbeatRequest{MasterID: "m"}); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestReservedConnsDefaultsAndBounds(t *testing.T) {
	for _, c := range []struct{ max, reserved, want int }{
		{256, 0, 64}, {4, 0, 1}, {2, 0, 0}, {1, 0, 0}, {256, 200, 127}, {5, 2, 2}, {4, 2, 1},
	} {
		got := Config{MaxConns: c.max, ReservedConns: c.reserved}.withDefaults().ReservedConns
		if got != c.want {
			t.Errorf("MaxConns %d, ReservedConns %d: %d reserved per role, want %d", c.max, c.reserved, got, c.want)
		}
	}
	d := Config{}.withDefaults()
	if d.HandshakeTimeout != DefaultHandshakeTimeout || d.MaxPendingConns != DefaultMaxPendingConns || d != DefaultConfig().withDefaults() {
		t.Fatalf("defaults: %+v", d)
	}
}

// A proven connection waiting for a served slot is never evicted: only when
// every pending slot is held by one does Accept wait, and it takes the next
// connection as soon as one of them is served.
func TestProvenConnectionsWaitingForASlotAreNotEvicted(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxConns, cfg.MaxPendingConns = 1, 2
	s := startBackend(t, &testBackend{}, cfg)
	addr := s.Addr().String()
	held := heldConn(t, addr, cfg)
	done := make(chan error, 2)
	for range 2 {
		go func() { // one connection, closed after its call (no pool)
			conn, err := Dial(context.Background(), addr, cfg)
			if err == nil {
				_, err = wire.NewLanceBackendServiceClient(conn.Client()).Heartbeat(context.Background(), &wire.THeartbeatRequest{MasterID: "m"})
				conn.Close()
			}
			done <- err
		}()
	}
	waitFor(t, "two connections waiting for the slot", func() bool { return s.ConnStats().Waiting == 2 })

	silent := rawDial(t, addr)
	defer silent.Close()
	waitFor(t, "Accept to wait for a pending slot", func() bool { return s.ln.adm.acceptWaiting.Load() == 1 })
	if st := s.ConnStats(); st.Waiting != 2 || st.Evicted != 0 || st.Pending != 0 {
		t.Fatalf("a waiting connection was evicted: %+v", st)
	}

	held.Close()
	for range 2 {
		if err := <-done; err != nil {
			t.Fatalf("a waiting call: %v", err)
		}
	}
	waitFor(t, "the silent connection to be accepted", func() bool { return s.ConnStats().Pending == 1 })
}
