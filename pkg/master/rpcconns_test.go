package master_test

import (
	"net"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/pkg/master/mastertest"
)

// The RPC listener's pools are on /metrics: a connection that connects and
// sends nothing shows as pending on that master, and once it is gone the
// pending gauge is back to zero; the closed-connection counters are there
// from the start.
func TestMetricsShowRPCConnectionPools(t *testing.T) {
	c := mastertest.New(t, withHTTP(t, nil))
	m := c.Masters[c.Leader()]
	_, f := scrape(t, m)
	for _, reason := range []string{"evicted", "expired", "gave_up"} {
		value(t, f, "lancemaster_rpc_connections_closed_total", "role", "master", "reason", reason)
	}
	if v := value(t, f, "lancemaster_rpc_served_connections", "role", "master", "class", "backend"); v != 0 {
		t.Fatalf("served backend connections = %v before any backend", v)
	}
	conn, err := net.Dial("tcp", m.RPCAddr())
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the silent connection shows as pending", func() bool {
		_, f := scrape(t, m)
		return value(t, f, "lancemaster_rpc_connections", "role", "master", "pool", "pending") == 1
	})
	conn.Close()
	eventually(t, 10*time.Second, "the closed connection leaves the pending pool", func() bool {
		_, f := scrape(t, m)
		return value(t, f, "lancemaster_rpc_connections", "role", "master", "pool", "pending") == 0
	})
}
