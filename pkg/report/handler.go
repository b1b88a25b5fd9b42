package report

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/cluster"
	"github.com/lancemaster/lancemaster/pkg/config"
	"github.com/lancemaster/lancemaster/pkg/groupcommit"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// Waker wakes the dispatch round (dispatch.Waker). Wake must never block.
type Waker interface{ Wake() }

// ForwardFunc runs fn against the master at leaderAddr. The master wires it
// to an rpc.MasterClient; fn makes exactly one report call. It may be called
// from any goroutine.
type ForwardFunc func(ctx context.Context, leaderAddr string,
	fn func(ctx context.Context, c *adminapi.LanceMasterServiceClient) error) error

// Deps are the Handler's collaborators. Proposer and Reader are required.
type Deps struct {
	Proposer raftfsm.Proposer
	Reader   raftfsm.Reader
	// Leader returns the leader's id and RPC address ("" when unknown).
	// nil: no leader is ever known, so a follower answers NOT_LEADER.
	Leader func() (id, rpcAddr string)
	// Forward carries a follower's report to the leader; nil disables
	// forwarding (a follower then answers NOT_LEADER and the backend tries
	// another master).
	Forward ForwardFunc
	// Waker is woken after every applied change; optional.
	Waker Waker
	// Logger; nil discards.
	Logger *zap.Logger
	// Clock stamps now_ms into commands (the FSM reads no clock); nil = time.Now.
	Clock func() time.Time
	// CatchUp returns once this leader's FSM has applied every committed
	// entry (cluster.Node.ConsistentRead). It is called once per leader term,
	// before the first report of that term is judged: a new leader may not
	// have applied its predecessor's last M1 yet, and a report judged on that
	// view would be refused for good (unknown job, no secret). nil skips it
	// (tests; a single node).
	CatchUp func(ctx context.Context) error
	// VerifyLeader returns nil once a quorum has confirmed that this master
	// still leads in term (cluster.Node.VerifyLeader): the leader term read
	// before the state a refusal was judged on. The leader calls it before
	// any refusal for good judged on its own view (UNAUTHENTICATED,
	// STALE_REPORT, DESIGN.md §13.5): a leader deposed without knowing it
	// may miss the newer leader's entries, and a confirmation in a later
	// term it won since says nothing about the view it judged on. When it
	// fails the answer is NOT_LEADER and the backend retries. nil skips it
	// (tests; a single node).
	VerifyLeader func(ctx context.Context, term uint64) error
	// Credentials, when set, redact a report's log tail again before it is
	// journaled: every key and value of the job's catalog credentials is
	// removed (the backend removes them first; this is the masters not
	// trusting that). A tail whose credentials cannot be read is dropped.
	Credentials config.CredentialSource
	// ForwardTimeout bounds one forwarded call (default 10 s).
	ForwardTimeout time.Duration
	// ApplyTimeout bounds one proposed batch (default 10 s).
	ApplyTimeout time.Duration
}

// Batching limits of the group commit.
const (
	// maxBatchItems keeps an entry well under the frame limit: an item is at
	// most ~1.4 KiB (a 1 KiB message plus ids).
	maxBatchItems = 256
	// maxFlights is how many report batches may be in flight;
	// raft pipelines them, and under light load no item waits for another.
	maxFlights = 4

	defaultTimeout = 10 * time.Second

	// Drop lines are sampled per reason and second: the first dropLogFirst,
	// then one in dropLogThereafter. Enough to diagnose a misbehaving
	// backend, too few for forged reports to fill a disk.
	dropLogFirst      = 20
	dropLogThereafter = 1000
)

// Handler implements admin.ReportHandler. Its methods are safe for
// concurrent use by the Thrift server's goroutines.
type Handler struct {
	d       Deps
	log     *zap.Logger
	dropLog *zap.Logger // sampled: a flood of forged reports must not flood the log
	counts  counters

	reports *groupcommit.Group[*journal.TReportItem]

	catchMu  sync.Mutex
	caughtUp atomic.Uint64 // the leader term whose catch-up completed
}

// New returns a Handler. It panics on a missing required dependency: that
// is a wiring bug, found at start-up.
func New(d Deps) *Handler {
	if d.Proposer == nil || d.Reader == nil {
		panic("report.New: Proposer and Reader are required")
	}
	if d.Logger == nil {
		d.Logger = zap.NewNop()
	}
	if d.Clock == nil {
		d.Clock = time.Now
	}
	if d.ForwardTimeout <= 0 {
		d.ForwardTimeout = defaultTimeout
	}
	if d.ApplyTimeout <= 0 {
		d.ApplyTimeout = defaultTimeout
	}
	h := &Handler{d: d, log: d.Logger, dropLog: d.Logger.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		return zapcore.NewSamplerWithOptions(c, time.Second, dropLogFirst, dropLogThereafter)
	}))}
	h.reports = groupcommit.New(groupcommit.Config[*journal.TReportItem]{
		MaxItems: maxBatchItems, MaxFlights: maxFlights, Timeout: d.ApplyTimeout,
		Propose: func(ctx context.Context, items []*journal.TReportItem) (*journal.TApplyResponse, error) {
			return h.propose(ctx, raftfsm.CmdReportBatch, &journal.TReportBatch{NowMs: h.nowMs(), Reports: items})
		}})
	return h
}

