package backend

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/job"
)

// Bounds of the agent's own requests.
const (
	// maxQueryIDs bounds the ids of one query (the dispatcher sends ≤ 256).
	maxQueryIDs = 1024
	// maxMasterAddresses bounds the report targets a heartbeat may set.
	maxMasterAddresses = 16
	maxAddressBytes    = 256
	maxSecretBytes     = 1024
	maxMasterIDBytes   = 1024
)

// service implements wire.LanceBackendService for an Agent. Thrift calls it
// from one goroutine per connection, concurrently; every method takes the
// agent's mutex for the state it reads or writes, so the guards of one
// request are checked atomically with respect to every other request.
type service struct{ a *Agent }

var _ wire.LanceBackendService = (*service)(nil)

func okStatus() *wire.TStatus { return &wire.TStatus{StatusCode: wire.TStatusCode_OK} }

// statusf builds a non-OK status. Messages name fields and reasons only:
// never a storage option key or value, never a secret.
func statusf(code wire.TStatusCode, format string, args ...any) *wire.TStatus {
	return &wire.TStatus{StatusCode: code, ErrorMsgs: []string{fmt.Sprintf(format, args...)}}
}

// SubmitLanceIndexJob accepts one dispatch. The guards run in this order,
// under one lock; each failure is a non-OK status, which means the dispatch
// was provably not enqueued (DESIGN.md §12):
//
//  1. no master has heartbeaten this process yet → NOT_READY;
//  2. isolation is required but not verified → NOT_READY;
//  3. cluster_id names another cluster than the bound one → OTHER_CLUSTER
//     (cluster.go); be_process_epoch is not this process's → STALE_EPOCH;
//     leader_term (a missing one reads as 0) is below the highest term seen
//     for that cluster → STALE_LEADER_TERM; a higher term raises the fence;
//  4. payload bounds → INVALID_ARGUMENT;
//  5. an invocation id this process already accepted (even one whose
//     entry was forgotten: its tombstone) → OK, and nothing else happens
//     (it never runs twice);
//     then a dataset on an s3:// store that is not vouched for (the
//     conditional-PUT probe, probestore.go, run before the lock) →
//     INVALID_ARGUMENT or RUNTIME_ERROR;
//  6. the queue is full → QUEUE_FULL;
//  7. the agent is shutting down → SHUTTING_DOWN.
//
// OK means enqueued exactly once.
//
// Why the duplicate check sits after the fence and the bounds: a redelivery
// is the same request, so it passes 1–4 exactly as the original did (the
// heartbeat and isolation facts never go back), and answers OK; a request
// from a fenced-off leader or another epoch is refused even when its id is
// known, because a stale leader's view must never be confirmed (its M2'
// could not commit anyway, see DESIGN.md §7). And it sits before the queue
// and shutdown checks, so an accepted dispatch is never denied by them:
// saying "not enqueued" about an enqueued dispatch would let the master
// release a slot whose worker may be running.
func (s *service) SubmitLanceIndexJob(ctx context.Context, d *wire.TLanceIndexJobDispatch) (*wire.TStatus, error) {
	a := s.a
	if d == nil {
		return statusf(wire.TStatusCode_INVALID_ARGUMENT, "no dispatch"), nil
	}
	st, accepted := a.submit(d, a.storeGate(ctx, d.DatasetURI, d.StorageOptions))
	a.metrics.dispatched(st.StatusCode)
	fields := []zap.Field{zap.Int64("job_id", d.JobID), zap.String("invocation_id", clipForLog(d.InvocationID)),
		zap.Int64("leader_term", d.GetLeaderTerm()), zap.Stringer("status", st.StatusCode)}
	switch {
	case accepted:
		a.log.Info("dispatch accepted", fields...)
	case st.StatusCode == wire.TStatusCode_OK:
		a.log.Info("redelivered dispatch acknowledged; it is not run again", fields...)
	default:
		a.log.Info("dispatch refused", fields...)
	}
	return st, nil
}

