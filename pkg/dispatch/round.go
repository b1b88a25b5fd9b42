package dispatch

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/config"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/options"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// dispatchPlan is one job of a round: the M1 it journals and the request it
// sends, prepared in full before anything is written.
type dispatchPlan struct {
	rec     *job.Record
	addr    string
	mark    *journal.TMarkRunning
	request *wire.TLanceIndexJobDispatch // carries the storage options: never logged
	// returnToPending: a refusal of this dispatch returns the job to
	// PENDING (M2″), its attempts + 1 staying below
	// lance_index_job_max_dispatch_attempts; else it ends NOT_COMMITTED.
	returnToPending bool
}

// dispatchPending is step 5 of the round: PENDING jobs in id order become
// RUNNING in one M1 entry (MarkRunning), then each is rechecked and sent
// once, on its own goroutine (launchSends): the round does not wait.
func (r *round) dispatchPending() error {
	st := r.deps.Reader.State()
	opts := st.Options()
	if opts.DispatcherPaused || r.d.holds.Load() > 0 {
		return nil
	}
	pending := st.PendingInIDOrder(pendingScanLimit(opts.MaxDispatchPerRound))
	if len(pending) == 0 {
		return nil
	}
	picker := r.newBackendPicker(st, opts.MaxInflightPerBackend).withoutDrained(st)
	// Once this round's sends have started: a backend it left without room
	// for another call wakes the dispatcher when one of its calls ends.
	defer func() { r.work.awaitRoom(picker.callCapped(), r.deps.SendConcurrency) }()
	registered := len(st.Backends())
	prep := &preparer{r: r, st: st, opts: opts, creds: map[string]credsResult{}, cluster: clusterIDOf(st)}
	var plans []*dispatchPlan
	for _, rec := range pending {
		if int64(len(plans)) >= opts.MaxDispatchPerRound {
			break
		}
		// A local dataset is only shared with a backend the operator vouches
		// for: the assertion, and exactly one backend to send to.
		if job.IsLocalLocator(rec.Locator) && (!opts.EnableLocalFileMutation || registered != 1) {
			continue
		}
		b, full := picker.pick(rec)
		if full {
			break // no backend is dispatchable with room: everything else waits too
		}
		if b == nil {
			continue // only the backend that refused it last has room: wait for another
		}
		p, err := prep.prepare(rec, b)
		if err != nil {
			r.d.log.Warn("cannot prepare the dispatch; the job stays PENDING",
				zap.Int64("job_id", rec.JobID), zap.String("error_kind", errorKind(err)), safeErr(err))
			continue
		}
		p.returnToPending = int64(rec.DispatchAttempts)+1 < maxDispatchAttempts(opts)
		b.load++
		b.calls++
		plans = append(plans, p)
	}
	if len(plans) == 0 {
		return nil
	}
	running, markErr := r.markRunning(plans)
	if len(running) == 0 {
		return markErr
	}
	// A round that filled its cap may have left dispatchable work behind:
	// run the next round at once instead of after the interval (the cap
	// bounds one round's work, not the rate). A round that dispatches
	// nothing never wakes itself, so this cannot spin.
	if int64(len(running)) >= opts.MaxDispatchPerRound && r.deps.Waker != nil {
		r.deps.Waker.Wake()
	}
	if h := r.deps.Hooks.AfterJournal; h != nil {
		ids := make([]int64, len(running))
		for i, p := range running {
			ids[i] = p.rec.JobID
		}
		h(ids)
	}
	r.launchSends(running)
	return markErr
}

func pendingScanLimit(maxPerRound int64) int {
	n := maxPerRound + pendingScanExtra
	if n > maxPendingScan || n < 0 {
		n = maxPendingScan
	}
	return int(n)
}

// markRunning journals one M1 entry for every planned job and returns the
// plans whose CAS succeeded, in order. Only those are ever sent. When the
// entry's fate is unknown (an error), it returns, with the error, the plans
// this replica already shows journaled with the identity minted here; the
// others are not sent and converge by reconcile or the deadline if the
// entry applies later.
func (r *round) markRunning(plans []*dispatchPlan) ([]*dispatchPlan, error) {
	marks := make([]*journal.TMarkRunning, len(plans))
	for i, p := range plans {
		marks[i] = p.mark
	}
	nowMs := r.deps.Clock().UnixMilli()
	resp, err := propose(r.ctx, r.deps.Proposer, raftfsm.CmdMarkRunningBatch,
		&journal.TMarkRunningBatch{NowMs: nowMs, Jobs: marks})
	if err != nil {
		// The entry's fate is unknown. The jobs this replica already shows
		// RUNNING with the identity we minted were journaled: they may be
		// sent (each still passes the pre-send recheck). The others are not
		// sent; if the entry applies later they converge by reconcile or
		// the deadline.
		return r.appliedMarks(plans), fmt.Errorf("journal MarkRunning for %d jobs (fate unknown): %w", len(plans), err)
	}
	if resp.Code != journal.TApplyCode_OK {
		return nil, fmt.Errorf("journal MarkRunning for %d jobs: %s: %s", len(plans), resp.Code, resp.GetMessage())
	}
	var running []*dispatchPlan
	for i, p := range plans {
		if i >= len(resp.Items) {
			break
		}
		it := resp.Items[i]
		if it.JobID == p.rec.JobID && it.Code == journal.TApplyCode_OK {
			running = append(running, p)
			continue
		}
		r.deps.Observer.Dispatched(OutcomeCASLost)
		r.d.log.Info("MarkRunning lost its compare-and-set; the job is not sent",
			zap.Int64("job_id", p.rec.JobID), zap.Stringer("code", it.Code), zap.String("reason", it.GetMessage()))
	}
	return running, nil
}

