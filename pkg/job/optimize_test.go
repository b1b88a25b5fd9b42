package job

import (
	"reflect"
	"strings"
	"testing"
)

func TestEncodeOptimizedRoundTripsAndBounds(t *testing.T) {
	ixs := []OptimizedIndex{{Name: "vec", Before: &IndexCounts{IndexUUID: "u1", IndexedRows: 9, UnindexedRows: 1, Segments: 2},
		After: &IndexCounts{IndexedRows: 10}}, {Name: "gone", Before: &IndexCounts{}}}
	s, err := EncodeOptimized(ixs)
	if err != nil {
		t.Fatal(err)
	}
	if got := DecodeOptimized(s); !reflect.DeepEqual(got, ixs) {
		t.Fatalf("round trip %+v", got)
	}
	if s, err := EncodeOptimized(nil); s != "" || err != nil || DecodeOptimized("") != nil || DecodeOptimized("{") != nil {
		t.Fatal("empty or broken forms")
	}
	for name, bad := range map[string][]OptimizedIndex{
		"no name":   {{}},
		"negative":  {{Name: "a", After: &IndexCounts{UnindexedRows: -1}}},
		"long uuid": {{Name: "a", Before: &IndexCounts{IndexUUID: strings.Repeat("u", MaxIndexUUIDBytes+1)}}},
		"too many":  make([]OptimizedIndex, MaxOptimizedIndexes+1),
		"too big": func() []OptimizedIndex {
			var l []OptimizedIndex
			for range MaxOptimizedIndexes {
				l = append(l, OptimizedIndex{Name: strings.Repeat("n", MaxNameBytes)})
			}
			return l
		}(),
	} {
		if _, err := EncodeOptimized(bad); err == nil {
			t.Errorf("%s: encoded", name)
		}
	}
}

func TestOptimizeReturnsToPending(t *testing.T) {
	r := &Record{MutationType: Optimize, DispatchAttempts: 1}
	if !OptimizeReturnsToPending(r, 3) || OptimizeReturnsToPending(r, 2) {
		t.Fatal("bound")
	}
	if OptimizeReturnsToPending(&Record{MutationType: Create}, 5) {
		t.Fatal("an index job is never run again after a crash")
	}
}
