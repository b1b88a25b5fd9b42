package master

import (
	"math"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lancemaster/lancemaster/pkg/cluster"
	"github.com/lancemaster/lancemaster/pkg/dispatch"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/metrics"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// raftView is what the collector and the readiness checks read from the
// raft node (*cluster.Node); tests use a fake.
type raftView interface {
	Stats() map[string]string
	IsLeader() bool
	LeaderTerm() uint64
	Leader() (id, rpcAddr string)
}

// stateCollector reads the raft node, the journal replica, the report
// counters and the backend pool at scrape time. Its cost per scrape is
// O(backends): raft's stats are a map of a few keys, the job counts per
// state are kept by the FSM (raftfsm.State.JobCounts), held slots are one
// lookup per backend in the slot book. It never walks the jobs.
type stateCollector struct {
	raft    raftView
	fsm     raftfsm.Reader
	reports func() map[string]int64 // report.Handler.Counts; nil = none
	pool    func(backendID int64) (dispatch.BackendStatus, bool)
	heard   func(backendID int64) (time.Time, string, bool) // dispatch.Pool.Heard; nil = none
	peers   func() ([]cluster.PeerStatus, error)            // cluster.Node.Peers; nil = none
}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

var (
	descRaftState = desc("lancemaster_raft_state",
		"1 for the raft state this master is in (Follower, Candidate, Leader, Shutdown), 0 for the others.", "state")
	descRaftTerm        = desc("lancemaster_raft_term", "The raft term this master is in.")
	descRaftCommit      = desc("lancemaster_raft_commit_index", "The highest log index this master knows to be committed.")
	descRaftApplied     = desc("lancemaster_raft_applied_index", "The highest log index raft has handed to the FSM.")
	descRaftLastLog     = desc("lancemaster_raft_last_log_index", "The last log index in this master's log.")
	descRaftSnapshot    = desc("lancemaster_raft_last_snapshot_index", "The log index of this master's latest snapshot.")
	descRaftFSMPending  = desc("lancemaster_raft_fsm_pending", "Batches of committed entries queued for the FSM.")
	descRaftPeers       = desc("lancemaster_raft_peers", "Voters in the raft configuration other than this master.")
	descRaftLastContact = desc("lancemaster_raft_last_contact_seconds",
		"Seconds since this master last heard from the leader: 0 on the leader, +Inf if it never has.")
	descIsLeader    = desc("lancemaster_is_leader", "1 if raft considers this master the leader.")
	descLeaderTerm  = desc("lancemaster_leader_term", "The term of this master's leadership once its barrier completed (the dispatch fencing token), else 0.")
	descPeerHealthy = desc("lancemaster_raft_peer_healthy", "Leader only: 1 if the member answered the leader's AppendEntries (heartbeats) within 3 heartbeat timeouts, 0 if it did not (or it is too early to say). lancemaster_raft_peers counts the configuration, this the members that answer.", "peer_id")
	descLeaderKnown = desc("lancemaster_leader_known", "1 if this master knows a leader.")
	descServices    = desc("lancemaster_leader_services_running", "Leader services (pool, dispatcher, GC, OPTIMIZE policy) running on this master.")
	descFSMApplied  = desc("lancemaster_fsm_applied_index", "The log index of the last command the journal replica applied.")
	descReadRounds  = desc("lancemaster_read_index_rounds_total",
		"Leadership confirmations this master ran for read indexes as the leader (requests that arrive together share one); an admission the leader journals takes none.")

	descJobsMutation = desc("lancemaster_jobs_by_mutation_state",
		"Jobs in the journal by mutation state (PENDING, RUNNING, COMMITTED, NOT_COMMITTED, UNKNOWN, CANCELLED; OTHER for an unknown value).", "mutation_state")
	descJobsRefresh = desc("lancemaster_jobs_by_refresh_state",
		"Jobs in the journal by refresh state (NOT_REQUIRED, REQUIRED, RUNNING, DONE, FAILED; OTHER for an unknown value).", "refresh_state")
	descJobsUnknown           = desc("lancemaster_jobs_unknown", "Jobs whose mutation outcome is UNKNOWN (need an operator: docs/operations.md).")
	descJobsUnknownUnresolved = desc("lancemaster_jobs_unknown_unresolved",
		"UNKNOWN jobs nobody has force-released yet: each needs an operator (docs/operations.md). A released job stays UNKNOWN until retention collects it, so alert on this one.")
	descJobsCorrupt = desc("lancemaster_jobs_corrupt_unresolved", "Unresolved jobs without a fence identity; any blocks admission.")
	descJobsHeld    = desc("lancemaster_jobs_held_pending",
		"PENDING jobs a snapshot restore held (their dispatch history is unknown): never dispatched; each needs an operator (docs/operations.md).")

	descBackends    = desc("lancemaster_backends", "Registered backends.")
	descHeldSlots   = desc("lancemaster_backend_held_slots", "Possible-live slots a backend holds (the slot book).", "backend_id", "address")
	descMaxInflight = desc("lancemaster_max_inflight_per_backend", "The max_inflight_per_backend option: the slots a backend may hold.")
	descAlive       = desc("lancemaster_backend_alive", "1 if the backend answered a heartbeat of this leader's term within 3 intervals (leader only).", "backend_id", "address")
	descLastHeard   = desc("lancemaster_backend_last_heard_timestamp_seconds", "When the leader last had an OK heartbeat answer from the backend, as a Unix time (leader only; absent until heard this term).", "backend_id", "address")
	descCapacity    = desc("lancemaster_backend_capacity", "Workers the backend says it runs at once, from its heartbeat (leader only).", "backend_id", "address")

	descReports = desc("lancemaster_reports_total",
		"Backend reports (or their proof or result part) handled by this master, by reason: applied_result, applied_proof, duplicate, late_result, forwarded, or why it was dropped.", "reason")
)

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRaftState, descRaftTerm, descRaftCommit, descRaftApplied, descRaftLastLog,
		descRaftSnapshot, descRaftFSMPending, descRaftPeers, descRaftLastContact, descIsLeader, descLeaderTerm,
		descLeaderKnown, descPeerHealthy, descServices, descFSMApplied, descJobsMutation, descJobsRefresh, descJobsUnknown,
		descJobsUnknownUnresolved, descJobsCorrupt, descJobsHeld, descBackends, descHeldSlots, descMaxInflight, descAlive, descLastHeard, descCapacity, descReports} {
		ch <- d
	}
}