// submit runs the guards and enqueues; accepted is true only for a new
// invocation. storeRefusal, when not nil, is the status of an object store
// not vouched for (storeGate): it refuses a new invocation right after the
// duplicate check, so a redelivery of an accepted one still answers OK.
func (a *Agent) submit(d *wire.TLanceIndexJobDispatch, storeRefusal *wire.TStatus) (st *wire.TStatus, accepted bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.heartbeaten {
		return statusf(wire.TStatusCode_NOT_READY, "no master has heartbeaten this backend yet"), false
	}
	if !a.isolationOK() {
		return statusf(wire.TStatusCode_NOT_READY, "worker isolation is required but could not be verified"), false
	}
	if st := a.fenceLocked(d.GetClusterID(), d.BeProcessEpoch, d.GetLeaderTerm()); st != nil {
		return st, false
	}
	if err := checkDispatch(d); err != nil {
		return statusf(wire.TStatusCode_INVALID_ARGUMENT, "%s", err), false
	}
	if a.table.duplicate(d.InvocationID, time.UnixMilli(d.DeadlineMs), a.cfg.Clock(), a.cfg.Grace) {
		return okStatus(), false
	}
	if storeRefusal != nil {
		return storeRefusal, false
	}
	if len(a.work) >= cap(a.work) {
		return statusf(wire.TStatusCode_QUEUE_FULL, "the queue is full (%d waiting)", cap(a.work)), false
	}
	if a.shutting {
		return statusf(wire.TStatusCode_SHUTTING_DOWN, "the backend is shutting down"), false
	}
	inv := &invocation{id: d.InvocationID, jobID: d.JobID, deadline: time.UnixMilli(d.DeadlineMs), dispatch: d,
		log: newJobLog(newScrubber(d.StorageOptions, d.GetInvocationSecret()))}
	a.table.add(inv)
	a.work <- inv // cannot block: checked above, and sends happen only under mu
	return okStatus(), true
}

// checkDispatch checks the payload bounds (DESIGN.md §2, §10). Errors name
// the field, never its value.
func checkDispatch(d *wire.TLanceIndexJobDispatch) error {
	switch {
	case d.InvocationID == "":
		return errors.New("invocation_id is required")
	case d.InvocationSecret == nil || *d.InvocationSecret == "":
		return errors.New("invocation_secret is required")
	case len(*d.InvocationSecret) > maxSecretBytes:
		return fmt.Errorf("invocation_secret is longer than %d bytes", maxSecretBytes)
	case d.JobID <= 0:
		return errors.New("job_id must be positive")
	case d.DeadlineMs <= 0:
		return errors.New("deadline_ms must be positive")
	case d.DatasetURI == "":
		return errors.New("dataset_uri is required")
	}
	switch d.MutationType {
	case wire.TLanceIndexMutationType_CREATE, wire.TLanceIndexMutationType_REPLACE:
		if d.IndexName == "" || d.ColumnName == "" || d.IndexType == "" {
			return errors.New("index_name, column_name and index_type are required for CREATE and REPLACE")
		}
	case wire.TLanceIndexMutationType_DROP:
		if d.IndexName == "" {
			return errors.New("index_name is required for DROP")
		}
	case wire.TLanceIndexMutationType_OPTIMIZE:
		// Dataset-scoped: it names no index (DESIGN.md §14).
		if d.IndexName != "" || d.ColumnName != "" || d.IndexType != "" {
			return errors.New("an OPTIMIZE names no index_name, column_name or index_type")
		}
	default:
		return errors.New("mutation_type is not CREATE, REPLACE, DROP or OPTIMIZE")
	}
	for _, f := range []struct {
		name string
		v    string
		max  int
	}{
		{"invocation_id", d.InvocationID, job.MaxInvocationIDBytes},
		{"index_name", d.IndexName, job.MaxNameBytes},
		{"column_name", d.ColumnName, job.MaxNameBytes},
		{"index_type", d.IndexType, job.MaxNameBytes},
		{"properties_json", d.GetPropertiesJSON(), job.MaxPropertiesBytes},
		{"dataset_uri", d.DatasetURI, job.MaxURIBytes},
		{"schema_contract_json", d.SchemaContractJSON, job.MaxSchemaBytes},
	} {
		if err := job.CheckBytes(f.name, f.v, f.max); err != nil {
			return err
		}
	}
	return checkStorageOptions(d.StorageOptions)
}

