package faults

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// Invariant names, as printed in a failure.
const (
	invAtMostOnce   = "at-most-once"         // no job accepted by a backend twice
	invAdmissions   = "admissions-kept"      // no acknowledged admission lost
	invReplicas     = "replicas-identical"   // every replica's records identical
	invConverged    = "terminal-or-waiting"  // every job terminal or legitimately waiting
	invNotCommitted = "not-committed-proven" // no NOT_COMMITTED without its evidence
	invRefusal      = "refusal-survivable"   // §13.2: no job ended by a refusal it could have survived
	invCommitted    = "committed-proven"     // no COMMITTED without a NATIVE_OK from its invocation
	invUnknown      = "no-unknown-if-held"   // no UNKNOWN (no trusted result) where a backend held a finished result
)

type violation struct{ invariant, detail string }

func (v violation) String() string { return v.invariant + ": " + v.detail }

// defaultMaxDispatchAttempts is lance_index_job_max_dispatch_attempts'
// default (DESIGN.md §11, §13.2), read when the option is not set.
const defaultMaxDispatchAttempts = 5

// clockSlackMs is how much later than a worker's end a decision must come
// before the harness holds the backend's answer against it (a sweep's
// query and its proposal are a few milliseconds apart).
const clockSlackMs = 2000

// converge waits, bounded, until the healed cluster has settled:
//  1. a leader that hears every backend;
//  2. reports, reconcile, resolve, dispatch and refresh run until no job
//     is PENDING, RUNNING, RESOLVING or waiting for its refresh, or the
//     journal is quiet for 1.5 s;
//  3. if jobs are still unsettled, every clock jumps past every deadline
//     so the deadline sweep (and its reconcile) decides them, then again
//     until settled or quiet for 4 s;
//  4. every replica has applied the same index.
func (e *execution) converge() {
	w := e.w
	if w.awaitLeader(30*time.Second) < 0 {
		w.note("converge: no leader")
		return
	}
	if !await(20*time.Second, w.allBackendsAlive) {
		w.note("converge: the leader does not hear every backend")
	}
	e.settle(15*time.Second, 1500*time.Millisecond)
	if n := e.unsettled(); n > 0 {
		w.clock.jump((deadlineSecond + 60) * time.Second)
		w.note("converge: %d jobs unsettled; clocks jump past every deadline (now %v ahead)", n, w.clock.offset())
		e.settle(20*time.Second, 4*time.Second)
	}
	ok := await(15*time.Second, func() bool {
		var idx []uint64
		for _, st := range w.states() {
			idx = append(idx, st.AppliedIndex())
		}
		if len(idx) != nMasters {
			return false
		}
		return idx[0] == idx[1] && idx[1] == idx[2]
	})
	w.note("converge: replicas at one index: %v", ok)
}

// unsettled counts the leader's jobs that are PENDING (but not held by a
// restore: that waits for an operator), RUNNING or RESOLVING, or terminal
// with a refresh still to do (UNKNOWN holds its fence until an operator
// releases it: settled).
func (e *execution) unsettled() int {
	l := e.w.leader()
	if l < 0 {
		return -1
	}
	n := 0
	forJobs(e.w.master(l).FSM().State(), func(r *job.Record) {
		switch {
		case r.MutationState == job.Pending && r.RestoreHold:
			// held by a restore: waits for an operator (settled)
		case r.MutationState == job.Pending, r.MutationState == job.Running, r.MutationState == job.Resolving:
			n++
		case r.Unresolved() && r.MutationState != job.Unknown:
			n++
		}
	})
	return n
}

func (e *execution) settle(timeout, quiet time.Duration) {
	var last uint64
	lastChange := time.Now()
	await(timeout, func() bool {
		if e.unsettled() == 0 {
			return true
		}
		l := e.w.leader()
		if l < 0 {
			lastChange = time.Now()
			return false
		}
		if a := e.w.master(l).FSM().State().AppliedIndex(); a != last {
			last, lastChange = a, time.Now()
		}
		return time.Since(lastChange) > quiet
	})
}

