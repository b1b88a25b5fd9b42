package jobcodec

import (
	"fmt"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
)

// A direct compact-protocol decoder for job records, used by a snapshot's
// restore.
//
// Why not the generated code: TJobRecord.Read allocates the struct and one
// pointer per optional field, and every string twice when it is then
// interned — about fifty allocations per job, which made restoring a million
// jobs take several seconds and most of it garbage collection. This decoder
// reads a frame in place, fills job.Record directly, and looks shared strings
// up in the Interner without allocating. It follows the generated reader's
// rules exactly: a field of an unexpected type or unknown id is skipped, a
// missing job_id is an error. The differential tests (decode_test.go) hold
// it to the generated code.

// JobRecord reads a TJobRecord struct at r into a job.Record, with the same
// fail-closed defaults as RecordFromThrift.
func (r *Reader) JobRecord(in *Interner) *job.Record {
	rec := &job.Record{MutationState: job.Unknown, RefreshState: job.RefreshRequired, TerminationProof: job.ProofNone}
	var last int16
	haveID := false
	str := func() string { return in.Bytes(r.binary()) }
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
			if p := job.TerminationProof(r.i32()); ValidProof(p) {
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
		case 57:
			rec.RestoreHold = b
		}
	}
	if r.err == nil && !haveID {
		r.err = fmt.Errorf("%w: job record without job_id", ErrMalformed)
	}
	if rec.NormalizedIndexName == rec.DisplayIndexName {
		rec.NormalizedIndexName = rec.DisplayIndexName
	}
	return rec
}

// AdmitBatch is a TAdmitBatch (the journal's batch of admissions) with its
// jobs read into records, as RecordFromThrift would build them.
type AdmitBatch struct {
	NowMs      int64
	Jobs       []*job.Record
	AdmitRules int32 // 0 when unset
}

// DecodeAdmitBatch reads the compact encoding of a TAdmitBatch by the
// generated reader's rules: a field of an unknown id or an unexpected type
// is skipped, now_ms and jobs are required (the last of a repeated field
// wins), the jobs list is read as structs whatever element type its header
// names, and each job as JobRecord reads one. It refuses what the generated
// reader refuses (the differential tests hold it to that).
func DecodeAdmitBatch(body []byte) (*AdmitBatch, error) {
	r := NewReader(body)
	b := &AdmitBatch{}
	var last int16
	haveNow, haveJobs := false, false
	for r.err == nil {
		typ, id := r.field(&last)
		if typ == ctStop {
			break
		}
		switch {
		case id == 1 && typ == ctI64:
			b.NowMs, haveNow = r.i64(), true
		case id == 2 && typ == ctList:
			b.Jobs, haveJobs = r.jobRecords(), true
		case id == 3 && typ == ctI32:
			b.AdmitRules = r.i32()
		default:
			r.skip(typ, true, 0)
		}
	}
	switch {
	case r.err != nil:
		return nil, r.err
	case !haveNow || !haveJobs:
		return nil, fmt.Errorf("%w: admit batch without now_ms or jobs", ErrMalformed)
	}
	return b, nil
}

// jobRecords reads a list<TJobRecord> field's value; nil on a malformation.
// Nothing is interned here: Apply shares an admitted record's strings itself
// (its StrPool).
func (r *Reader) jobRecords() []*job.Record {
	n, ok := r.structList()
	if !ok {
		return nil
	}
	out := make([]*job.Record, 0, n)
	for i := uint64(0); i < n && r.err == nil; i++ {
		out = append(out, r.JobRecord(nil))
	}
	if r.err != nil {
		return nil
	}
	return out
}

func (r *Reader) jobResult(in *Interner) job.Result {
	var res job.Result
	r.structFields(func(typ byte, id int16) bool {
		switch {
		case id == 1 && typ == ctI32:
			res.Code = job.ResultCode(r.i32())
		case id == 2 && typ == ctI32:
			res.Reason = job.CompletionReason(r.i32())
		case id == 3 && typ == ctBinary:
			res.Message = in.Bytes(r.binary())
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
func (r *Reader) resources(in *Interner) job.Resources {
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
			res.PeakMemorySource = in.Bytes(r.binary())
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
func (r *Reader) structFields(fn func(typ byte, id int16) bool) {
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
	52: ctList, 53: ctI64, 54: ctBinary, 55: ctList, 56: ctI64, 57: ctBoolType,
}

// timeline reads field 55 of a TJobRecord for the snapshot decoder, with
// the generated reader's rules (an element field of an unexpected type or
// id is skipped; an element without its kind is malformed).
func (r *Reader) timeline() string {
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

// structList reads the header of a list of structs. As in the generated
// reader, the elements are read as structs whatever element type the header
// names (it only bounds the size); ok is false when the header is malformed.
func (r *Reader) structList() (n uint64, ok bool) {
	n, _ = r.listHeader()
	return n, r.err == nil
}

// optimizedIndexes reads field 52 of a TJobRecord (a list of
// TOptimizedIndexRecord) for the snapshot decoder, with the generated
// reader's rules: an element field of an unexpected type or id is skipped,
// an element without its name is malformed. The result is the canonical
// string (optimizedOfThrift).
func (r *Reader) optimizedIndexes() string {
	n, ok := r.structList()
	if !ok {
		return ""
	}
	l := make([]*journal.TOptimizedIndexRecord, 0, min(n, job.MaxOptimizedIndexes+1))
	for i := uint64(0); i < n && r.err == nil; i++ {
		ix := &journal.TOptimizedIndexRecord{}
		named := false
		r.eachField(func(typ byte, id int16) {
			switch {
			case id == 1 && typ == ctBinary:
				ix.Name, named = string(r.binary()), true
			case id == 2 && typ == ctStruct:
				ix.Before = r.indexCounts()
			case id == 3 && typ == ctStruct:
				ix.After = r.indexCounts()
			default:
				r.skip(typ, true, 1)
			}
		})
		if r.err == nil && !named {
			r.fail()
		}
		l = append(l, ix)
	}
	if r.err != nil {
		return ""
	}
	return optimizedOfThrift(l)
}

func (r *Reader) indexCounts() *journal.TIndexCountsRecord {
	c := &journal.TIndexCountsRecord{}
	r.eachField(func(typ byte, id int16) {
		switch {
		case id == 1 && typ == ctBinary:
			c.IndexUUID = thrift.StringPtr(string(r.binary()))
		case id == 2 && typ == ctI64:
			c.IndexedRows = thrift.Int64Ptr(r.i64())
		case id == 3 && typ == ctI64:
			c.UnindexedRows = thrift.Int64Ptr(r.i64())
		case id == 4 && typ == ctI32:
			c.Segments = thrift.Int32Ptr(r.i32())
		default:
			r.skip(typ, true, 2)
		}
	})
	return c
}

// eachField calls fn for every field of the struct at r's position, which
// must consume the field's value, until the struct's stop byte.
func (r *Reader) eachField(fn func(typ byte, id int16)) {
	var last int16
	for r.err == nil {
		typ, id := r.field(&last)
		if typ == ctStop {
			return
		}
		fn(typ, id)
	}
}