// Counts returns how many reports (or report parts) were dropped, applied or
// forwarded, by reason name (see Reason). Every reason is present.
func (h *Handler) Counts() map[string]int64 { return h.counts.snapshot() }

// HandleResult handles reportLanceIndexJobResult (DESIGN.md §9).
func (h *Handler) HandleResult(ctx context.Context, r *wire.TLanceIndexJobReport) *wire.TStatus {
	if r == nil {
		return h.drop(0, ReasonInvalidField, invalid(0, "the report is empty"))
	}
	id := identity{r.JobID, r.DispatchRevision, r.InvocationID, r.BeProcessEpoch}
	rec, st := h.receive(ctx, id, r.InvocationSecret, r.GetForwarded(),
		func(ctx context.Context, c *adminapi.LanceMasterServiceClient) (*wire.TStatus, error) {
			fwd := *r
			fwd.Forwarded = thrift.BoolPtr(true)
			return c.ReportLanceIndexJobResult_(ctx, &fwd)
		})
	if st != nil {
		return st
	}
	// The proof is applied on its own (P, first in the entry, with its own
	// guard): a result that fails to parse must not keep a provably
	// finished worker's slot held.
	proof, proofDropped := job.ProofNone, false
	if r.IsSetTerminationProof() && r.GetTerminationProof() != wire.TLanceIndexTerminationProof_NONE {
		if p, ok := wireProof(r.GetTerminationProof()); ok {
			proof = p
		} else {
			proofDropped = true
			h.drop(id.jobID, ReasonInvalidField, invalid(id.jobID, "the termination proof is not one a backend may send"))
		}
	}
	res, reason, why := parseResult(r)
	var parsed *parsedResult
	uuidDropped, optimizedDropped := false, false
	var buildDropped []string
	if why == "" {
		res.build, buildDropped = parseBuildInfo(r.Resources, r.LogTail, r.LeftoverIndexUUID)
		res.build.logTail = h.redactTail(rec, res.build.logTail)
		for _, d := range buildDropped {
			h.drop(id.jobID, ReasonInvalidField, invalid(id.jobID, d+" is malformed"))
		}
		// The verified index's uuid (§13.7) is evidence beside a trusted
		// result: a malformed one is dropped, the result is not.
		if u, ok := indexUUID(r.IndexUUID); !ok {
			uuidDropped = true
			h.drop(id.jobID, ReasonInvalidField, invalid(id.jobID, "the index uuid is not a uuid"))
		} else if res.code == job.NativeOK {
			res.indexUUID = u
		}
		if res.code == job.NativeOK {
			relayed := &journal.TCompletion{}
			if raftfsm.RelayResult(relayed, rec, r.DatasetVersion, r.OptimizedIndexes) {
				optimizedDropped = true
				h.drop(id.jobID, ReasonInvalidField, invalid(id.jobID, "the optimized indexes break their bounds"))
			}
			res.datasetVersion, res.optimized = relayed.DatasetVersion, relayed.OptimizedIndexes
		}
		parsed = &res
	}
	proofSt, resultSt := h.journal(ctx, rec, id, proof, nil, buildInfo{}, parsed)
	switch {
	case proofSt != nil:
		return proofSt
	case why != "":
		return h.drop(id.jobID, reason, invalid(id.jobID, why+"; the result is dropped"))
	case proofDropped && resultSt.StatusCode == wire.TStatusCode_OK:
		return invalid(id.jobID, "the result was accepted; the termination proof is not one a backend may send and was dropped")
	case uuidDropped && resultSt.StatusCode == wire.TStatusCode_OK:
		return invalid(id.jobID, "the result was accepted; the index uuid is not a uuid and was dropped")
	case len(buildDropped) > 0 && resultSt.StatusCode == wire.TStatusCode_OK:
		return invalid(id.jobID, "the result was accepted; "+strings.Join(buildDropped, " and ")+" was malformed and dropped")
	case optimizedDropped && resultSt.StatusCode == wire.TStatusCode_OK:
		return invalid(id.jobID, "the result was accepted; the optimized indexes break their bounds and were dropped")
	}
	return resultSt
}

