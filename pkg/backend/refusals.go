package backend

import "time"

// minRefusals is how many permanent refusals (UNAUTHENTICATED,
// STALE_REPORT) a report must collect before it may be dropped (DESIGN.md
// §13.5: a deposed leader that has not noticed answers from its stale view).
const minRefusals = 3

// refusals are the permanent refusals one entry collected.
type refusals struct {
	n       int
	masters map[string]bool
	terms   map[int64]bool
	first   time.Time
}

func (r *refusals) add(addr string, term int64, now time.Time) {
	if r.n == 0 {
		r.masters, r.terms, r.first = map[string]bool{}, map[int64]bool{}, now
	}
	r.n++
	r.masters[addr], r.terms[term] = true, true
}

// final: enough refusals, confirmed by a second master, a second leader
// term, or time.
func (r *refusals) final(now time.Time, window time.Duration) bool {
	return r.n >= minRefusals && (len(r.masters) >= 2 || len(r.terms) >= 2 || now.Sub(r.first) >= window)
}
