package raftfsm

import (
	"errors"
	"fmt"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
)

// A direct compact-protocol decoder for snapshot items, used by Restore.
//
// Why not the generated code: TJobRecord.Read allocates the struct and one
// pointer per optional field, and every string twice when it is then
// interned — about fifty allocations per job, which made restoring a million
// jobs take several seconds and most of it garbage collection. This decoder
// reads a frame in place, fills job.Record directly, and looks shared strings
// up in the interner without allocating. It follows the generated reader's
// rules exactly: a field of an unexpected type or unknown id is skipped, a
// missing job_id is an error. The differential tests (jobdecode_test.go)
// hold it to the generated code.

var errCompact = errors.New("malformed compact encoding")

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

type compactReader struct {
	b   []byte
	pos int
	err error
}

func (r *compactReader) fail() {
	if r.err == nil {
		r.err = fmt.Errorf("%w at byte %d", errCompact, r.pos)
	}
	r.pos = len(r.b)
}

func (r *compactReader) byte() byte {
	if r.pos >= len(r.b) {
		r.fail()
		return 0
	}
	c := r.b[r.pos]
	r.pos++
	return c
}

func (r *compactReader) uvarint() uint64 {
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

func (r *compactReader) i64() int64 {
	u := r.uvarint()
	return int64(u>>1) ^ -int64(u&1)
}

func (r *compactReader) i32() int32 { return int32(r.i64()) }

// binary returns a length-prefixed byte string in place (no copy).
func (r *compactReader) binary() []byte {
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
func (r *compactReader) field(last *int16) (typ byte, id int16) {
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
func (r *compactReader) skip(typ byte, inField bool, depth int) {
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
		h := r.byte()
		n := uint64(h >> 4)
		if n == 15 {
			n = r.uvarint()
		}
		r.skipN(n, h&0x0f, h&0x0f, false, depth)
	case ctMap:
		n := r.uvarint()
		if n > 0 {
			kv := r.byte()
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

// skipN skips n elements (pairs for a map); a count larger than the bytes
// left is malformed, which also bounds the loop.
func (r *compactReader) skipN(n uint64, kt, vt byte, pairs bool, depth int) {
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

func (r *compactReader) advance(n int) {
	if n > len(r.b)-r.pos {
		r.fail()
		return
	}
	r.pos += n
}

// snapshotItem is one decoded TSnapshotItem.
type snapshotItem struct {
	job     *job.Record
	catalog *Catalog
	backend *Backend
	audit   *AuditEvent
	last    bool
}

// decodeSnapshotItem decodes one frame. The result does not reference b.
// Catalogs and backends are rare: their byte range goes to the generated code.
func decodeSnapshotItem(b []byte, in *interner) (snapshotItem, error) {
	r := &compactReader{b: b}
	var it snapshotItem
	var last int16
	var err error
	for r.err == nil && err == nil {
		typ, id := r.field(&last)
		if typ == ctStop {
			break
		}
		start := r.pos
		switch {
		case id == 1 && typ == ctStruct:
			r.skip(typ, true, 0)
			if r.err == nil {
				it.catalog, err = decodeCatalogBytes(b[start:r.pos])
			}
		case id == 2 && typ == ctStruct:
			r.skip(typ, true, 0)
			if r.err == nil {
				it.backend, err = decodeBackendBytes(b[start:r.pos])
			}
		case id == 3 && typ == ctStruct:
			it.job = r.jobRecord(in)
		case id == 5 && typ == ctStruct:
			r.skip(typ, true, 0)
			if r.err == nil {
				it.audit, err = decodeAuditEventBytes(b[start:r.pos])
			}
		case id == 4 && (typ == ctTrue || typ == ctFalse):
			it.last = typ == ctTrue
		default:
			r.skip(typ, true, 0)
		}
	}
	if r.err != nil {
		return snapshotItem{}, r.err
	}
	if err != nil {
		return snapshotItem{}, fmt.Errorf("%w: %v", errCompact, err)
	}
	return it, nil
}

// jobRecord reads a TJobRecord struct into a job.Record, with the same
// fail-closed defaults as RecordFromThrift.
func (r *compactReader) jobRecord(in *interner) *job.Record {
	rec := &job.Record{MutationState: job.Unknown, RefreshState: job.RefreshRequired, TerminationProof: job.ProofNone}
	var last int16
	haveID := false
	str := func() string { return in.bytes(r.binary()) }
	own := func() string { return string(r.binary()) } // unique per job: not worth a lookup
	for r.err == nil {
		typ, id := r.field(&last)
		if typ == ctStop {
			break
		}
		if int(id) >= len(jobFieldTypes) || id < 1 || !matches(typ, jobFieldTypes[id]) {
			r.skip(typ, true, 0)
			continue
		}
		b := typ == ctTrue
		switch id {
		case 1:
			rec.JobID, haveID = r.i64(), true
		case 2:
			rec.Creator = str()
		case 3:
			rec.Rev = r.i64()
		case 4:
			rec.CreateTimeMs = r.i64()
		case 5:
			rec.UpdateTimeMs = r.i64()
		case 6:
			rec.CatalogID = r.i64()
		case 7:
			rec.DB = str()
		case 8:
			rec.Table = str()
		case 9:
			rec.Provider = str()
		case 10:
			rec.Locator = str()
		case 11:
			rec.DisplayIndexName = str()
		case 12:
			rec.NormalizedIndexName = str()
		case 13:
			rec.MutationType = job.MutationType(r.i32())
		case 14:
			rec.IfNotExists = b
		case 15:
			rec.IfExists = b
		case 16:
			rec.IndexType = str()
		case 17:
			rec.Column = str()
		case 18:
			rec.PropertiesJSON = str()
		case 19:
			rec.AdmittedDatasetVersion = r.i64()
		case 20:
			rec.SchemaContract = str()
		case 21:
			if s := job.MutationState(r.i32()); validMutationState(s) {
				rec.MutationState = s
			}
		case 22:
			if s := job.RefreshState(r.i32()); validRefreshState(s) {
				rec.RefreshState = s
			}
		case 23:
			rec.Result = r.jobResult(in)
		case 24:
			rec.BackendID = r.i64()
		case 25:
			rec.ProcessEpoch = r.i64()
		case 26:
			rec.DispatchRevision = r.i64()
		case 27:
			rec.InvocationID = own()
		case 28:
			rec.InvocationSecret = own()
		case 29:
			rec.DeadlineMs = r.i64()
		case 30:
			rec.LeaderTerm = r.i64()
		case 31:
			rec.PossibleLiveOwned = b
		case 32:
			if p := job.TerminationProof(r.i32()); validProof(p) {
				rec.TerminationProof = p
			}
		case 33:
			rec.ForceReleased = b
		case 34:
			rec.ForceActor = str()
		case 35:
			rec.ForceTimeMs = r.i64()
		case 36:
			rec.ForceNote = str()
		case 37:
			rec.ForceWarning = str()
		case 38:
			rec.RefreshFailureTimeMs = r.i64()
		case 39:
			rec.CancelActor = str()
		case 40:
			rec.DispatchAttempts = r.i32()
		case 41:
			rec.IndexUUID = str()
		case 42:
			rec.AdmittedIndexUUID = str()
		case 43:
			rec.TerminationMessage = own()
		case 44:
			rec.BuildPhase = str()
		case 45:
			rec.ResolveAfterMs = r.i64()
		case 46:
			rec.LeftoverIndexUUID = own()
		case 47:
			rec.Resources = r.resources(in)
		case 48:
			rec.LogTail = own()
		case 49:
			rec.DispatchTimeMs = r.i64()
		case 50:
			rec.BuildElapsedMs = r.i64()
		case 51:
			rec.ProgressTimeMs = r.i64()
		case 52:
			rec.OptimizedIndexes = r.optimizedIndexes()
		case 53:
			rec.ResultDatasetVersion = r.i64()
		case 54:
			rec.ClaimedCreator = str()
		case 55:
			rec.Timeline = r.timeline()
		case 56:
			rec.AdmitIndex = uint64(max(r.i64(), 0))
		}
	}
	if r.err == nil && !haveID {
		r.err = fmt.Errorf("%w: job record without job_id", errCompact)
	}
	if rec.NormalizedIndexName == rec.DisplayIndexName {
		rec.NormalizedIndexName = rec.DisplayIndexName
	}
	return rec
}

func (r *compactReader) jobResult(in *interner) job.Result {
	var res job.Result
	r.structFields(func(typ byte, id int16) bool {
		switch {
		case id == 1 && typ == ctI32:
			res.Code = job.ResultCode(r.i32())
		case id == 2 && typ == ctI32:
			res.Reason = job.CompletionReason(r.i32())
		case id == 3 && typ == ctBinary:
			res.Message = in.bytes(r.binary())
		case id == 4 && (typ == ctTrue || typ == ctFalse):
			res.ExternalMetadataAdvanced = typ == ctTrue
		default:
			return false
		}
		return true
	})
	return res
}

// resources reads a TResources struct.
func (r *compactReader) resources(in *interner) job.Resources {
	var res job.Resources
	r.structFields(func(typ byte, id int16) bool {
		var dst *int64
		switch {
		case id == 1 && typ == ctI64:
			dst = &res.StartTimeMs
		case id == 2 && typ == ctI64:
			dst = &res.FinishTimeMs
		case id == 3 && typ == ctI64:
			dst = &res.WallMs
		case id == 4 && typ == ctI64:
			dst = &res.PeakMemoryBytes
		case id == 5 && typ == ctBinary:
			res.PeakMemorySource = in.bytes(r.binary())
			return true
		default:
			return false
		}
		*dst = r.i64()
		return true
	})
	return res
}

// structFields calls fn with each field header of the struct being read,
// up to its stop; fn reads the value and answers true, or answers false to
// have the value skipped (an unknown field, or a known one of another type).
func (r *compactReader) structFields(fn func(typ byte, id int16) bool) {
	var last int16
	for r.err == nil {
		typ, id := r.field(&last)
		if typ == ctStop {
			return
		}
		if !fn(typ, id) {
			r.skip(typ, true, 0)
		}
	}
}

// jobFieldTypes is TJobRecord's field id → wire type (idl/journal.thrift).
// A test checks it against the generated struct tags.
var jobFieldTypes = [...]byte{
	1: ctI64, 2: ctBinary, 3: ctI64, 4: ctI64, 5: ctI64, 6: ctI64,
	7: ctBinary, 8: ctBinary, 9: ctBinary, 10: ctBinary, 11: ctBinary, 12: ctBinary,
	13: ctI32, 14: ctBoolType, 15: ctBoolType, 16: ctBinary, 17: ctBinary, 18: ctBinary,
	19: ctI64, 20: ctBinary, 21: ctI32, 22: ctI32, 23: ctStruct,
	24: ctI64, 25: ctI64, 26: ctI64, 27: ctBinary, 28: ctBinary, 29: ctI64, 30: ctI64,
	31: ctBoolType, 32: ctI32, 33: ctBoolType, 34: ctBinary, 35: ctI64, 36: ctBinary,
	37: ctBinary, 38: ctI64, 39: ctBinary, 40: ctI32, 41: ctBinary, 42: ctBinary,
	43: ctBinary, 44: ctBinary, 45: ctI64,
	46: ctBinary, 47: ctStruct, 48: ctBinary, 49: ctI64, 50: ctI64, 51: ctI64,
	52: ctList, 53: ctI64, 54: ctBinary, 55: ctList, 56: ctI64,
}

// decodeCatalogBytes and decodeBackendBytes decode a struct's byte range
// with the generated code (a compact struct is self-delimiting).
func decodeCatalogBytes(b []byte) (*Catalog, error) {
	t := journal.NewTCatalogRecord()
	if err := decodeCompact(b, t); err != nil {
		return nil, err
	}
	return CatalogFromThrift(t), nil
}

func decodeBackendBytes(b []byte) (*Backend, error) {
	t := journal.NewTBackendRecord()
	if err := decodeCompact(b, t); err != nil {
		return nil, err
	}
	return BackendFromThrift(t), nil
}