func forJobs(st *raftfsm.State, f func(*job.Record)) {
	for after := int64(0); ; {
		recs, more := st.ListJobs(raftfsm.JobFilter{}, after, 1000)
		for _, r := range recs {
			f(r)
		}
		if !more || len(recs) == 0 {
			return
		}
		after = recs[len(recs)-1].JobID
	}
}

// check runs every invariant on the converged cluster.
func (e *execution) check() []violation {
	w := e.w
	var out []violation
	add := func(inv, format string, args ...any) {
		out = append(out, violation{inv, fmt.Sprintf(format, args...)})
	}
	states := w.states()
	if len(states) != nMasters {
		add(invReplicas, "only %d of %d masters run after the heal", len(states), nMasters)
	}
	l := w.awaitLeader(10 * time.Second)
	if l < 0 {
		add(invConverged, "no leader after the heal")
		for i := range states {
			l = i
			break
		}
	}
	if l < 0 {
		return out
	}
	st := states[l]

	// Replicas identical: the snapshot bytes of one applied index.
	var ref []byte
	refIdx := -1
	for i := 0; i < nMasters; i++ {
		s, ok := states[i]
		if !ok {
			continue
		}
		var b bytes.Buffer
		if err := s.WriteSnapshot(&b); err != nil {
			add(invReplicas, "m%d: snapshot: %v", i, err)
			continue
		}
		if ref == nil {
			ref, refIdx = b.Bytes(), i
			continue
		}
		if !bytes.Equal(ref, b.Bytes()) {
			add(invReplicas, "m%d (applied %d) differs from m%d (applied %d):\n%s", i, s.AppliedIndex(), refIdx,
				states[refIdx].AppliedIndex(), digestDiff(states[refIdx], s))
		}
	}

	// No acknowledged admission lost.
	for _, ad := range e.admissions {
		if !ad.acked || ad.rolled {
			continue
		}
		for i, s := range states {
			r, ok := s.Job(ad.jobID)
			switch {
			case !ok:
				add(invAdmissions, "%s acknowledged as job %d is missing on m%d", ad.name, ad.jobID, i)
			case r.DisplayIndexName != ad.name:
				add(invAdmissions, "%s acknowledged as job %d: m%d has %q there", ad.name, ad.jobID, i, r.DisplayIndexName)
			}
		}
	}

	// At most one accepted invocation per job (by index name: job ids may
	// be reused after a snapshot restore).
	for name, invs := range w.ledger.byName() {
		var acc []string
		for _, v := range invs {
			if v.accepted() {
				acc = append(acc, v.String())
			}
		}
		if len(acc) > 1 {
			note := ""
			if e.restored {
				note = " (an operator snapshot restore ran in this schedule)"
			}
			add(invAtMostOnce, "%s: %d invocations accepted%s:\n      %s\n      submits: %s", name, len(acc), note,
				strings.Join(acc, "\n      "), w.ledger.submitHistory(name))
		}
	}

	maxAttempts := st.Options().MaxDispatchAttempts
	if maxAttempts <= 0 {
		maxAttempts = defaultMaxDispatchAttempts
	}
	paused := st.Options().DispatcherPaused
	accepting := 0
	for _, b := range w.backends {
		if b.up() && !b.refuse.Load() {
			accepting++
		}
	}
	forJobs(st, func(r *job.Record) {
		inv, known := w.ledger.lookup(r.InvocationID)
		if r.InvocationID == "" {
			known = false
		}
		what := fmt.Sprintf("job %d %q (%s, rev %d, result %s %q, proof %s, attempts %d)", r.JobID, r.DisplayIndexName,
			r.MutationState, r.Rev, r.Result.Code, clip(r.Result.Message), r.TerminationProof, r.DispatchAttempts)
		ledgerSays := "the ledger knows no such invocation"
		if known {
			ledgerSays = "ledger: " + inv.String()
		}
		switch r.MutationState {
		case job.Pending:
			if r.RestoreHold {
				// Held by a restore that could not vouch for its dispatch
				// history: it waits for an operator, never for a dispatch.
				if !e.restored {
					add(invConverged, "%s is held by a snapshot restore, but no restore ran", what)
				}
				break
			}
			if accepting > 0 && !paused {
				add(invConverged, "%s is PENDING while %d backends accept; submits: %s", what, accepting, w.ledger.submitHistory(r.DisplayIndexName))
			}
		case job.Running, job.Resolving:
			if !(known && inv.runStartMs > 0 && inv.runEndMs == 0 && e.alive(inv)) {
				add(invConverged, "%s is still %s after the heal and every deadline; %s", what, r.MutationState, ledgerSays)
			}
		case job.Committed:
			resolvedCommit := r.Result.Reason == job.ReasonResolvedFromDataset && inv.committed
			if !known || (inv.code != job.NativeOK.String() && !resolvedCommit) {
				add(invCommitted, "%s is COMMITTED; %s", what, ledgerSays)
			}
		case job.NotCommitted:
			if r.TerminationProof == job.ProofNotEnqueued {
				if known && inv.accepted() {
					add(invNotCommitted, "%s is NOT_COMMITTED as never enqueued, but the backend accepted it; %s", what, ledgerSays)
				}
				if int64(r.DispatchAttempts)+1 < maxAttempts {
					add(invRefusal, "%s was ended by a refusal after %d of %d attempts; submits: %s", what, r.DispatchAttempts+1, maxAttempts,
						w.ledger.submitHistory(r.DisplayIndexName))
				}
				break
			}
			switch {
			case !known:
				add(invNotCommitted, "%s is NOT_COMMITTED from a result no backend produced; %s", what, ledgerSays)
			case r.Result.Reason == job.ReasonResolvedFromDataset:
				if inv.committed || inv.code == job.NativeOK.String() {
					add(invNotCommitted, "%s was resolved NOT_COMMITTED from the dataset, but its build committed; %s", what, ledgerSays)
				}
			case inv.code == r.Result.Code.String():
			case inv.runStartMs > 0 && r.Result.Code == job.PreInvocationResourceRejected:
				add(invNotCommitted, "%s is NOT_COMMITTED as never enqueued or launched (proof %s), but its worker ran; %s", what, r.TerminationProof, ledgerSays)
			case inv.runStartMs == 0 && r.Result.Code == job.PreInvocationResourceRejected:
				// Accepted, never started (the agent's own close or a
				// deadline in its queue): a NEVER_LAUNCHED answer.
			default:
				add(invNotCommitted, "%s is NOT_COMMITTED with %s, which its invocation never answered; %s", what, r.Result.Code, ledgerSays)
			}
		case job.Unknown:
			at := becameUnknownMs(r)
			if r.Result.Code == job.NoTrustedResult && known && inv.runEndMs > 0 && inv.code != "" && !inv.crashed &&
				inv.runEndMs+clockSlackMs < at && e.heldAt(inv, r, at) {
				add(invUnknown, "%s became UNKNOWN at %d, %d ms after its worker finished with %s, which backend b%d still held; %s",
					what, at, at-inv.runEndMs, inv.code, inv.backend, ledgerSays)
			}
		}
		if r.Unresolved() && r.MutationState != job.Unknown && r.MutationState != job.Pending &&
			r.MutationState != job.Running && r.MutationState != job.Resolving {
			add(invConverged, "%s is terminal but still unresolved (refresh %s)", what, r.RefreshState)
		}
	})
	sort.SliceStable(out, func(i, j int) bool { return out[i].invariant < out[j].invariant })
	return out
}

