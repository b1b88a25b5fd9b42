package raftfsm

import (
	"strconv"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
)

// The job timeline (pkg/job/timeline.go): every transition (tx.transition)
// appends what it did, read off the difference between the record before
// and after, with the command's clock and the entry's journal index. It is
// part of the record, so it is deterministic, in snapshots, and the same in
// Preview (which drops it with the rest of its transaction).

// transitionsOf lists what changing old into n did, in the order a reader
// follows: the dispatch, what its worker said, the outcome, the operator's
// acts, the refresh, and the end.
func transitionsOf(old, n *job.Record, now int64, index uint64) []job.Transition {
	var out []job.Transition
	add := func(k job.TransitionKind, actor, detail string) {
		out = append(out, job.Transition{Kind: k, TimeMs: now, Index: index, Actor: actor, Detail: detail})
	}
	if old.MutationState == job.Pending && n.MutationState == job.Running {
		add(job.TransitionDispatched, "", job.DispatchDetail(n))
	}
	if n.MutationState == job.Running && old.IndexUUID == "" && n.IndexUUID != "" {
		add(job.TransitionAccepted, "", n.IndexUUID)
	}
	if n.BuildPhase != old.BuildPhase && n.BuildPhase != "" {
		add(job.TransitionPhase, "", n.BuildPhase)
	}
	if n.TerminationProof != old.TerminationProof && n.TerminationProof != job.ProofNone && n.TerminationProof != 0 {
		add(job.TransitionSlotReleased, "", n.TerminationProof.String())
	}
	if n.Result.Code != 0 && n.Result != old.Result {
		add(job.TransitionReported, "", n.Result.Code.String())
	}
	if n.MutationState != old.MutationState {
		switch n.MutationState {
		case job.Pending:
			add(job.TransitionReturnedToPending, "", "attempts "+strconv.FormatInt(int64(n.DispatchAttempts), 10))
		case job.Resolving:
			add(job.TransitionResolving, "", "")
		case job.Committed, job.NotCommitted:
			add(job.TransitionResolved, "", n.MutationState.String())
		case job.Unknown:
			add(job.TransitionUnknown, "", "")
		case job.Cancelled:
			add(job.TransitionCancelled, n.CancelActor, "")
		}
	}
	if n.ForceReleased && !old.ForceReleased {
		add(job.TransitionForceReleased, n.ForceActor, n.ForceNote)
	}
	if n.RefreshState != old.RefreshState && n.MutationState.IsOutcome() {
		switch n.RefreshState {
		case job.RefreshRequired:
			add(job.TransitionRefreshRequired, "", "")
		case job.RefreshRunning:
			add(job.TransitionRefreshRunning, "", "")
		case job.RefreshDone:
			add(job.TransitionRefreshDone, "", "")
		case job.RefreshFailed:
			add(job.TransitionRefreshFailed, "", "")
		}
	}
	if old.Unresolved() && !n.Unresolved() {
		add(job.TransitionDone, "", "")
	}
	return out
}

// recordTimeline appends to n's timeline what changing old into n did.
func (t *tx) recordTimeline(old, n *job.Record) {
	add := transitionsOf(old, n, t.now, t.index)
	if len(add) == 0 {
		return
	}
	n.Timeline = job.AppendTimeline(n.Timeline, add...)
}

// ---- the journal form -------------------------------------------------------

func timelineToThrift(s string) []*journal.TJobTransition {
	tl := job.DecodeTimeline(s)
	if len(tl) == 0 {
		return nil
	}
	out := make([]*journal.TJobTransition, len(tl))
	for i := range tl {
		e := &tl[i]
		j := &journal.TJobTransition{Kind: journal.TJobTransitionKind(e.Kind), TimeMs: optInt64(&e.TimeMs),
			Actor: optString(&e.Actor), Detail: optString(&e.Detail)}
		if e.Index != 0 {
			ix := int64(e.Index)
			j.Index = &ix
		}
		out[i] = j
	}
	return out
}

// timelineOfThrift reads a journal timeline; an element of an unknown kind
// is kept (a newer master's), and the bound holds whatever the list says.
func timelineOfThrift(l []*journal.TJobTransition) string {
	if len(l) == 0 {
		return ""
	}
	out := make([]job.Transition, 0, min(len(l), job.MaxTimeline))
	for _, j := range l {
		if j == nil {
			continue
		}
		out = append(out, job.Transition{Kind: job.TransitionKind(j.Kind), TimeMs: j.GetTimeMs(),
			Index: uint64(max(j.GetIndex(), 0)), Actor: j.GetActor(), Detail: j.GetDetail()})
	}
	return job.EncodeTimeline(job.BoundTimeline(out))
}

// timeline reads field 55 of a TJobRecord for the snapshot decoder, with
// the generated reader's rules (an element field of an unexpected type or
// id is skipped; an element without its kind is malformed).
func (r *compactReader) timeline() string {
	n, ok := r.structList()
	if !ok {
		return ""
	}
	out := make([]job.Transition, 0, min(n, job.MaxTimeline))
	for i := uint64(0); i < n && r.err == nil; i++ {
		var e job.Transition
		kind := false
		r.eachField(func(typ byte, id int16) {
			switch {
			case id == 1 && typ == ctI32:
				e.Kind, kind = job.TransitionKind(r.i32()), true
			case id == 2 && typ == ctI64:
				e.TimeMs = r.i64()
			case id == 3 && typ == ctI64:
				e.Index = uint64(max(r.i64(), 0))
			case id == 4 && typ == ctBinary:
				e.Actor = string(r.binary())
			case id == 5 && typ == ctBinary:
				e.Detail = string(r.binary())
			default:
				r.skip(typ, true, 1)
			}
		})
		if r.err == nil && !kind {
			r.fail()
		}
		out = append(out, e)
	}
	if r.err != nil {
		return ""
	}
	return job.EncodeTimeline(job.BoundTimeline(out))
}

// structList reads a list header; ok when it is a list of structs that
// can fit what is left, else the list is skipped.
func (r *compactReader) structList() (n uint64, ok bool) {
	h := r.byte()
	n = uint64(h >> 4)
	if n == 15 {
		n = r.uvarint()
	}
	if h&0x0f != ctStruct || n > uint64(len(r.b)-r.pos) {
		r.skipN(n, h&0x0f, h&0x0f, false, 0)
		return 0, false
	}
	return n, true
}
