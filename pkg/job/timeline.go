package job

import (
	"encoding/binary"
	"math"
	"math/bits"
	"strconv"
	"strings"
)

// A job's timeline: its transitions in journal order, each with the
// command's master clock, the actor where there is one and the journal
// (Raft) index of the entry that made it. The FSM appends to it inside
// Apply (raftfsm/timeline.go). Admission is never stored: it is derived
// from the record's own CreateTimeMs and AdmitIndex, so a job that is only
// admitted carries no list at all.

// TransitionKind names one kind of transition. The values equal the
// journal's TJobTransitionKind.
type TransitionKind int32

const (
	TransitionAdmitted          TransitionKind = 1
	TransitionDispatched        TransitionKind = 2 // detail: backend and attempt
	TransitionAccepted          TransitionKind = 3 // the worker announced the index it builds (detail: uuid)
	TransitionPhase             TransitionKind = 4 // detail: the phase
	TransitionReported          TransitionKind = 5 // detail: the result code
	TransitionReturnedToPending TransitionKind = 6 // a dispatch proven never enqueued (detail: attempts)
	TransitionResolving         TransitionKind = 7
	TransitionResolved          TransitionKind = 8 // detail: the outcome
	TransitionUnknown           TransitionKind = 9
	TransitionCancelled         TransitionKind = 10
	TransitionForceReleased     TransitionKind = 11 // detail: the operator's note
	TransitionRefreshRequired   TransitionKind = 12
	TransitionRefreshRunning    TransitionKind = 13
	TransitionRefreshDone       TransitionKind = 14
	TransitionRefreshFailed     TransitionKind = 15
	TransitionDone              TransitionKind = 16 // the job released its fence and quota
	TransitionSlotReleased      TransitionKind = 17 // the worker is provably gone (detail: the proof)
	TransitionHeld              TransitionKind = 18 // held by a snapshot restore: never dispatched again (detail: why)
)

var transitionNames = map[TransitionKind]string{
	TransitionAdmitted: "ADMITTED", TransitionDispatched: "DISPATCHED", TransitionAccepted: "ACCEPTED",
	TransitionPhase: "PHASE", TransitionReported: "REPORTED", TransitionReturnedToPending: "RETURNED_TO_PENDING",
	TransitionResolving: "RESOLVING", TransitionResolved: "RESOLVED", TransitionUnknown: "UNKNOWN",
	TransitionCancelled: "CANCELLED", TransitionForceReleased: "FORCE_RELEASED",
	TransitionRefreshRequired: "REFRESH_REQUIRED", TransitionRefreshRunning: "REFRESH_RUNNING",
	TransitionRefreshDone: "REFRESH_DONE", TransitionRefreshFailed: "REFRESH_FAILED", TransitionDone: "DONE",
	TransitionSlotReleased: "SLOT_RELEASED", TransitionHeld: "HELD",
}

func (k TransitionKind) String() string {
	if n, ok := transitionNames[k]; ok {
		return n
	}
	return "INVALID"
}

// TransitionKinds lists every kind, in value order.
func TransitionKinds() []TransitionKind {
	out := make([]TransitionKind, 0, len(transitionNames))
	for k := TransitionAdmitted; k <= TransitionHeld; k++ {
		out = append(out, k)
	}
	return out
}

// Transition is one entry of a timeline.
type Transition struct {
	Kind   TransitionKind
	TimeMs int64  // the command's master clock
	Index  uint64 // the journal index of the entry; 0: not recorded (an entry older than timelines)
	Actor  string // who asked for it, when someone did
	Detail string
}

// MaxTimeline bounds the transitions a record keeps (admission not
// counted: it is never stored). When full, the oldest PHASE goes first,
// then the oldest transition.
const MaxTimeline = 32