// appliedMarks returns the plans whose M1 the local state shows applied.
func (r *round) appliedMarks(plans []*dispatchPlan) []*dispatchPlan {
	st := r.deps.Reader.State()
	var out []*dispatchPlan
	for _, p := range plans {
		if rec, ok := st.Job(p.rec.JobID); ok && rec.MutationState == job.Running &&
			rec.DispatchRevision == p.rec.Rev+1 && rec.InvocationID == p.mark.InvocationID {
			out = append(out, p)
		}
	}
	return out
}

// ---- preparing a request ---------------------------------------------------------

type credsResult struct {
	opts map[string]string
	err  error
}

// preparer builds the whole request of a job before anything is journaled.
type preparer struct {
	r       *round
	st      *raftfsm.State
	opts    options.Options
	creds   map[string]credsResult // per credentials reference, read once per round
	cluster string                 // the journaled cluster id ("" before one is)
}

// Error kinds of a failed prepare, for logs.
var (
	errNoCatalog   = errors.New("the job's catalog is not registered")
	errInvocation  = errors.New("cannot mint an invocation identity")
	errCredentials = errors.New("cannot resolve the catalog's storage credentials")
)

func (pr *preparer) prepare(rec *job.Record, b *backendSlot) (*dispatchPlan, error) {
	storage, err := pr.storageOptions(rec)
	if err != nil {
		return nil, err
	}
	inv, err := pr.r.deps.Invocations()
	if err == nil && (inv.ID == "" || inv.Secret == "") {
		err = errors.New("empty invocation id or secret")
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errInvocation, err)
	}
	deadlineMs := pr.r.deps.Clock().UnixMilli() + pr.opts.ExecuteDeadlineSecondOf(rec.IndexType)*1000
	mark := &journal.TMarkRunning{
		JobID:            rec.JobID,
		ExpectedRev:      rec.Rev,
		BackendID:        b.id,
		ProcessEpoch:     b.epoch, // read once: the value journaled is the value sent
		InvocationID:     inv.ID,
		InvocationSecret: inv.Secret,
		DeadlineMs:       deadlineMs,
		LeaderTerm:       int64(pr.r.term),
	}
	req := buildRequest(rec, mark, storage, pr.opts)
	if pr.cluster != "" {
		cid := pr.cluster
		req.ClusterID = &cid
	}
	return &dispatchPlan{rec: rec, addr: b.addr, mark: mark, request: req}, nil
}

// storageOptions resolves the storage credentials of the job's catalog
// (once per reference and round). The map is the caller's to send, never
// to log or journal.
func (pr *preparer) storageOptions(rec *job.Record) (map[string]string, error) {
	cat, ok := pr.st.CatalogByID(rec.CatalogID)
	if !ok {
		return nil, errNoCatalog
	}
	c, ok := pr.creds[cat.CredentialsRef]
	if !ok {
		c.opts, c.err = pr.r.deps.Credentials.Resolve(cat.CredentialsRef)
		pr.creds[cat.CredentialsRef] = c
	}
	if c.err != nil {
		return nil, fmt.Errorf("%w: %w", errCredentials, c.err)
	}
	return c.opts, nil
}

