package jobcodec

import (
	"strconv"
	"testing"
	"unsafe"
)

func TestInternerShares(t *testing.T) {
	in := NewInterner()
	a := in.Bytes([]byte("lake"))
	if b := in.Bytes([]byte("lake")); unsafe.StringData(a) != unsafe.StringData(b) {
		t.Fatal("an equal string is not shared")
	}
	if in.Bytes(nil) != "" || in.Bytes([]byte{}) != "" {
		t.Fatal("an empty string is not empty")
	}
	var none *Interner // a nil interner copies
	if b := none.Bytes([]byte("lake")); b != "lake" || unsafe.StringData(a) == unsafe.StringData(b) {
		t.Fatal("a nil interner shared")
	}
	for i := range maxInterned + 10 {
		in.Bytes([]byte(strconv.Itoa(i)))
	}
	if len(in.m) > maxInterned {
		t.Fatalf("interner holds %d strings, cap %d", len(in.m), maxInterned)
	}
}

func TestStrPoolIsBounded(t *testing.T) {
	p := NewStrPool()
	keep := string([]byte("kept"))
	if p.Get(keep) != keep {
		t.Fatal("first copy not kept")
	}
	for i := 0; i < 3*strPoolEntries; i++ {
		p.Get(strconv.Itoa(i))
		if i%1000 == 0 {
			// A string in use moves forward and stays shared.
			if got := p.Get(string([]byte("kept"))); unsafe.StringData(got) != unsafe.StringData(keep) {
				t.Fatal("a string in use was dropped")
			}
		}
	}
	if n := len(p.cur) + len(p.prev); n > 2*strPoolEntries {
		t.Fatalf("pool holds %d strings", n)
	}
	if _, ok := p.cur["0"]; ok {
		t.Fatal("an old unused string is still pooled")
	}
}