// checkStorageOptions: ≤ 64 options, keys 1..256 B, values ≤ 4096 B, UTF-8.
// The error never names a key or a value.
func checkStorageOptions(opts map[string]string) error {
	if len(opts) > job.MaxStorageOptions {
		return fmt.Errorf("storage_options has %d options; at most %d are allowed", len(opts), job.MaxStorageOptions)
	}
	for k, v := range opts {
		switch {
		case k == "":
			return errors.New("storage_options has an empty key")
		case len(k) > job.MaxStorageOptionKeyBytes:
			return fmt.Errorf("a storage_options key is longer than %d bytes", job.MaxStorageOptionKeyBytes)
		case len(v) > job.MaxStorageOptionValBytes:
			return fmt.Errorf("a storage_options value is longer than %d bytes", job.MaxStorageOptionValBytes)
		case !utf8.ValidString(k) || !utf8.ValidString(v):
			return errors.New("a storage_options entry is not valid UTF-8")
		}
	}
	return nil
}

// Heartbeat records that a master has heartbeaten this process (which
// opens submit's first guard), binds or re-binds the cluster (cluster.go),
// raises that cluster's leader-term fence (a lower term is still answered),
// takes master_addresses as the report targets, and answers the epoch, the
// load, whether a dispatch would be accepted now and whether the outbox
// found at start has been delivered.
//
// A heartbeat from another cluster than the bound one (which has not been
// silent for ClusterRebindAfter) answers OTHER_CLUSTER, accepting=false,
// and changes nothing: that cluster's leader must not take this backend
// for alive. A heartbeat at a term below its cluster's fence (a deposed
// leader) is answered OK but accepting=false.
func (s *service) Heartbeat(_ context.Context, r *wire.THeartbeatRequest) (*wire.THeartbeatResponse, error) {
	a := s.a
	a.mu.Lock()
	defer a.mu.Unlock()
	capacity, queued, running := int32(a.cfg.Concurrency), int32(a.table.queued), int32(a.table.running)
	version := Version
	delivered := a.dlv.outboxDelivered()
	resp := &wire.THeartbeatResponse{Status: okStatus(), BeProcessEpoch: a.epoch,
		Capacity: &capacity, Queued: &queued, Running: &running, Version: &version, OutboxDelivered: &delivered}
	answer := func(reason string) (*wire.THeartbeatResponse, error) {
		accepting, bound := reason == "", a.cl.bound
		resp.Accepting, resp.ClusterID = &accepting, &bound
		if !accepting {
			resp.NotAcceptingReason = &reason
		}
		return resp, nil
	}
	if r == nil || len(r.MasterID) > maxMasterIDBytes || len(r.GetClusterID()) > maxClusterIDBytes {
		resp.Status = statusf(wire.TStatusCode_INVALID_ARGUMENT, "malformed heartbeat")
		return answer("malformed heartbeat")
	}
	eff, other := a.heartbeatClusterLocked(r.GetClusterID(), r.MasterID)
	if other {
		resp.Status = statusf(wire.TStatusCode_OTHER_CLUSTER, "this backend serves cluster %s, not %s", clipForLog(eff), clipForLog(r.GetClusterID()))
		return answer("this backend serves another cluster")
	}
	if !a.heartbeaten {
		a.log.Info("first master heartbeat: accepting dispatches", zap.String("master_id", clipForLog(r.MasterID)),
			zap.Int64("leader_term", r.GetLeaderTerm()), zap.String("cluster_id", clipForLog(eff)))
	}
	a.heartbeaten = true
	f := a.cl.fence(eff, a.cfg.Clock())
	if r.GetLeaderTerm() > f.term {
		f.term = r.GetLeaderTerm()
	}
	if len(r.MasterAddresses) > 0 {
		if err := checkAddresses(r.MasterAddresses); err != nil {
			a.log.Warn("heartbeat master_addresses ignored", zap.String("master_id", clipForLog(r.MasterID)), zap.Error(err))
		} else {
			a.dlv.setTargets(r.MasterAddresses)
		}
	}
	if r.GetLeaderTerm() < f.term {
		// A deposed leader: its dispatches would be refused STALE_LEADER_TERM.
		return answer(fmt.Sprintf("leader term %d is below the highest seen (%d)", r.GetLeaderTerm(), f.term))
	}
	return answer(a.notAcceptingLocked())
}

