package admin

import (
	"context"

	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// An admission needs two round trips before it can be decided: the read
// index that makes the decision current (DESIGN.md §13.8) and the pinned
// snapshot of the dataset from a backend (§5 step 3). Neither needs the
// other's answer, so currentSnapshot runs them side by side: it starts the
// inspect from this replica's state as it is (if that state already passes
// the checks before step 3), then waits for the read index, validates again
// on the current state, and keeps the early inspect only if the current
// state would have asked the same question of the same backends:
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
// cost of a wrong guess is one inspect.

// validateFunc is an admission's checks before step 3 on one state: the
// record to admit and its catalog, or the typed refusal.
type validateFunc func(st *raftfsm.State) (*job.Record, *raftfsm.Catalog, error)

// earlyInspect is an inspect started before the read index completed.
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

// currentSnapshot returns the current state, the record it validates and
// the dataset's pinned snapshot, or the first error in §5's order (a
// read-index error, the refusal of validate, then the inspect's).
func (s *Server) currentSnapshot(ctx context.Context, validate validateFunc) (*raftfsm.State, *job.Record, *raftfsm.Catalog, *job.Snapshot, error) {
	early := s.inspectAhead(ctx, validate)
	if early != nil {
		defer early.cancel()
	}
	if err := s.current(ctx); err != nil {
		return nil, nil, nil, nil, err
	}
	st := s.d.Reader.State()
	rec, cat, err := validate(st)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	if early != nil && early.asks(st, cat, rec.Locator) {
		<-early.done // its context derives from ctx: it ends when ctx does
		return st, rec, cat, early.snap, early.err
	}
	snap, _, err := s.inspect(ctx, st, cat, rec.Locator)
	return st, rec, cat, snap, err
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
	ictx, cancel := context.WithCancel(ctx)
	e := &earlyInspect{cancel: cancel, done: make(chan struct{}), catalog: cat.ID,
		credRef: cat.CredentialsRef, locator: rec.Locator, backends: st.Backends()}
	go func() {
		defer close(e.done)
		e.snap, _, e.err = s.inspect(ictx, st, cat, rec.Locator)
	}()
	return e
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
