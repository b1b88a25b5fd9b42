package backend

import (
	"crypto/sha256"
	"time"

	"github.com/lancemaster/lancemaster/gen-go/wire"
)

// DefaultMaxTombstones bounds the tombstones of forgotten invocations (see
// table). A tombstone is 16 bytes of key in a map, about 30 bytes of memory
// all told: the bound costs at most ~32 MiB, reached after a million
// forgotten invocations in one process's life.
const DefaultMaxTombstones = 1 << 20

// invocation is one accepted dispatch of this process. Its fields are
// guarded by Agent.mu, except dispatch, which only the worker that took the
// invocation from the queue reads (it was written before the send on the
// queue channel).
type invocation struct {
	id       string
	jobID    int64
	deadline time.Time
	// dispatch holds the request, storage credentials included, in memory
	// only, until the worker starts; the worker drops it when it finishes.
	dispatch *wire.TLanceIndexJobDispatch

	state  wire.TLanceInvocationState
	report *wire.TLanceIndexJobReport // set when FINISHED
	// held: the report waits for delivery (in the outbox, or in memory when
	// the outbox write failed); the entry is never forgotten meanwhile.
	held bool
	// indexUUID and phase are what the worker announced (progress).
	indexUUID, phase string
	announcements    int // progress updates stored, bounded by maxAnnouncements
	// log is the worker's redacted stderr (jobs logs), set at accept and
	// never replaced; it has its own lock. startedAt is when the worker was
	// started (RUNNING), on the agent's clock.
	log       *jobLog
	startedAt time.Time
}

// table is the invocations this process accepted, by invocation id. It is
// what makes a redelivered dispatch answer OK without running twice, and
// what query answers from.
//
// Finished entries are forgotten Grace after their deadline, never while
// their report is held for delivery; queued and running ones never are. A
// forgotten entry leaves a tombstone (a 16-byte hash of its id) for the
// life of the process: query answers FORGOTTEN for it (it proves nothing),
// never UNKNOWN_INVOCATION, and a redelivery of it answers OK without
// running. Past maxTombstones the table goes lossy: the tombstones are
// dropped and every id it does not hold answers FORGOTTEN from then on —
// still true, but this process can no longer prove that an id was never
// accepted (the master then waits for the deadline instead of returning the
// job to PENDING). A hash collision errs the same, safe way.
//
// Not safe for concurrent use: the Agent guards it with its mutex.
type table struct {
	byID          map[string]*invocation
	tombstones    map[[16]byte]struct{}
	maxTombstones int
	lossy         bool
	queued        int
	running       int
}

func newTable(maxTombstones int) *table {
	if maxTombstones <= 0 {
		maxTombstones = DefaultMaxTombstones
	}
	return &table{byID: make(map[string]*invocation), tombstones: make(map[[16]byte]struct{}), maxTombstones: maxTombstones}
}

func tombstoneKey(id string) [16]byte {
	sum := sha256.Sum256([]byte(id))
	var k [16]byte
	copy(k[:], sum[:16])
	return k
}

func (t *table) get(id string) (*invocation, bool) {
	inv, ok := t.byID[id]
	return inv, ok
}

// forgotten reports whether id may be a forgotten invocation of this
// process: it has a tombstone, or the table is lossy.
func (t *table) forgotten(id string) bool {
	if _, ok := t.byID[id]; ok {
		return false
	}
	if t.lossy {
		return true
	}
	_, ok := t.tombstones[tombstoneKey(id)]
	return ok
}

// duplicate reports whether a dispatch of id with this deadline must be
// taken for a redelivery: the table holds id, or a tombstone of it, or —
// lossy — the dispatch's deadline + grace has passed (only then could it be
// a forgotten one; a new dispatch is never that late).
func (t *table) duplicate(id string, deadline, now time.Time, grace time.Duration) bool {
	if _, ok := t.byID[id]; ok {
		return true
	}
	if t.lossy {
		return now.After(deadline.Add(grace))
	}
	_, ok := t.tombstones[tombstoneKey(id)]
	return ok
}

// add records a newly accepted (QUEUED) invocation.
func (t *table) add(inv *invocation) {
	inv.state = wire.TLanceInvocationState_QUEUED
	t.byID[inv.id] = inv
	t.queued++
}

// markRunning moves a queued invocation to RUNNING.
func (t *table) markRunning(inv *invocation) {
	if inv.state == wire.TLanceInvocationState_QUEUED {
		t.queued--
		t.running++
		inv.state = wire.TLanceInvocationState_RUNNING
	}
}