func clip(s string) string {
	if len(s) > 100 {
		return s[:100] + "…"
	}
	return s
}

// alive reports whether the process that accepted inv still runs.
func (e *execution) alive(inv invocation) bool {
	for _, in := range e.w.backends[inv.backend].incarnations() {
		if in.epoch == inv.epoch {
			return in.endMs == 0
		}
	}
	return false
}

// becameUnknownMs is when r became UNKNOWN: its timeline's last UNKNOWN
// transition. r.UpdateTimeMs is its last transition's, which may come
// later (seeds 36064, 36083: the deadline sweep gave the job up while its
// backend was down, and the epoch sweep recorded PROCESS_EPOCH_GONE once
// the backend's new process was heard, its outbox holding the result).
func becameUnknownMs(r *job.Record) int64 {
	at := r.UpdateTimeMs
	for _, tr := range job.DecodeTimeline(r.Timeline) {
		if tr.Kind == job.TransitionUnknown {
			at = tr.TimeMs
		}
	}
	return at
}

// heldAt reports whether a backend held inv's finished result at t, when r
// was decided (becameUnknownMs): the process that ran it was up and had not
// forgotten it (its table answers query until its Grace after the deadline
// has passed), or a process on the same outbox
// directory was up while the report was still in the outbox. It stays
// there until a master answers OK, and that answer means the result was
// journaled; only a snapshot restore after it can rewind the journal to
// before it, and then nothing on the backend holds the result any more.
func (e *execution) heldAt(inv invocation, r *job.Record, t int64) bool {
	up := func(in incarnation) bool { return in.startMs <= t && (in.endMs == 0 || in.endMs > t) }
	for _, in := range e.w.backends[inv.backend].incarnations() {
		if in.epoch == inv.epoch && up(in) && t < r.DeadlineMs+graceOf(in).Milliseconds() {
			return true
		}
		if in.dir == inv.dir && up(in) && !e.rewoundAfterTaken(inv, t) {
			return true
		}
	}
	return false
}