// AppendTimeline returns the encoded timeline tl with add appended, bounded
// by MaxTimeline.
func AppendTimeline(tl string, add ...Transition) string {
	if len(add) == 0 {
		return tl
	}
	if n, ok := canonicalLen(tl); ok && n+len(add) <= MaxTimeline {
		// tl is EncodeTimeline's own form of its n transitions and nothing
		// is dropped, so decoding, appending and encoding again would give
		// tl followed by add's encoding: build that directly (each
		// transition of a job would otherwise decode and copy every
		// earlier one).
		var b strings.Builder
		b.Grow(len(tl) + 24*len(add))
		b.WriteString(tl)
		var head [64]byte // a transition's encoding, on the stack unless long
		for _, a := range add {
			b.Write(appendTransition(head[:0], a))
		}
		return b.String()
	}
	return appendDecoded(tl, add)
}

// appendDecoded is AppendTimeline by its definition: decode, append
// (dropping what MaxTimeline asks), encode.
func appendDecoded(tl string, add []Transition) string {
	out := DecodeTimeline(tl)
	for _, a := range add {
		if len(out) == MaxTimeline {
			out = dropOne(out)
		}
		out = append(out, a)
	}
	return EncodeTimeline(out)
}

// BoundTimeline drops from tl, in place, what is past MaxTimeline (as
// AppendTimeline would have).
func BoundTimeline(tl []Transition) []Transition {
	for len(tl) > MaxTimeline {
		tl = dropOne(tl)
	}
	return tl
}

func dropOne(tl []Transition) []Transition {
	drop := 0
	for i, e := range tl {
		if e.Kind == TransitionPhase {
			drop = i
			break
		}
	}
	return append(tl[:drop], tl[drop+1:]...)
}

// A record keeps its timeline encoded in a string, as it keeps OPTIMIZE's
// result: the record stays a value without references (Clone, ==), and a
// job that was only admitted carries nothing. Per transition: kind, time,
// index, then actor and detail, each as a varint length and its bytes.

// EncodeTimeline is tl's canonical form ("" for none).
func EncodeTimeline(tl []Transition) string {
	if len(tl) == 0 {
		return ""
	}
	b := make([]byte, 0, 24*len(tl))
	for _, e := range tl {
		b = appendTransition(b, e)
	}
	return string(b)
}

func appendTransition(b []byte, e Transition) []byte {
	b = binary.AppendUvarint(b, uint64(uint32(e.Kind)))
	b = binary.AppendVarint(b, e.TimeMs)
	b = binary.AppendUvarint(b, e.Index)
	b = binary.AppendUvarint(b, uint64(len(e.Actor)))
	b = append(b, e.Actor...)
	b = binary.AppendUvarint(b, uint64(len(e.Detail)))
	return append(b, e.Detail...)
}

// canonicalLen counts the transitions of tl when tl is exactly what
// EncodeTimeline makes of what DecodeTimeline reads from it: every field
// parses, every varint is in its shortest form, every kind fits its 32
// bits, and nothing is left over. Otherwise ok is false. It reads tl in
// place (no copy).
func canonicalLen(tl string) (n int, ok bool) {
	for len(tl) > 0 {
		var k uint64
		if k, tl, ok = shortUvarint(tl); !ok || k > math.MaxUint32 {
			return 0, false
		}
		if _, tl, ok = shortUvarint(tl); !ok { // the time (a zigzag varint)
			return 0, false
		}
		if _, tl, ok = shortUvarint(tl); !ok { // the index
			return 0, false
		}
		for range 2 { // actor, detail
			var l uint64
			if l, tl, ok = shortUvarint(tl); !ok || l > uint64(len(tl)) {
				return 0, false
			}
			tl = tl[l:]
		}
		n++
	}
	return n, true
}

// shortUvarint reads a uvarint from the head of s (as binary.Uvarint reads
// one from bytes) when it is there in its shortest form.
func shortUvarint(s string) (uint64, string, bool) {
	var v uint64
	for i := 0; i < len(s) && i < binary.MaxVarintLen64; i++ {
		c := s[i]
		if i == binary.MaxVarintLen64-1 && c > 1 {
			return 0, s, false // overflows 64 bits
		}
		v |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			if i+1 != uvarintLen(v) {
				return 0, s, false // a longer form than needed
			}
			return v, s[i+1:], true
		}
	}
	return 0, s, false
}