func gauge(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

// raftStates are the states lancemaster_raft_state always exports.
var raftStates = []string{"Follower", "Candidate", "Leader", "Shutdown"}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	c.collectRaft(ch)
	c.collectJournal(ch)
	if c.reports != nil {
		for reason, n := range c.reports() {
			ch <- prometheus.MustNewConstMetric(descReports, prometheus.CounterValue, float64(n), reason)
		}
	}
}

func (c *stateCollector) collectRaft(ch chan<- prometheus.Metric) {
	s := c.raft.Stats()
	for _, st := range raftStates {
		gauge(ch, descRaftState, metrics.Bool(s["state"] == st), st)
	}
	num := func(d *prometheus.Desc, key string) {
		if v, err := strconv.ParseUint(s[key], 10, 64); err == nil {
			gauge(ch, d, float64(v))
		}
	}
	num(descRaftTerm, "term")
	num(descRaftCommit, "commit_index")
	num(descRaftApplied, "applied_index")
	num(descRaftLastLog, "last_log_index")
	num(descRaftSnapshot, "last_snapshot_index")
	num(descRaftFSMPending, "fsm_pending")
	num(descRaftPeers, "num_peers")
	num(descServices, "leader_services_running")
	if v, err := strconv.ParseUint(s["read_index_rounds"], 10, 64); err == nil {
		ch <- prometheus.MustNewConstMetric(descReadRounds, prometheus.CounterValue, float64(v))
	}
	if d, ok := lastContact(s["last_contact"]); ok {
		gauge(ch, descRaftLastContact, d)
	}
	gauge(ch, descIsLeader, metrics.Bool(c.raft.IsLeader()))
	gauge(ch, descLeaderTerm, float64(c.raft.LeaderTerm()))
	id, _ := c.raft.Leader()
	gauge(ch, descLeaderKnown, metrics.Bool(id != ""))
	if c.peers != nil && c.raft.IsLeader() {
		if ps, err := c.peers(); err == nil {
			for _, p := range ps {
				gauge(ch, descPeerHealthy, metrics.Bool(p.Health == cluster.PeerHealthy), p.ID)
			}
		}
	}
}

// lastContact parses raft's last_contact stat: "0" on the leader, "never",
// or a Go duration.
func lastContact(v string) (float64, bool) {
	switch v {
	case "":
		return 0, false
	case "0":
		return 0, true
	case "never":
		return math.Inf(1), true
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, false
	}
	return d.Seconds(), true
}

func (c *stateCollector) collectJournal(ch chan<- prometheus.Metric) {
	st := c.fsm.State()
	gauge(ch, descFSMApplied, float64(st.AppliedIndex()))
	counts := st.JobCounts()
	for m, n := range counts.Mutation {
		gauge(ch, descJobsMutation, float64(n), m.String())
	}
	gauge(ch, descJobsMutation, float64(counts.OtherMutation), "OTHER")
	for r, n := range counts.Refresh {
		gauge(ch, descJobsRefresh, float64(n), r.String())
	}
	gauge(ch, descJobsRefresh, float64(counts.OtherRefresh), "OTHER")
	gauge(ch, descJobsUnknown, float64(counts.Mutation[job.Unknown]))
	gauge(ch, descJobsUnknownUnresolved, float64(counts.UnknownUnresolved))
	gauge(ch, descJobsCorrupt, float64(st.CorruptUnresolved()))
	gauge(ch, descJobsHeld, float64(counts.HeldPending))
	gauge(ch, descMaxInflight, float64(st.Options().MaxInflightPerBackend))

	backends := st.Backends()
	gauge(ch, descBackends, float64(len(backends)))
	for _, b := range backends {
		id := strconv.FormatInt(b.ID, 10)
		gauge(ch, descHeldSlots, float64(st.HeldSlots(b.ID)), id, b.Address)
		if c.pool == nil {
			continue
		}
		if s, ok := c.pool(b.ID); ok {
			gauge(ch, descAlive, metrics.Bool(s.Alive), id, b.Address)
			if s.Capacity > 0 {
				gauge(ch, descCapacity, float64(s.Capacity), id, b.Address)
			}
		} else if c.heard != nil {
			if _, _, leading := c.heard(b.ID); leading {
				// Heartbeated, never answered: dead, not absent.
				gauge(ch, descAlive, 0, id, b.Address)
			}
		}
		if c.heard != nil {
			if last, _, _ := c.heard(b.ID); !last.IsZero() {
				gauge(ch, descLastHeard, float64(last.UnixMilli())/1000, id, b.Address)
			}
		}
	}
}
