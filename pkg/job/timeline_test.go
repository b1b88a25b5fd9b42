package job

import (
	"math"
	"math/rand/v2"
	"testing"
)

func randTransition(rng *rand.Rand) Transition {
	strs := []string{"", "a", "be-1", "attempt 2 on backend 7", string(make([]byte, 130))}
	kinds := []TransitionKind{TransitionDispatched, TransitionPhase, TransitionRefreshDone, 0, -1, math.MaxInt32}
	times := []int64{0, 1, -1, 1_000_000, math.MaxInt64, math.MinInt64, rng.Int64()}
	return Transition{Kind: kinds[rng.IntN(len(kinds))], TimeMs: times[rng.IntN(len(times))],
		Index: []uint64{0, 127, 128, math.MaxUint64, rng.Uint64()}[rng.IntN(5)],
		Actor: strs[rng.IntN(len(strs))], Detail: strs[rng.IntN(len(strs))]}
}

// mangle makes tl non-canonical or malformed now and then: an overlong
// varint, a cut, trailing bytes, a flipped byte.
func mangle(rng *rand.Rand, tl string) string {
	b := []byte(tl)
	switch rng.IntN(6) {
	case 0:
		if len(b) > 0 {
			return string(b[:rng.IntN(len(b))])
		}
	case 1:
		return tl + string([]byte{byte(rng.IntN(256))})
	case 2:
		if len(b) > 0 {
			b[rng.IntN(len(b))] ^= byte(1 + rng.IntN(255))
			return string(b)
		}
	case 3: // the first kind written in two bytes instead of one
		if len(b) > 0 && b[0] < 0x80 {
			return string(append([]byte{b[0] | 0x80, 0}, b[1:]...))
		}
	}
	return tl
}

func TestAppendTimelineAsDecodeAndEncode(t *testing.T) {
	seed := uint64(20261206)
	rng := rand.New(rand.NewPCG(seed, seed))
	fast := 0
	for i := range 20_000 {
		var tl []Transition
		for range rng.IntN(MaxTimeline + 4) {
			tl = append(tl, randTransition(rng))
		}
		enc := EncodeTimeline(tl) // may hold more than MaxTimeline: an old record
		if rng.IntN(3) == 0 {
			enc = mangle(rng, enc)
		}
		var add []Transition
		for range 1 + rng.IntN(3) {
			add = append(add, randTransition(rng))
		}
		if n, ok := canonicalLen(enc); ok && n+len(add) <= MaxTimeline {
			fast++
		}
		if got, want := AppendTimeline(enc, add...), appendDecoded(enc, add); got != want {
			t.Fatalf("case %d (seed %d): AppendTimeline gives %q, decoding and encoding gives %q (timeline %q, add %+v)",
				i, seed, got, want, enc, add)
		}
	}
	if fast < 5_000 {
		t.Fatalf("only %d of 20000 cases took the fast path", fast)
	}
}

// canonicalLen accepts exactly EncodeTimeline's form.
func TestCanonicalLen(t *testing.T) {
	two := EncodeTimeline([]Transition{{Kind: TransitionDispatched, TimeMs: -5, Index: 300, Actor: "x"}, {Kind: TransitionDone}})
	for _, c := range []struct {
		tl   string
		n    int
		want bool
	}{
		{"", 0, true},
		{two, 2, true},
		{two + "\x00", 0, false},                           // a cut transition after them
		{two[:len(two)-1], 0, false},                       // the last one cut
		{"\x82\x00" + two[1:], 0, false},                   // kind 2 in two bytes
		{"\xff\xff\xff\xff\x1f\x00\x00\x00\x00", 0, false}, // a kind past 32 bits
		{"\x02\x00\x00\x05ab\x00", 0, false},               // an actor longer than what is left
	} {
		n, ok := canonicalLen(c.tl)
		if ok != c.want || n != c.n {
			t.Errorf("canonicalLen(%q) = %d, %t; want %d, %t", c.tl, n, ok, c.n, c.want)
		}
	}
}

// Appending to a canonical timeline copies it once and decodes nothing.
func TestAppendTimelineDoesNotDecode(t *testing.T) {
	var tl []Transition
	for i := range 12 {
		tl = append(tl, Transition{Kind: TransitionPhase, TimeMs: int64(i), Index: uint64(i), Detail: "phase"})
	}
	enc, add := EncodeTimeline(tl), Transition{Kind: TransitionDone, TimeMs: 99, Index: 99}
	if allocs := testing.AllocsPerRun(100, func() { AppendTimeline(enc, add) }); allocs > 1 {
		t.Fatalf("AppendTimeline made %.0f allocations, want 1 (the new string)", allocs)
	}
}

func FuzzAppendTimeline(f *testing.F) {
	f.Add(EncodeTimeline([]Transition{{Kind: TransitionDispatched, TimeMs: 7, Index: 3, Detail: "be 1"}}), int32(5), int64(-1), uint64(9), "", "d")
	f.Add("", int32(-1), int64(math.MinInt64), uint64(math.MaxUint64), "ops", "")
	f.Add("\x82\x00\x00\x00\x00\x00", int32(2), int64(0), uint64(0), "", "")
	f.Fuzz(func(t *testing.T, tl string, kind int32, timeMs int64, index uint64, actor, detail string) {
		add := Transition{Kind: TransitionKind(kind), TimeMs: timeMs, Index: index, Actor: actor, Detail: detail}
		if got, want := AppendTimeline(tl, add), appendDecoded(tl, []Transition{add}); got != want {
			t.Fatalf("AppendTimeline(%q, %+v) = %q, want %q", tl, add, got, want)
		}
	})
}