func uvarintLen(v uint64) int { return max(1, (bits.Len64(v)+6)/7) }

// DecodeTimeline reads EncodeTimeline's form; what does not parse ends the
// list (it is shown, never evidence).
func DecodeTimeline(s string) []Transition {
	if s == "" {
		return nil
	}
	b := []byte(s)
	var out []Transition
	for len(b) > 0 {
		var e Transition
		var ok bool
		var k uint64
		if k, b, ok = uvarint(b); !ok {
			break
		}
		e.Kind = TransitionKind(int32(uint32(k)))
		t, n := binary.Varint(b)
		if n <= 0 {
			break
		}
		e.TimeMs, b = t, b[n:]
		if e.Index, b, ok = uvarint(b); !ok {
			break
		}
		if e.Actor, b, ok = lenString(b); !ok {
			break
		}
		if e.Detail, b, ok = lenString(b); !ok {
			break
		}
		out = append(out, e)
	}
	return out
}

func uvarint(b []byte) (uint64, []byte, bool) {
	v, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, b, false
	}
	return v, b[n:], true
}

func lenString(b []byte) (string, []byte, bool) {
	l, b, ok := uvarint(b)
	if !ok || l > uint64(len(b)) {
		return "", b, false
	}
	return string(b[:l]), b[l:], true
}

// TimelineOf is r's timeline as shown: ADMITTED (derived from the record),
// then what was journaled. A record journaled before timelines existed has
// none: what it has is derived from its fields (index 0, not recorded).
func TimelineOf(r *Record) []Transition {
	out := []Transition{{Kind: TransitionAdmitted, TimeMs: r.CreateTimeMs, Index: r.AdmitIndex, Actor: r.Creator}}
	if r.Timeline != "" {
		return append(out, DecodeTimeline(r.Timeline)...)
	}
	if r.AdmitIndex != 0 {
		return out // admitted since timelines exist: nothing else happened yet
	}
	return append(out, derivedTimeline(r)...)
}

// derivedTimeline is what an old record's fields say happened, in order.
func derivedTimeline(r *Record) []Transition {
	var out []Transition
	add := func(k TransitionKind, t int64, actor, detail string) {
		out = append(out, Transition{Kind: k, TimeMs: t, Actor: actor, Detail: detail})
	}
	if r.InvocationID != "" {
		add(TransitionDispatched, r.DispatchTimeMs, "", DispatchDetail(r))
	}
	if r.Result.Code != 0 {
		add(TransitionReported, 0, "", r.Result.Code.String())
	}
	switch r.MutationState {
	case Resolving:
		add(TransitionResolving, 0, "", "")
	case Committed, NotCommitted:
		add(TransitionResolved, 0, "", r.MutationState.String())
	case Unknown:
		add(TransitionUnknown, 0, "", "")
	case Cancelled:
		add(TransitionCancelled, r.UpdateTimeMs, r.CancelActor, "")
	}
	if r.ForceReleased {
		add(TransitionForceReleased, r.ForceTimeMs, r.ForceActor, r.ForceNote)
	}
	if r.MutationState.IsOutcome() {
		switch r.RefreshState {
		case RefreshDone:
			add(TransitionRefreshDone, 0, "", "")
		case RefreshFailed:
			add(TransitionRefreshFailed, r.RefreshFailureTimeMs, "", "")
		}
	}
	if !r.Unresolved() {
		add(TransitionDone, r.UpdateTimeMs, "", "")
	}
	return out
}

// DispatchDetail names a dispatch: its backend and attempt.
func DispatchDetail(r *Record) string {
	return "backend " + strconv.FormatInt(r.BackendID, 10) + ", attempt " + strconv.FormatInt(int64(r.DispatchAttempts)+1, 10)
}