// notAcceptingLocked says why a dispatch of the bound cluster would be
// refused now ("" when it would be accepted): the guards of submit that do
// not depend on the dispatch itself.
func (a *Agent) notAcceptingLocked() string {
	switch {
	case a.shutting:
		return "the backend is shutting down"
	case !a.isolationOK():
		return "worker isolation is required but could not be verified"
	case len(a.work) >= cap(a.work):
		return "the queue is full"
	}
	return ""
}

// QueryLanceIndexInvocations answers what became of invocations of this
// process. It is fenced like submit: another cluster → OTHER_CLUSTER,
// another epoch → STALE_EPOCH, a lower term → STALE_LEADER_TERM, and a
// higher term raises the fence first, so a new leader's query fences its
// predecessors before it is answered: an UNKNOWN_INVOCATION then stays true
// (no older leader's dispatch can be accepted afterwards). An id this
// process accepted is never UNKNOWN_INVOCATION: once its entry is
// forgotten it answers FORGOTTEN (table).
func (s *service) QueryLanceIndexInvocations(_ context.Context, r *wire.TQueryInvocationsRequest) (*wire.TQueryInvocationsResponse, error) {
	a := s.a
	if r == nil {
		return &wire.TQueryInvocationsResponse{Status: statusf(wire.TStatusCode_INVALID_ARGUMENT, "no request")}, nil
	}
	if len(r.InvocationIds) > maxQueryIDs {
		return &wire.TQueryInvocationsResponse{Status: statusf(wire.TStatusCode_INVALID_ARGUMENT,
			"%d invocation ids; at most %d per query", len(r.InvocationIds), maxQueryIDs)}, nil
	}
	for _, id := range r.InvocationIds {
		if len(id) > job.MaxInvocationIDBytes {
			return &wire.TQueryInvocationsResponse{Status: statusf(wire.TStatusCode_INVALID_ARGUMENT,
				"an invocation id is longer than %d bytes", job.MaxInvocationIDBytes)}, nil
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if st := a.fenceLocked(r.GetClusterID(), r.BeProcessEpoch, r.LeaderTerm); st != nil {
		return &wire.TQueryInvocationsResponse{Status: st}, nil
	}
	out := &wire.TQueryInvocationsResponse{Status: okStatus(), Invocations: make([]*wire.TInvocationStatus, 0, len(r.InvocationIds))}
	for _, id := range r.InvocationIds {
		out.Invocations = append(out.Invocations, a.table.status(id))
	}
	return out, nil
}

// checkAddresses checks report targets: host:port each, bounded.
func checkAddresses(addrs []string) error {
	if len(addrs) > maxMasterAddresses {
		return fmt.Errorf("%d addresses; at most %d", len(addrs), maxMasterAddresses)
	}
	for _, s := range addrs {
		if err := checkHostPort(s); err != nil {
			return err
		}
	}
	return nil
}

func checkHostPort(s string) error {
	if len(s) > maxAddressBytes {
		return fmt.Errorf("an address is longer than %d bytes", maxAddressBytes)
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil || host == "" {
		return fmt.Errorf("%q is not host:port", clipForLog(s))
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("%q: port must be 1..65535", clipForLog(s))
	}
	return nil
}
