package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lancemaster/lancemaster/pkg/rpc"
)

// RPCConnections exports an RPC listener's connection pools
// (rpc.Server.ConnStats), read at scrape time: how many connections are
// pending (accepted, first request not yet whole), waiting for a served
// slot, or served (by caller class), and the counts closed by the
// listener's admission since start (evicted, expired at the handshake
// deadline, gave up waiting). stats reports false (and zero ConnStats) before the listener
// exists (a backend before Start): then only the counters' zero series are
// exported, so every series is present from the start.
func RPCConnections(role string, stats func() (rpc.ConnStats, bool)) prometheus.Collector {
	return rpcConns{role: role, stats: stats}
}

type rpcConns struct {
	role  string
	stats func() (rpc.ConnStats, bool)
}

var (
	descRPCConns = prometheus.NewDesc("lancemaster_rpc_connections",
		"Connections of this process's RPC listener now, by pool: pending (accepted, first request not yet arrived whole), waiting (proven, waiting for a served slot), served.",
		[]string{"role", "pool"}, nil)
	descRPCServed = prometheus.NewDesc("lancemaster_rpc_served_connections",
		"Served RPC connections now, by caller class (master, backend, other: operators or callers without a verified role certificate).",
		[]string{"role", "class"}, nil)
	descRPCClosed = prometheus.NewDesc("lancemaster_rpc_connections_closed_total",
		"RPC connections the listener's admission closed since start, by reason: evicted (an unproven connection closed to make room), expired (no whole first request by the handshake deadline), gave_up (proven, but no served slot freed in time).",
		[]string{"role", "reason"}, nil)
)

func (c rpcConns) Describe(ch chan<- *prometheus.Desc) {
	ch <- descRPCConns
	ch <- descRPCServed
	ch <- descRPCClosed
}

func (c rpcConns) Collect(ch chan<- prometheus.Metric) {
	st, ok := c.stats() // the zero ConnStats when !ok
	gauge := func(d *prometheus.Desc, v int, label string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), c.role, label)
	}
	if ok {
		gauge(descRPCConns, st.Pending, "pending")
		gauge(descRPCConns, st.Waiting, "waiting")
		gauge(descRPCConns, st.Served, "served")
		for _, class := range []string{"master", "backend", "other"} {
			gauge(descRPCServed, st.ServedBy[class], class)
		}
	}
	for reason, v := range map[string]int64{"evicted": st.Evicted, "expired": st.Expired, "gave_up": st.GaveUp} {
		ch <- prometheus.MustNewConstMetric(descRPCClosed, prometheus.CounterValue, float64(v), c.role, reason)
	}
}
