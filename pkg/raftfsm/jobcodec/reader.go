package jobcodec

import (
	"errors"
	"fmt"
)

// ErrMalformed: bytes that are not a valid compact encoding of what was
// being read (a truncated frame, a length past the end, nesting too deep).
var ErrMalformed = errors.New("malformed compact encoding")

// maxSkipDepth bounds nesting when skipping unknown fields.
const maxSkipDepth = 64

// Compact protocol type nibbles.
const (
	ctStop     = 0x00
	ctTrue     = 0x01
	ctFalse    = 0x02
	ctByte     = 0x03
	ctI16      = 0x04
	ctI32      = 0x05
	ctI64      = 0x06
	ctDouble   = 0x07
	ctBinary   = 0x08
	ctList     = 0x09
	ctSet      = 0x0A
	ctMap      = 0x0B
	ctStruct   = 0x0C
	ctUUID     = 0x0D
	ctBoolType = 0xFF // ctTrue or ctFalse, for type matching
)

// The type nibbles a caller walking a struct with Field needs.
const (
	TypeStop   = ctStop
	TypeTrue   = ctTrue  // a bool field whose value is true
	TypeFalse  = ctFalse // a bool field whose value is false
	TypeStruct = ctStruct
)

// Reader reads compact-encoded bytes in place. The first malformed byte
// sets Err and moves the position to the end, so every later read returns
// zero values and every loop over fields ends.
type Reader struct {
	b   []byte
	pos int
	err error
}

// NewReader reads b; b is not copied and must not change while read.
func NewReader(b []byte) *Reader { return &Reader{b: b} }

// Err is the first malformation met, or nil.
func (r *Reader) Err() error { return r.err }

// Pos is the offset of the next byte to read.
func (r *Reader) Pos() int { return r.pos }

// Field reads a field header of the struct being read (last is the
// previous field's id, updated). It answers TypeStop at the struct's end;
// a bool field carries its value in the type (TypeTrue or TypeFalse).
func (r *Reader) Field(last *int16) (typ byte, id int16) { return r.field(last) }

// Skip skips the value of a field of type typ, whatever it holds.
func (r *Reader) Skip(typ byte) { r.skip(typ, true, 0) }

func (r *Reader) fail() {
	if r.err == nil {
		r.err = fmt.Errorf("%w at byte %d", ErrMalformed, r.pos)
	}
	r.pos = len(r.b)
}

func (r *Reader) byte() byte {
	if r.pos >= len(r.b) {
		r.fail()
		return 0
	}
	c := r.b[r.pos]
	r.pos++
	return c
}

func (r *Reader) uvarint() uint64 {
	var x uint64
	for shift := uint(0); shift < 64; shift += 7 {
		c := r.byte()
		if r.err != nil {
			return 0
		}
		x |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return x
		}
	}
	r.fail()
	return 0
}

func (r *Reader) i64() int64 {
	u := r.uvarint()
	return int64(u>>1) ^ -int64(u&1)
}

// i32 reads as the generated code does: a varint longer than 32 bits is
// cut to its low 32 bits first, then un-zigzagged.
func (r *Reader) i32() int32 {
	u := uint32(r.uvarint())
	return int32(u>>1) ^ -int32(u&1)
}

// binary returns a length-prefixed byte string in place (no copy).
func (r *Reader) binary() []byte {
	n := r.uvarint()
	if r.err != nil || n > uint64(len(r.b)-r.pos) {
		r.fail()
		return nil
	}
	out := r.b[r.pos : r.pos+int(n)]
	r.pos += int(n)
	return out
}

// field reads a field header. It returns ctStop at the end of the struct.
// For a bool field the value is in the type nibble (ctTrue/ctFalse).
func (r *Reader) field(last *int16) (typ byte, id int16) {
	h := r.byte()
	typ = h & 0x0f
	if r.err != nil || typ == ctStop {
		return ctStop, 0
	}
	if d := int16(h >> 4); d != 0 {
		id = *last + d
	} else {
		id = int16(r.i64())
	}
	*last = id
	return typ, id
}

// matches reports whether a field's wire type is the expected one.
func matches(typ, want byte) bool {
	if want == ctBoolType {
		return typ == ctTrue || typ == ctFalse
	}
	return typ == want
}

// skip skips one value of a type; inField says a bool carries its value in
// the header (a field) rather than in a byte (a container element).
func (r *Reader) skip(typ byte, inField bool, depth int) {
	if depth > maxSkipDepth {
		r.fail()
		return
	}
	switch typ {
	case ctTrue, ctFalse:
		if !inField {
			r.byte()
		}
	case ctByte:
		r.byte()
	case ctI16, ctI32, ctI64:
		r.uvarint()
	case ctDouble:
		r.advance(8)
	case ctUUID:
		r.advance(16)
	case ctBinary:
		r.binary()
	case ctList, ctSet:
		n, elem := r.listHeader()
		r.skipN(n, elem, elem, false, depth)
	case ctMap:
		n := r.size32()
		if n > 0 {
			kv := r.byte()
			r.fits(n, minSize(kv>>4)+minSize(kv&0x0f))
			r.skipN(n, kv>>4, kv&0x0f, true, depth)
		}
	case ctStruct:
		var last int16
		for r.err == nil {
			t, _ := r.field(&last)
			if t == ctStop {
				return
			}
			r.skip(t, true, depth+1)
		}
	default:
		r.fail()
	}
}

// listHeader reads a list or set header as the generated reader does: an
// element type it knows, a size (the high nibble, or when that is 15 a
// varint cut to 32 bits) that is not negative and fits what is left at the
// element type's least encoded size. Anything else is malformed.
func (r *Reader) listHeader() (n uint64, elem byte) {
	h := r.byte()
	elem = h & 0x0f
	n = uint64(h >> 4)
	if n == 15 {
		n = r.size32()
	}
	if elem > ctUUID {
		r.fail()
	}
	r.fits(n, minSize(elem))
	return n, elem
}

// size32 reads a container size: a varint cut to 32 bits, not negative.
func (r *Reader) size32() uint64 {
	n := int32(r.uvarint())
	if n < 0 {
		r.fail()
		return 0
	}
	return uint64(n)
}

// fits fails unless n elements of at least min bytes each fit what is left.
func (r *Reader) fits(n uint64, min int) {
	if r.err == nil && n*uint64(min) > uint64(len(r.b)-r.pos) {
		r.fail()
	}
}

// minSize is the least encoded size of a value of a type (the generated
// reader's bound on a container's size).
func minSize(typ byte) int {
	switch typ {
	case ctDouble:
		return 8
	case ctUUID:
		return 16
	}
	return 1
}

// skipN skips n elements (pairs for a map); a count larger than the bytes
// left is malformed, which also bounds the loop.
func (r *Reader) skipN(n uint64, kt, vt byte, pairs bool, depth int) {
	if n > uint64(len(r.b)-r.pos) {
		r.fail()
		return
	}
	for i := uint64(0); i < n && r.err == nil; i++ {
		if pairs {
			r.skip(kt, false, depth+1)
		}
		r.skip(vt, false, depth+1)
	}
}

func (r *Reader) advance(n int) {
	if n > len(r.b)-r.pos {
		r.fail()
		return
	}
	r.pos += n
}