// markFinished records the final report of a queued or running invocation;
// held says the report waits for delivery.
func (t *table) markFinished(inv *invocation, rep *wire.TLanceIndexJobReport, held bool) {
	switch inv.state {
	case wire.TLanceInvocationState_QUEUED:
		t.queued--
	case wire.TLanceInvocationState_RUNNING:
		t.running--
	case wire.TLanceInvocationState_FINISHED:
		return
	}
	inv.state = wire.TLanceInvocationState_FINISHED
	inv.report = rep
	inv.held = held
	inv.dispatch = nil
	if inv.log != nil {
		inv.log.shrink()
	}
}

// settled records that the report of id left the outbox (delivered, refused
// for good, or expired): the entry may be forgotten from now on.
func (t *table) settled(id string) {
	if inv, ok := t.byID[id]; ok && inv.state == wire.TLanceInvocationState_FINISHED {
		inv.held = false
	}
}

// forgetFinished drops the finished invocations whose deadline + grace is
// before now and whose report is no longer held, leaving a tombstone for
// each, and returns how many.
func (t *table) forgetFinished(now time.Time, grace time.Duration) int {
	n := 0
	for id, inv := range t.byID {
		if inv.state == wire.TLanceInvocationState_FINISHED && !inv.held && now.After(inv.deadline.Add(grace)) {
			delete(t.byID, id)
			t.tombstone(id)
			n++
		}
	}
	return n
}

func (t *table) tombstone(id string) {
	if t.lossy {
		return
	}
	if len(t.tombstones) >= t.maxTombstones {
		t.lossy, t.tombstones = true, nil
		return
	}
	t.tombstones[tombstoneKey(id)] = struct{}{}
}

// status is the query answer for id.
func (t *table) status(id string) *wire.TInvocationStatus {
	inv, ok := t.byID[id]
	if !ok {
		state := wire.TLanceInvocationState_UNKNOWN_INVOCATION
		if t.forgotten(id) {
			state = wire.TLanceInvocationState_FORGOTTEN
		}
		return &wire.TInvocationStatus{InvocationID: id, State: state}
	}
	st := &wire.TInvocationStatus{InvocationID: id, State: inv.state}
	if u := inv.indexUUID; u != "" {
		st.IndexUUID = &u
	}
	if inv.state == wire.TLanceInvocationState_FINISHED && inv.report != nil {
		st.Result_ = copyReport(inv.report)
		if p := inv.report.TerminationProof; p != nil {
			pv := *p
			st.TerminationProof = &pv
		}
		if inv.report.ResultCode == nil {
			noResult := true
			st.NoResult_ = &noResult
			if m := inv.report.SanitizedMessage; m != nil {
				mv := *m
				st.SanitizedMessage = &mv
			}
		}
		if st.IndexUUID == nil && inv.report.IndexUUID != nil {
			u := *inv.report.IndexUUID
			st.IndexUUID = &u
		}
	}
	return st
}

// copyReport returns a deep copy, so an answer being serialized never
// shares memory with the table.
func copyReport(r *wire.TLanceIndexJobReport) *wire.TLanceIndexJobReport {
	c := *r
	c.ResultCode = clonePtr(r.ResultCode)
	c.CompletionReason = clonePtr(r.CompletionReason)
	c.SanitizedMessage = clonePtr(r.SanitizedMessage)
	c.ExternalMetadataAdvanced = clonePtr(r.ExternalMetadataAdvanced)
	c.TerminationProof = clonePtr(r.TerminationProof)
	c.InvocationSecret = clonePtr(r.InvocationSecret)
	c.Forwarded = clonePtr(r.Forwarded)
	c.IndexUUID = clonePtr(r.IndexUUID)
	c.DatasetVersion = clonePtr(r.DatasetVersion)
	c.Resources = clonePtr(r.Resources)
	c.LogTail = clonePtr(r.LogTail)
	c.LeftoverIndexUUID = clonePtr(r.LeftoverIndexUUID)
	if r.OptimizedIndexes != nil {
		c.OptimizedIndexes = make([]*wire.TOptimizedIndex, len(r.OptimizedIndexes))
		for i, ix := range r.OptimizedIndexes {
			d := *ix
			d.Before, d.After = clonePtr(ix.Before), clonePtr(ix.After)
			c.OptimizedIndexes[i] = &d
		}
	}
	return &c
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