// buildRequest is the TLanceIndexJobDispatch of DESIGN.md §10 for a job and
// its M1. dispatch_revision is the rev M1 gives the record.
func buildRequest(rec *job.Record, m *journal.TMarkRunning, storage map[string]string, opts options.Options) *wire.TLanceIndexJobDispatch {
	secret, term := m.InvocationSecret, m.LeaderTerm
	ifNotExists, ifExists := rec.IfNotExists, rec.IfExists
	maxParts, maxSubVectors := clampInt32(opts.MaxNumPartitions), clampInt32(opts.MaxNumSubVectors)
	d := &wire.TLanceIndexJobDispatch{
		JobID:                  rec.JobID,
		DispatchRevision:       rec.Rev + 1,
		InvocationID:           m.InvocationID,
		BeProcessEpoch:         m.ProcessEpoch,
		DeadlineMs:             m.DeadlineMs,
		MutationType:           wire.TLanceIndexMutationType(rec.MutationType),
		IndexName:              rec.DisplayIndexName,
		ColumnName:             rec.Column,
		IndexType:              rec.IndexType,
		IfNotExists:            &ifNotExists,
		IfExists:               &ifExists,
		DatasetURI:             rec.Locator,
		AdmittedDatasetVersion: rec.AdmittedDatasetVersion,
		SchemaContractJSON:     rec.SchemaContract,
		StorageOptions:         storage,
		InvocationSecret:       &secret,
		MaxNumPartitions:       &maxParts,
		MaxNumSubVectors:       &maxSubVectors,
		LeaderTerm:             &term,
	}
	if rec.PropertiesJSON != "" {
		p := rec.PropertiesJSON
		d.PropertiesJSON = &p
	}
	if rec.IsOptimize() {
		// OPTIMIZE is a dataset-scoped job: the dispatch carries
		// mutation_type OPTIMIZE and empty index fields (never the fence
		// name), no IF condition and no properties.
		d.IndexName, d.ColumnName, d.IndexType, d.SchemaContractJSON, d.PropertiesJSON = "", "", "", "", nil
		d.IfNotExists, d.IfExists = nil, nil
	}
	return d
}

func clampInt32(v int64) int32 {
	if v > math.MaxInt32 {
		return math.MaxInt32
	}
	return int32(v)
}

// errorKind names what failed without any content.
func errorKind(err error) string {
	switch {
	case errors.Is(err, errNoCatalog):
		return "catalog"
	case errors.Is(err, errCredentials):
		return "credentials"
	case errors.Is(err, errInvocation):
		return "invocation"
	}
	return "other"
}

// safeErr logs only errors whose text is known to carry no secret: a
// credentials error names the reference and the reason, never the content.
func safeErr(err error) zap.Field {
	var ce *config.CredentialsError
	if errors.As(err, &ce) {
		return zap.String("reason", ce.Error())
	}
	return zap.Skip()
}

// ---- choosing a backend ------------------------------------------------------------

// backendSlot is a backend a job can go to this round.
type backendSlot struct {
	id    int64
	addr  string
	epoch int64
	load  int64 // possible-live slots held, plus this round's
	calls int   // sends and resolves in flight to it, plus this round's
}

type backendPicker struct {
	cands    []*backendSlot // by id
	max      int64          // lance_index_job_max_inflight_per_backend
	maxCalls int            // Deps.SendConcurrency
}

// newBackendPicker lists the backends that are dispatchable (alive,
// accepting, of this cluster, not refused since their last OK, accepting
// heartbeat), whose epoch this term has heard, with their held slots and
// calls in flight.
func (r *round) newBackendPicker(st *raftfsm.State, maxInflight int64) *backendPicker {
	p := &backendPicker{max: maxInflight, maxCalls: r.deps.SendConcurrency}
	for _, b := range st.Backends() {
		v, heard := r.deps.Pool.heardInTerm(b.ID, r.term)
		if !heard || !v.Dispatchable() {
			continue
		}
		p.cands = append(p.cands, &backendSlot{id: b.ID, addr: b.Address, epoch: v.Epoch,
			load: int64(st.HeldSlots(b.ID)), calls: r.work.inflight(b.ID)})
	}
	return p
}

// withoutDrained drops the backends an operator drained (backends drain):
// no new dispatch goes there. Their running jobs, the heartbeats, reports,
// reconcile and resolves are untouched (resolves use newBackendPicker).
func (p *backendPicker) withoutDrained(st *raftfsm.State) *backendPicker {
	p.cands = slices.DeleteFunc(p.cands, func(c *backendSlot) bool {
		b, ok := st.Backend(c.id)
		return ok && b.Drained
	})
	return p
}

func (p *backendPicker) room(c *backendSlot) bool { return c.load < p.max && c.calls < p.maxCalls }

// callCapped lists the backends with slots to spare but no room for
// another call (SendConcurrency in flight, this round's counted).
func (p *backendPicker) callCapped() []int64 {
	var ids []int64
	for _, c := range p.cands {
		if c.load < p.max && c.calls >= p.maxCalls {
			ids = append(ids, c.id)
		}
	}
	return ids
}

// pick returns the least loaded backend with room (lowest id on a tie) for
// rec; full is true when no backend has room at all. A job that was
// returned to PENDING avoids the backend its last dispatch went to (it
// refused or could not be reached) while another dispatchable backend
// exists: nil, false when only that one has room.
func (p *backendPicker) pick(rec *job.Record) (best *backendSlot, full bool) {
	avoid := int64(0)
	if rec.DispatchAttempts > 0 && len(p.cands) > 1 {
		avoid = rec.BackendID
	}
	any := false
	for _, c := range p.cands {
		if !p.room(c) {
			continue
		}
		any = true
		if c.id != avoid && (best == nil || c.load < best.load) {
			best = c
		}
	}
	return best, !any
}
