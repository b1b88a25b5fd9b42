package admin

import (
	"context"

	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// An admission decided on a confirmed view needs two round trips before it
// can be decided: the read index that makes the decision current (DESIGN.md
// §13.8) and the pinned snapshot of the dataset from a backend (§5 step 3).
// Neither needs the other's answer, so decideAdmission runs them side by
// side: it starts the inspect from this replica's state as it is (if that
// state already passes the checks before step 3), then waits for the read
// index, validates again on the current state, and keeps the early inspect
// only if the current state would have asked the same question of the same
// backends:
//
//   - the same catalog (id), credentials reference and dataset locator, so
//     the request to the backend is byte for byte the one a late inspect
//     would send (credentials are resolved when the inspect runs, as
//     always);
//   - the same registered backends (id and address), so the answer comes
//     from a backend the current state names, and a failure to reach any of
//     them is a failure over the same list.
//
// What proves the kept snapshot is one the request may be decided on: it
// was taken after the request arrived (the inspect started then), which is
// all §5 step 3 asks of it; the gate, the names, the catalog and every later
// step are decided on the current state. Otherwise the early inspect is
// cancelled and a late one asks, exactly as without this overlap. A request
// the current state refuses before step 3 gets that refusal, never the
// inspect's answer, so the order of the checks is the one §5 gives; the only
// cost of a wrong guess is one inspect. The inspect a leader view's decision
// ran (decide.go) is kept on the same terms.

// validateFunc is an admission's checks before step 3 on one state: the
// record to admit and its catalog, or the typed refusal.
type validateFunc func(st *raftfsm.State) (*job.Record, *raftfsm.Catalog, error)

// earlyInspect is an inspect taken from one view, which a decision on
// another may keep (asks).
type earlyInspect struct {
	cancel   context.CancelFunc
	done     chan struct{}
	catalog  int64
	credRef  string
	locator  string
	backends []*raftfsm.Backend
	snap     *job.Snapshot // set before done is closed
	err      error
}

// inspectAhead starts the inspect from this replica's state as it is, when
// a read index is still to come (Deps.ReadIndex) and that state passes
// validate; else nil.
func (s *Server) inspectAhead(ctx context.Context, validate validateFunc) *earlyInspect {
	if s.d.ReadIndex == nil {
		return nil // current is immediate: nothing to overlap
	}
	st := s.d.Reader.State()
	rec, cat, err := validate(st)
	if err != nil {
		return nil // decided on the current state, inspect after
	}
	e, ictx := newInspect(ctx, st, cat, rec.Locator)
	go func() {
		defer close(e.done)
		e.snap, _, e.err = s.inspect(ictx, st, cat, rec.Locator)
	}()
	return e
}

// inspectNow inspects from st, under ctx, and returns the inspect, done
// (nothing left to cancel).
func (s *Server) inspectNow(ctx context.Context, st *raftfsm.State, cat *raftfsm.Catalog, locator string) *earlyInspect {
	e := inspectFrom(st, cat, locator, func() {}, inspectDone)
	e.snap, _, e.err = s.inspect(ctx, st, cat, locator)
	return e
}

// inspectDone is the done channel of an inspect that ran to its end before
// it was handed out.
var inspectDone = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// newInspect is an inspect from st, not started: done is open, and its
// context derives from ctx.
func newInspect(ctx context.Context, st *raftfsm.State, cat *raftfsm.Catalog, locator string) (*earlyInspect, context.Context) {
	ictx, cancel := context.WithCancel(ctx)
	return inspectFrom(st, cat, locator, cancel, make(chan struct{})), ictx
}

// inspectFrom is the question an inspect from st asks (earlyInspect.asks).
func inspectFrom(st *raftfsm.State, cat *raftfsm.Catalog, locator string, cancel context.CancelFunc, done chan struct{}) *earlyInspect {
	return &earlyInspect{cancel: cancel, done: done, catalog: cat.ID,
		credRef: cat.CredentialsRef, locator: locator, backends: st.Backends()}
}

// asks reports whether the current state would send the same inspect to
// the same backends as e did.
func (e *earlyInspect) asks(st *raftfsm.State, cat *raftfsm.Catalog, locator string) bool {
	if cat.ID != e.catalog || cat.CredentialsRef != e.credRef || locator != e.locator {
		return false
	}
	now := st.Backends()
	if len(now) != len(e.backends) {
		return false
	}
	for i, b := range now {
		if b.ID != e.backends[i].ID || b.Address != e.backends[i].Address {
			return false
		}
	}
	return true
}