// rewoundAfterTaken reports whether a master answered OK to inv's report
// and a snapshot restore then ran, before t.
func (e *execution) rewoundAfterTaken(inv invocation, t int64) bool {
	if inv.takenMs == 0 {
		return false
	}
	for _, r := range e.restores {
		if r.endMs >= inv.takenMs && r.startMs <= t {
			return true
		}
	}
	return false
}

// digestDiff lists the jobs whose records differ between two replicas
// (the invocation secret is compared, never printed).
func digestDiff(a, b *raftfsm.State) string {
	lines := func(st *raftfsm.State) map[int64]string {
		out := map[int64]string{}
		forJobs(st, func(r *job.Record) {
			c := *r
			secretHash := len(c.InvocationSecret)
			c.InvocationSecret = ""
			out[r.JobID] = fmt.Sprintf("%+v secret-len=%d", c, secretHash)
		})
		return out
	}
	la, lb := lines(a), lines(b)
	var diff []string
	for id, s := range la {
		if lb[id] != s {
			diff = append(diff, fmt.Sprintf("    job %d\n      - %s\n      + %s", id, s, lb[id]))
		}
	}
	for id, s := range lb {
		if _, ok := la[id]; !ok {
			diff = append(diff, fmt.Sprintf("    job %d only on one side: %s", id, s))
		}
	}
	sort.Strings(diff)
	if len(diff) == 0 {
		return fmt.Sprintf("    (the jobs agree; books %v vs %v, last job %d vs %d)", a.Books(), b.Books(), a.LastJobID(), b.LastJobID())
	}
	if len(diff) > 10 {
		diff = append(diff[:10], fmt.Sprintf("    … and %d more", len(diff)-10))
	}
	return strings.Join(diff, "\n")
}

// summary is one line about a finished schedule: admissions, final
// states, accepted invocations, injected report faults.
func (e *execution) summary() string {
	acked := 0
	for _, ad := range e.admissions {
		if ad.acked {
			acked++
		}
	}
	states := map[string]int{}
	resolved := 0
	if l := e.w.leader(); l >= 0 {
		forJobs(e.w.master(l).FSM().State(), func(r *job.Record) {
			states[r.MutationState.String()]++
			if r.Result.Reason == job.ReasonResolvedFromDataset {
				resolved++
			}
		})
	}
	accepted := 0
	for _, invs := range e.w.ledger.byName() {
		for _, v := range invs {
			if v.accepted() {
				accepted++
			}
		}
	}
	return fmt.Sprintf("%d admissions (%d acknowledged), jobs %v (%d resolved from the dataset), %d invocations accepted, faults %v",
		len(e.admissions), acked, states, resolved, accepted, e.w.ctl.snapshotCounts())
}
