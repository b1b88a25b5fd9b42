package admin

import (
	"context"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// An admission (an index job or an OPTIMIZE) is decided in DESIGN.md §5's
// order on one view of the journal. How current that view must be
// (§13.8) depends on the answer.
//
// An admission that is journaled is decided again by the FSM, at the
// entry's own index: the entry is appended after the request arrived, and
// admit re-checks there everything in the record that rests on the
// journal — the mutation gate and the option bounds (admit_rules 2), the
// catalog by id with its provider and the root its locator lies under, the
// fence and the three quotas. The rest of the record rests on the request
// and on the dataset's snapshot, which was taken after the request arrived
// (§5 step 3). What proves a journaled admission right is that apply, on
// the log's own state; a view confirmed before it adds nothing.
//
// So the leader, once its term's barrier has been applied, decides on its
// own view (leaderView): this replica once it reflects the commit index
// the leader had when the request arrived, a local wait with no round
// trip. When this master still leads, that is exactly the view a read
// index would confirm; when it was deposed without knowing it, the entry it
// proposes commits in its term only if no newer leader had committed
// anything, and in a later term of its own only through the FSM's apply.
//
// Every other answer — a refusal, or a no-op (IF NOT EXISTS, IF EXISTS) —
// is an answer for good judged on the view itself, so it is given only on
// a confirmed view: the read index (current.go), then the decision taken
// again on the state it gives. The leader view's inspect serves that
// second decision when the confirmed state asks the same question of the
// same backends (earlyInspect.asks): a refusal costs a read index more,
// not an inspect more.
//
// Anywhere else (a follower, a leader before its barrier, a wiring without
// Deps.LeaderIndex) the decision is taken once, on a confirmed view, with
// the inspect started beside the read index (inspect_ahead.go).

// admissionPlan is an admission decided through §5 step 7 on one view: the
// record to journal or, when noop is set, the answer that no job is needed.
type admissionPlan struct {
	rec  *job.Record
	noop string
	// conflict is a FENCE_CONFLICT's message, given the fencing job id.
	conflict func(jobID int64) string
}

// planFunc is §5 steps 4 to 6, given what validate (steps 1 and 2)
// returned on a view and the dataset's snapshot (step 3).
type planFunc func(rec *job.Record, cat *raftfsm.Catalog, snap *job.Snapshot) (*admissionPlan, error)

// decideAdmission decides an admission (validate, the inspect, plan, the
// quota limits) on the view its answer needs, and journals it (step 8).
func (s *Server) decideAdmission(ctx context.Context, validate validateFunc, plan planFunc) (*adminapi.TAdmitResponse, error) {
	var early *earlyInspect
	if st, ok := s.leaderView(ctx); ok {
		p, in, err := s.decideOn(ctx, st, validate, plan, nil)
		if err == nil && p.noop == "" {
			return s.journalAdmission(ctx, p)
		}
		early = in // nil when validate refused: nothing was asked
	} else {
		early = s.inspectAhead(ctx, validate)
	}
	if early != nil {
		defer early.cancel()
	}
	if err := s.current(ctx); err != nil {
		return nil, err
	}
	p, _, err := s.decideOn(ctx, s.d.Reader.State(), validate, plan, early)
	if err != nil {
		return nil, toAdminError(err)
	}
	if p.noop != "" {
		return &adminapi.TAdmitResponse{Noop: true, Message: &p.noop}, nil
	}
	return s.journalAdmission(ctx, p)
}

// decideOn is steps 1 to 7 on st. Step 3's answer is early's when early
// asks what st asks; else a new inspect's, returned for a later decision.
// The first error in §5's order is returned: validate's refusal, the
// inspect's, plan's, then the quota limits'.
func (s *Server) decideOn(ctx context.Context, st *raftfsm.State, validate validateFunc, plan planFunc,
	early *earlyInspect) (*admissionPlan, *earlyInspect, error) {
	rec, cat, err := validate(st)
	if err != nil {
		return nil, nil, err
	}
	in := early
	if in == nil || !in.asks(st, cat, rec.Locator) {
		if in != nil {
			in.cancel()
		}
		in = s.inspectNow(ctx, st, cat, rec.Locator)
	}
	<-in.done // its context derives from ctx: it ends when ctx does
	if in.err != nil {
		return nil, in, in.err
	}
	p, err := plan(rec, cat, in.snap)
	if err == nil && p.noop == "" {
		err = checkQuotaLimits(st) // step 7
	}
	return p, in, err
}

// leaderView is this leader's own view (see above): the local state once
// it reflects the commit index this master had at the call, when it leads
// with its term's barrier applied (Deps.LeaderIndex). ok is false when
// there is no such view, or this replica does not get there within
// currentWaitMax.
func (s *Server) leaderView(ctx context.Context) (*raftfsm.State, bool) {
	if s.d.LeaderIndex == nil {
		return nil, false
	}
	idx, ok := s.d.LeaderIndex()
	if !ok {
		return nil, false
	}
	ctx, cancel := context.WithTimeout(ctx, currentWaitMax)
	defer cancel()
	if !s.await(ctx, func() bool { return s.d.CaughtUp(idx) }) {
		return nil, false
	}
	return s.d.Reader.State(), true
}
