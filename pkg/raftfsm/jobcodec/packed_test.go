package jobcodec

import (
	"math/rand/v2"
	"reflect"
	"strconv"
	"testing"

	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/raftfsm/jobcodec/jobcodectest"
)

func TestPackRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	in, pool := NewInterner(), NewStrPool()
	var scratch []byte
	dirty := jobcodectest.Full()
	for n := 0; n < 3000; n++ {
		r := jobcodectest.Random(rng)
		var share SpecSharer
		switch n % 3 {
		case 1:
			share = in
		case 2:
			share = pool
		}
		p := Pack(r, share, &scratch)
		if got := p.Unpack(); !reflect.DeepEqual(got, r) {
			t.Fatalf("record %d:\n got %+v\nwant %+v", n, got, r)
		}
		p.UnpackInto(dirty) // a reused record keeps nothing of its last use
		if !reflect.DeepEqual(dirty, r) {
			t.Fatalf("record %d into a used record:\n got %+v\nwant %+v", n, dirty, r)
		}
		if p.CreateTimeMs() != r.CreateTimeMs {
			t.Fatalf("record %d: create time %d, want %d", n, p.CreateTimeMs(), r.CreateTimeMs)
		}
		if p.RestoreHold() != r.RestoreHold {
			t.Fatalf("record %d: restore hold %t, want %t", n, p.RestoreHold(), r.RestoreHold)
		}
		if q := Pack(r, nil, nil); q.Rest != p.Rest || *q.Spec() != *p.Spec() {
			t.Fatalf("record %d: packing again made another form", n)
		}
	}
}

// TestPackKeepsEveryField sets each field of a record alone, and fails
// when packing loses it: a field added to job.Record must be added to
// Spec, Packed or restFields.
func TestPackKeepsEveryField(t *testing.T) {
	var paths [][]int
	var walk func(typ reflect.Type, at []int)
	walk = func(typ reflect.Type, at []int) {
		for i := 0; i < typ.NumField(); i++ {
			path := append(append([]int{}, at...), i)
			if f := typ.Field(i); f.Type.Kind() == reflect.Struct {
				walk(f.Type, path)
			} else {
				paths = append(paths, path)
			}
		}
	}
	walk(reflect.TypeOf(job.Record{}), nil)
	for _, path := range paths {
		var r job.Record
		v := reflect.ValueOf(&r).Elem().FieldByIndex(path)
		switch v.Kind() {
		case reflect.String:
			v.SetString("x")
		case reflect.Bool:
			v.SetBool(true)
		case reflect.Int32, reflect.Int64:
			v.SetInt(-7)
		case reflect.Uint64:
			v.SetUint(7)
		default:
			t.Fatalf("field %v: kind %s not handled", path, v.Kind())
		}
		p := Pack(&r, nil, nil)
		if got := p.Unpack(); !reflect.DeepEqual(got, &r) {
			t.Fatalf("field %s lost: got %+v", reflect.TypeOf(r).FieldByIndex(path).Name, got)
		}
	}
	if len(paths) < 60 {
		t.Fatalf("walked %d fields only", len(paths))
	}
}

func TestPackSharesSpecs(t *testing.T) {
	a, b := jobcodectest.Full(), jobcodectest.Full()
	b.JobID, b.InvocationID = 8, "other"
	for name, share := range map[string]SpecSharer{"interner": NewInterner(), "pool": NewStrPool()} {
		pa, pb := Pack(a, share, nil), Pack(b, share, nil)
		if pa.Spec() != pb.Spec() {
			t.Errorf("%s: one definition is held twice", name)
		}
		c := jobcodectest.Full()
		c.Column = "w"
		if pc := Pack(c, share, nil); pc.Spec() == pa.Spec() {
			t.Errorf("%s: two definitions share one spec", name)
		}
	}
	if p1, p2 := Pack(a, nil, nil), Pack(a, nil, nil); p1.Spec() == p2.Spec() {
		t.Errorf("no sharer shared")
	}
	pool := NewStrPool()
	for i := 0; i < 3*strPoolEntries; i++ {
		pool.ShareSpec(&Spec{Column: strconv.Itoa(i)})
	}
	if n := len(pool.specCur) + len(pool.specPrev); n > 2*strPoolEntries {
		t.Fatalf("pool holds %d specs", n)
	}
	in := NewInterner()
	for i := range maxInternedSpecs + 10 {
		in.ShareSpec(&Spec{Column: strconv.Itoa(i)})
	}
	if len(in.specs) > maxInternedSpecs {
		t.Fatalf("interner holds %d specs, cap %d", len(in.specs), maxInternedSpecs)
	}
}

// BenchmarkUnpack: one retained record of the benchmarks' kind unpacked.
func BenchmarkUnpack(b *testing.B) {
	r := jobcodectest.Full()
	r.Timeline, r.OptimizedIndexes, r.LogTail, r.LeftoverIndexUUID = "", "", "", ""
	p := Pack(r, nil, nil)
	b.Run("new", func(b *testing.B) {
		for b.Loop() {
			_ = p.Unpack()
		}
	})
	b.Run("into", func(b *testing.B) {
		var dst job.Record
		for b.Loop() {
			p.UnpackInto(&dst)
		}
	})
}