// HandleTermination handles reportLanceIndexJobTermination: authenticated
// like a result (Improvement, §9), it applies P only. A report that says
// the worker ended without a result (no_result, §13.3) journals P with
// finished_without_result, the cause (sanitized_message) and the uuid the
// worker announced: a RUNNING job moves to RESOLVING in that entry, and its
// outcome is read from the dataset once resolve_after has passed (now, or
// now + lance_index_job_resolve_grace_second on an object store, where a
// PUT the worker already sent may still land). A malformed message or uuid
// is dropped (INVALID_ARGUMENT), the proof is still applied.
func (h *Handler) HandleTermination(ctx context.Context, r *wire.TLanceIndexJobTerminationReport) *wire.TStatus {
	if r == nil {
		return h.drop(0, ReasonInvalidField, invalid(0, "the report is empty"))
	}
	id := identity{r.JobID, r.DispatchRevision, r.InvocationID, r.BeProcessEpoch}
	rec, st := h.receive(ctx, id, r.InvocationSecret, r.GetForwarded(),
		func(ctx context.Context, c *adminapi.LanceMasterServiceClient) (*wire.TStatus, error) {
			fwd := *r
			fwd.Forwarded = thrift.BoolPtr(true)
			return c.ReportLanceIndexJobTermination(ctx, &fwd)
		})
	if st != nil {
		return st
	}
	p, ok := wireProof(r.Proof)
	if !ok {
		return h.drop(id.jobID, ReasonInvalidField, invalid(id.jobID, "the termination proof is not one a backend may send"))
	}
	var term *termination
	var dropped []string
	if r.GetNoResult_() {
		term = &termination{}
		if msg, reason, why := parseMessage(r.GetSanitizedMessage()); why != "" {
			h.drop(id.jobID, reason, invalid(id.jobID, why))
			dropped = append(dropped, "the sanitized message")
		} else {
			term.message = msg
		}
		if u, ok := indexUUID(r.IndexUUID); !ok {
			h.drop(id.jobID, ReasonInvalidField, invalid(id.jobID, "the index uuid is not a uuid"))
			dropped = append(dropped, "the index uuid")
		} else {
			term.indexUUID = u
		}
		term.resolveAfterMs = h.resolveAfterMs(rec)
	}
	pb, bad := parseBuildInfo(r.Resources, r.LogTail, nil)
	pb.logTail = h.redactTail(rec, pb.logTail)
	for _, d := range bad {
		h.drop(id.jobID, ReasonInvalidField, invalid(id.jobID, d+" is malformed"))
	}
	dropped = append(dropped, bad...)
	if st, _ := h.journal(ctx, rec, id, p, term, pb, nil); st != nil {
		return st
	}
	if len(dropped) > 0 {
		return invalid(id.jobID, "the proof was accepted; "+strings.Join(dropped, " and ")+" was malformed and dropped")
	}
	return statusOK()
}

// resolveAfterMs is when a job whose worker ended without a result may be
// read from its dataset: at once for a local dataset, else after the
// grace option (§13.3, §13.4).
func (h *Handler) resolveAfterMs(rec *job.Record) int64 {
	now := h.nowMs()
	if job.IsLocalLocator(rec.Locator) {
		return now
	}
	return now + h.d.Reader.State().Options().ResolveGraceSecond*1000
}

// receive is what a result and a termination report share before their own
// work. A follower forwards the report to the leader with forward (which
// sends a copy marked forwarded), or, when the report was forwarded to it
// already, refuses it (one hop only); either way its answer is the status.
// The leader authenticates the report: a non-nil status is the refusal,
// else rec is the report's job.
func (h *Handler) receive(ctx context.Context, id identity, secret *string, forwarded bool,
	forward func(ctx context.Context, c *adminapi.LanceMasterServiceClient) (*wire.TStatus, error)) (*job.Record, *wire.TStatus) {
	if !h.d.Proposer.IsLeader() {
		if forwarded {
			return nil, h.notLeaderAfterHop(id.jobID)
		}
		return nil, h.forward(ctx, id.jobID, forward)
	}
	return h.authenticate(ctx, id, secret)
}

func (h *Handler) nowMs() int64 { return h.d.Clock().UnixMilli() }

func (h *Handler) wake() {
	if h.d.Waker != nil {
		h.d.Waker.Wake()
	}
}

// propose encodes and proposes one batch command.
func (h *Handler) propose(ctx context.Context, t raftfsm.CommandType, cmd thrift.TStruct) (*journal.TApplyResponse, error) {
	data, err := raftfsm.Encode(t, cmd)
	if err != nil {
		return nil, err
	}
	// Leader-only (§13.5): the report was judged on this master's view as
	// the leader; if it no longer leads, the command must not be forwarded
	// as a raw command (the next leader judges the report itself). Propose
	// then fails with ErrNotLeader, answered NOT_LEADER: the backend retries.
	return h.d.Proposer.Propose(cluster.LeaderOnly(ctx), data)
}
