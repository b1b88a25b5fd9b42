package master

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/dispatch"
	"github.com/lancemaster/lancemaster/pkg/metrics"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
	"github.com/lancemaster/lancemaster/pkg/rpc"
)

// masterMetrics are the metrics a master measures as things happen (the
// scrape-time ones are in collector.go). docs/metrics.md lists them all.
// Labels are bounded sets: command types, outcomes, Thrift method names,
// error codes. Never a request's content.
type masterMetrics struct {
	reg *prometheus.Registry

	propose       *prometheus.HistogramVec // command, result
	round         prometheus.Histogram
	outcomes      *prometheus.CounterVec // outcome
	lowerEpochs   prometheus.Counter
	adminRequests *prometheus.CounterVec // method
	adminErrors   *prometheus.CounterVec // method, code
}

// newMasterMetrics builds a master's metrics; certs (nil without mutual
// TLS) feed lancemaster_tls_certificate_expiry_timestamp_seconds.
func newMasterMetrics(certs *rpc.Certs) *masterMetrics {
	m := &masterMetrics{
		reg: metrics.NewRegistry(),
		propose: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "lancemaster_propose_duration_seconds",
			Help: "Time from proposing a command on this master to its Apply response (raft commit and apply on the leader; a follower's includes forwarding to the leader), by command and result (ok, rejected by a guard, error).",
			// 0.5 ms .. 16 s
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"command", "result"}),
		round: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "lancemaster_dispatch_round_duration_seconds",
			Help:    "Wall time of one dispatch round on the leader: sweeps, resolve step, refresh step and dispatch planning (sends and resolves run on their own and are not included).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16), // 1 ms .. 32 s
		}),
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lancemaster_dispatch_outcomes_total",
			Help: "Jobs a dispatch round planned, by what became of them: accepted, returned_to_pending (refused, back to PENDING), not_enqueued (refused for the last allowed time: NOT_COMMITTED), unknown, recheck_failed, cas_lost.",
		}, []string{"outcome"}),
		lowerEpochs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lancemaster_backend_lower_epoch_total",
			Help: "Heartbeat answers with a process epoch lower than one a job recorded (two processes behind one address?): logged and counted, never a proof.",
		}),
		adminRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lancemaster_admin_requests_total",
			Help: "Admin API (Thrift) calls served by this master, by method.",
		}, []string{"method"}),
		adminErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lancemaster_admin_errors_total",
			Help: "Admin API calls answered with an error, by method and TAdminError code (INTERNAL for an untyped failure).",
		}, []string{"method", "code"}),
	}
	for _, o := range dispatch.Outcomes() {
		m.outcomes.WithLabelValues(string(o)) // every outcome present from the start
	}
	m.reg.MustRegister(m.propose, m.round, m.outcomes, m.lowerEpochs, m.adminRequests, m.adminErrors)
	if certs != nil {
		m.reg.MustRegister(metrics.CertExpiry("master", certs.Leaf))
	}
	return m
}

// RoundDone implements dispatch.Observer.
func (m *masterMetrics) RoundDone(elapsed time.Duration) { m.round.Observe(elapsed.Seconds()) }

// Dispatched implements dispatch.Observer.
func (m *masterMetrics) Dispatched(o dispatch.Outcome) { m.outcomes.WithLabelValues(string(o)).Inc() }

// LowerEpoch implements dispatch.EvidenceObserver.
func (m *masterMetrics) LowerEpoch() { m.lowerEpochs.Inc() }

var (
	_ dispatch.Observer         = (*masterMetrics)(nil)
	_ dispatch.EvidenceObserver = (*masterMetrics)(nil)
)

// observePropose records one proposal's duration.
func (m *masterMetrics) observePropose(cmd []byte, start time.Time, resp *journal.TApplyResponse, err error) {
	result := "ok"
	switch {
	case err != nil:
		result = "error"
	case resp == nil || resp.Code != journal.TApplyCode_OK:
		result = "rejected"
	}
	m.propose.WithLabelValues(commandName(cmd), result).Observe(time.Since(start).Seconds())
}

// commandName labels the propose histogram: the command type's registered
// name (raftfsm.CommandSpec.Name); a type this master does not know is
// "type_N".
func commandName(cmd []byte) string {
	if len(cmd) == 0 {
		return "empty"
	}
	if s, ok := raftfsm.LookupCommand(raftfsm.CommandType(cmd[0])); ok {
		return s.Name
	}
	return "type_" + strconv.Itoa(int(cmd[0]&^byte(raftfsm.IgnorableFlag)))
}

// timedProposer is the node as admin, reports and the leader services see
// it, timing every proposal. It is only a raftfsm.Proposer: nothing else of
// the node leaks through it.
type timedProposer struct {
	p raftfsm.Proposer
	m *masterMetrics
}

func (t timedProposer) Propose(ctx context.Context, cmd []byte) (*journal.TApplyResponse, error) {
	start := time.Now()
	resp, err := t.p.Propose(ctx, cmd)
	t.m.observePropose(cmd, start, resp, err)
	return resp, err
}

func (t timedProposer) IsLeader() bool     { return t.p.IsLeader() }
func (t timedProposer) LeaderTerm() uint64 { return t.p.LeaderTerm() }

var _ raftfsm.Proposer = timedProposer{}

// adminMiddleware counts the admin API's calls by method and its typed
// errors by code. It sits inside the rpc server's recover middleware, so a
// panicking handler is not counted here (rpc logs it).
func (m *masterMetrics) adminMiddleware(name string, next thrift.TProcessorFunction) thrift.TProcessorFunction {
	requests := m.adminRequests.WithLabelValues(name)
	return thrift.WrappedTProcessorFunction{
		Wrapped: func(ctx context.Context, seqID int32, in, out thrift.TProtocol) (bool, thrift.TException) {
			ok, err := next.Process(ctx, seqID, in, out)
			requests.Inc()
			if err != nil {
				code := "INTERNAL"
				var ae *adminapi.TAdminError
				if errors.As(err, &ae) {
					code = ae.GetCode().String()
				}
				m.adminErrors.WithLabelValues(name, code).Inc()
			}
			return ok, err
		},
	}
}
