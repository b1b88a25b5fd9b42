package backend

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/metrics"
)

// agentMetrics are the agent's Prometheus metrics (docs/metrics.md), on a
// registry of its own. Labels are bounded sets (proofs, status codes,
// delivery outcomes); no metric carries a request's content, a storage
// option or an invocation secret.
//
// Every method is safe on a nil *agentMetrics (agents built by hand in
// tests) and from any goroutine.
type agentMetrics struct {
	reg *prometheus.Registry

	dispatches *prometheus.CounterVec // status
	proofs     *prometheus.CounterVec // proof
	results    *prometheus.CounterVec // result: trusted | none
	oomKills   prometheus.Counter
	peakMemory prometheus.Histogram
	duration   prometheus.Histogram
	reports    *prometheus.CounterVec // outcome
	retries    prometheus.Counter
}

// Delivery outcomes of one outbox entry.
const (
	reportDelivered = "delivered" // a master answered OK
	reportRefused   = "refused"   // a master refused it for good (given up)
	reportExpired   = "expired"   // dropped past its deadline + outbox grace
)

// submitStatuses are the answers submit_lance_index_job gives (service.go).
var submitStatuses = []wire.TStatusCode{
	wire.TStatusCode_OK, wire.TStatusCode_NOT_READY, wire.TStatusCode_STALE_EPOCH, wire.TStatusCode_STALE_LEADER_TERM,
	wire.TStatusCode_OTHER_CLUSTER, wire.TStatusCode_INVALID_ARGUMENT, wire.TStatusCode_QUEUE_FULL,
	wire.TStatusCode_SHUTTING_DOWN,
}

func newAgentMetrics(a *Agent) *agentMetrics {
	m := &agentMetrics{
		reg: metrics.NewRegistry(),
		dispatches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lancemaster_backend_dispatches_total",
			Help: "submit_lance_index_job calls answered, by status (OK includes redeliveries).",
		}, []string{"status"}),
		proofs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lancemaster_backend_proofs_total",
			Help: "Finished invocations by the termination proof their report carries: CHILD_REAPED, NEVER_LAUNCHED, NONE.",
		}, []string{"proof"}),
		results: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lancemaster_backend_results_total",
			Help: "Finished invocations by whether their report carries a result code (trusted) or not (none: the master's deadline or reconcile decides).",
		}, []string{"result"}),
		oomKills: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lancemaster_backend_oom_kills_total",
			Help: "Workers the kernel OOM-killed (memory_limit reached).",
		}),
		peakMemory: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "lancemaster_backend_worker_peak_memory_bytes",
			Help:    "Peak memory of each finished worker (its cgroup's peak, or its own peak RSS without cgroups).",
			Buckets: prometheus.ExponentialBuckets(16<<20, 2, 12), // 16 MiB .. 32 GiB
		}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "lancemaster_backend_worker_duration_seconds",
			Help:    "Wall time of each worker, from spawn to exit.",
			Buckets: prometheus.ExponentialBuckets(0.25, 2, 16), // 0.25 s .. 2.3 h
		}),
		reports: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lancemaster_backend_reports_total",
			Help: "Outbox entries that left the outbox, by outcome: delivered, refused (a master said it can never be accepted), expired.",
		}, []string{"outcome"}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lancemaster_backend_report_retries_total",
			Help: "Delivery rounds that ended without a final answer (no master reachable, or asked to retry); each is retried after a backoff.",
		}),
	}
	for _, o := range []string{reportDelivered, reportRefused, reportExpired} {
		m.reports.WithLabelValues(o)
	}
	for _, p := range []string{"CHILD_REAPED", "NEVER_LAUNCHED", "NONE"} {
		m.proofs.WithLabelValues(p)
	}
	// Every series present from the start, as on the masters: a rate or an
	// alert over a counter that appears only at its first event misses it.
	for _, st := range submitStatuses {
		m.dispatches.WithLabelValues(st.String())
	}
	for _, r := range []string{"trusted", "none"} {
		m.results.WithLabelValues(r)
	}
	m.reg.MustRegister(m.dispatches, m.proofs, m.results, m.oomKills, m.peakMemory, m.duration, m.reports, m.retries,
		&agentCollector{a: a})
	m.reg.MustRegister(metrics.RPCConnections("backend", a.rpcConnStats))
	if c := a.cfg.RPC.Certs; c != nil {
		m.reg.MustRegister(metrics.CertExpiry("backend", c.Leaf))
	}
	return m
}

func (m *agentMetrics) dispatched(st wire.TStatusCode) {
	if m != nil {
		m.dispatches.WithLabelValues(st.String()).Inc()
	}
}

// workerExited records what the Runner measured about one worker.
func (m *agentMetrics) workerExited(out Outcome) {
	if m == nil || out.PID == 0 {
		return // never spawned: nothing was measured
	}
	if out.OOMKilled {
		m.oomKills.Inc()
	}
	if out.PeakMemoryBytes > 0 {
		m.peakMemory.Observe(float64(out.PeakMemoryBytes))
	}
	m.duration.Observe(out.Duration.Seconds())
}

// finished records one finished invocation's report.
func (m *agentMetrics) finished(rep *wire.TLanceIndexJobReport) {
	if m == nil {
		return
	}
	proof := "NONE"
	if rep.TerminationProof != nil {
		proof = rep.TerminationProof.String()
	}
	m.proofs.WithLabelValues(proof).Inc()
	result := "none"
	if rep.ResultCode != nil {
		result = "trusted"
	}
	m.results.WithLabelValues(result).Inc()
}

func (m *agentMetrics) reportDone(outcome string) {
	if m != nil {
		m.reports.WithLabelValues(outcome).Inc()
	}
}

func (m *agentMetrics) reportRetry() {
	if m != nil {
		m.retries.Inc()
	}
}

// agentCollector reads the agent's state at scrape time: a few fields under
// the agent's mutex, the deliverer's in-flight count under its own, and the
// outbox's entry count (one bbolt read transaction; the outbox holds only
// undelivered reports, so it stays small).
type agentCollector struct{ a *Agent }

var (
	descQueued      = prometheus.NewDesc("lancemaster_backend_queued", "Accepted dispatches waiting for a worker.", nil, nil)
	descQueueCap    = prometheus.NewDesc("lancemaster_backend_queue_capacity", "How many accepted dispatches may wait (queue_size).", nil, nil)
	descRunning     = prometheus.NewDesc("lancemaster_backend_running_workers", "Workers running a build now.", nil, nil)
	descConcurrency = prometheus.NewDesc("lancemaster_backend_concurrency", "Workers that may run at once (the capacity heartbeats announce).", nil, nil)
	descOutbox      = prometheus.NewDesc("lancemaster_backend_outbox_entries", "Reports stored in the outbox and not yet acknowledged by a master.", nil, nil)
	descInflight    = prometheus.NewDesc("lancemaster_backend_deliveries_in_flight", "Outbox entries with a delivery loop running.", nil, nil)
	descIsolation   = prometheus.NewDesc("lancemaster_backend_isolation_verified", "1 if the Runner verified worker isolation at start-up.", nil, nil)
	descHeartbeaten = prometheus.NewDesc("lancemaster_backend_heartbeaten", "1 once a master has heartbeaten this process (dispatches are refused before).", nil, nil)
	descTerm        = prometheus.NewDesc("lancemaster_backend_highest_leader_term", "The highest leader term this process has seen from the cluster it serves (its fence).", nil, nil)
)

func (c *agentCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descQueued, descQueueCap, descRunning, descConcurrency, descOutbox, descInflight,
		descIsolation, descHeartbeaten, descTerm} {
		ch <- d
	}
}

func (c *agentCollector) Collect(ch chan<- prometheus.Metric) {
	a := c.a
	g := func(d *prometheus.Desc, v float64) { ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v) }
	a.mu.Lock()
	queued, running, heartbeaten, term := a.table.queued, a.table.running, a.heartbeaten, a.cl.term()
	a.mu.Unlock()
	g(descQueued, float64(queued))
	g(descRunning, float64(running))
	g(descQueueCap, float64(a.cfg.QueueSize))
	g(descConcurrency, float64(a.cfg.Concurrency))
	g(descIsolation, metrics.Bool(a.runner.Verified()))
	g(descHeartbeaten, metrics.Bool(heartbeaten))
	g(descTerm, float64(term))
	if n, err := a.outbox.Len(); err == nil {
		g(descOutbox, float64(n))
	}
	a.dlv.mu.Lock()
	inflight := len(a.dlv.loops)
	a.dlv.mu.Unlock()
	g(descInflight, float64(inflight))
}
