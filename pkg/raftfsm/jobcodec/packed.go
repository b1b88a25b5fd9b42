package jobcodec

import (
	"encoding/binary"
	"math/bits"

	"github.com/lancemaster/lancemaster/pkg/job"
)

// Packed is a job record in the compact form the tables keep a retained
// job in (resolved and slot-free: the jobs retention GC may remove, nearly
// all of a large journal). A job.Record is ~700 bytes of fields, most of
// them unset on any one job; Packed is 88 bytes plus its Rest string:
//
//   - the definition the job was admitted with (creator, dataset, index
//     names, type, column, properties, schema contract), which many jobs
//     repeat, is one shared *Spec;
//   - the id, update time, states, catalog, db and table, which the tables'
//     keys and the commonest filters read, are fields (a walk that filters
//     on them reads no Spec);
//   - every other field is in Rest: a varint mask of the fields set, then
//     each set field's value in restFields order (integers zigzag varints,
//     strings a length and their bytes; a bool is its bit).
//
// Unpack gives back exactly the record packed (every field equal); its
// strings from Rest are substrings of Rest, so decoding allocates only the
// record. A Packed value is immutable once made.
type Packed struct {
	spec          *Spec
	Rest          string
	JobID         int64
	UpdateTimeMs  int64
	CatalogID     int64
	DB, Table     string
	MutationState job.MutationState
	RefreshState  job.RefreshState
}

// Spec is what a job was admitted as: the part of its record that jobs of
// one dataset and index repeat. It is comparable, so it is interned whole.
type Spec struct {
	Creator, ClaimedCreator               string
	Provider, Locator                     string
	DisplayIndexName, NormalizedIndexName string
	MutationType                          job.MutationType
	IfNotExists, IfExists                 bool
	IndexType, Column                     string
	PropertiesJSON, SchemaContract        string
}

// Spec is the definition of p, shared with other jobs: never modify it.
func (p *Packed) Spec() *Spec { return p.spec }

// SpecSharer shares equal specs (Interner on restore, StrPool on apply); a
// nil one keeps a copy per record.
type SpecSharer interface {
	ShareSpec(s *Spec) *Spec
}

// restField is one field of Rest: exactly one accessor is set.
type restField struct {
	i64 func(r *job.Record) *int64
	i32 func(r *job.Record) *int32
	u64 func(r *job.Record) *uint64
	str func(r *job.Record) *string
	bit func(r *job.Record) *bool
}

// restFields is the order of Rest. CreateTimeMs is first: a filter reads it
// without decoding the rest (CreateTimeMs). Every field of job.Record is
// here, in Spec, or in Packed's own fields (TestPackKeepsEveryField).
var restFields = [...]restField{
	{i64: func(r *job.Record) *int64 { return &r.CreateTimeMs }},
	{i64: func(r *job.Record) *int64 { return &r.Rev }},
	{i64: func(r *job.Record) *int64 { return &r.AdmittedDatasetVersion }},
	{i32: func(r *job.Record) *int32 { return (*int32)(&r.Result.Code) }},
	{i32: func(r *job.Record) *int32 { return (*int32)(&r.Result.Reason) }},
	{str: func(r *job.Record) *string { return &r.Result.Message }},
	{bit: func(r *job.Record) *bool { return &r.Result.ExternalMetadataAdvanced }},
	{i64: func(r *job.Record) *int64 { return &r.BackendID }},
	{i64: func(r *job.Record) *int64 { return &r.ProcessEpoch }},
	{i64: func(r *job.Record) *int64 { return &r.DispatchRevision }},
	{str: func(r *job.Record) *string { return &r.InvocationID }},
	{str: func(r *job.Record) *string { return &r.InvocationSecret }},
	{i64: func(r *job.Record) *int64 { return &r.DeadlineMs }},
	{i64: func(r *job.Record) *int64 { return &r.LeaderTerm }},
	{bit: func(r *job.Record) *bool { return &r.PossibleLiveOwned }},
	{i32: func(r *job.Record) *int32 { return (*int32)(&r.TerminationProof) }},
	{bit: func(r *job.Record) *bool { return &r.ForceReleased }},
	{str: func(r *job.Record) *string { return &r.ForceActor }},
	{i64: func(r *job.Record) *int64 { return &r.ForceTimeMs }},
	{str: func(r *job.Record) *string { return &r.ForceNote }},
	{str: func(r *job.Record) *string { return &r.ForceWarning }},
	{i64: func(r *job.Record) *int64 { return &r.RefreshFailureTimeMs }},
	{str: func(r *job.Record) *string { return &r.CancelActor }},
	{i32: func(r *job.Record) *int32 { return &r.DispatchAttempts }},
	{str: func(r *job.Record) *string { return &r.IndexUUID }},
	{str: func(r *job.Record) *string { return &r.AdmittedIndexUUID }},
	{str: func(r *job.Record) *string { return &r.TerminationMessage }},
	{str: func(r *job.Record) *string { return &r.BuildPhase }},
	{i64: func(r *job.Record) *int64 { return &r.ResolveAfterMs }},
	{str: func(r *job.Record) *string { return &r.LeftoverIndexUUID }},
	{i64: func(r *job.Record) *int64 { return &r.Resources.StartTimeMs }},
	{i64: func(r *job.Record) *int64 { return &r.Resources.FinishTimeMs }},
	{i64: func(r *job.Record) *int64 { return &r.Resources.WallMs }},
	{i64: func(r *job.Record) *int64 { return &r.Resources.PeakMemoryBytes }},
	{str: func(r *job.Record) *string { return &r.Resources.PeakMemorySource }},
	{str: func(r *job.Record) *string { return &r.LogTail }},
	{i64: func(r *job.Record) *int64 { return &r.DispatchTimeMs }},
	{i64: func(r *job.Record) *int64 { return &r.BuildElapsedMs }},
	{i64: func(r *job.Record) *int64 { return &r.ProgressTimeMs }},
	{i64: func(r *job.Record) *int64 { return &r.ResultDatasetVersion }},
	{str: func(r *job.Record) *string { return &r.OptimizedIndexes }},
	{u64: func(r *job.Record) *uint64 { return &r.AdmitIndex }},
	{str: func(r *job.Record) *string { return &r.Timeline }},
	{bit: func(r *job.Record) *bool { return &r.RestoreHold }},
}

// Pack makes the compact form of r; share (may be nil) shares its Spec.
// scratch, when not nil, is a buffer Pack may reuse between calls (one
// goroutine). The result does not alias r's memory except through strings.
func Pack(r *job.Record, share SpecSharer, scratch *[]byte) Packed {
	spec := &Spec{
		Creator: r.Creator, ClaimedCreator: r.ClaimedCreator, Provider: r.Provider, Locator: r.Locator,
		DisplayIndexName: r.DisplayIndexName, NormalizedIndexName: r.NormalizedIndexName,
		MutationType: r.MutationType, IfNotExists: r.IfNotExists, IfExists: r.IfExists,
		IndexType: r.IndexType, Column: r.Column, PropertiesJSON: r.PropertiesJSON, SchemaContract: r.SchemaContract,
	}
	if share != nil {
		spec = share.ShareSpec(spec)
	}
	var local []byte
	buf := &local
	if scratch != nil {
		buf = scratch
	}
	b := (*buf)[:0]
	var mask uint64
	for i := range restFields {
		if !restFields[i].zero(r) {
			mask |= 1 << i
		}
	}
	b = binary.AppendUvarint(b, mask)
	for m := mask; m != 0; m &= m - 1 {
		f := &restFields[bits.TrailingZeros64(m)]
		switch {
		case f.i64 != nil:
			b = binary.AppendVarint(b, *f.i64(r))
		case f.i32 != nil:
			b = binary.AppendVarint(b, int64(*f.i32(r)))
		case f.u64 != nil:
			b = binary.AppendUvarint(b, *f.u64(r))
		case f.str != nil:
			s := *f.str(r)
			b = binary.AppendUvarint(b, uint64(len(s)))
			b = append(b, s...)
		}
	}
	*buf = b
	return Packed{spec: spec, Rest: string(b), JobID: r.JobID, UpdateTimeMs: r.UpdateTimeMs,
		CatalogID: r.CatalogID, DB: r.DB, Table: r.Table, MutationState: r.MutationState, RefreshState: r.RefreshState}
}

func (f *restField) zero(r *job.Record) bool {
	switch {
	case f.i64 != nil:
		return *f.i64(r) == 0
	case f.i32 != nil:
		return *f.i32(r) == 0
	case f.u64 != nil:
		return *f.u64(r) == 0
	case f.str != nil:
		return *f.str(r) == ""
	}
	return !*f.bit(r)
}

// Unpack returns the record p was packed from.
func (p *Packed) Unpack() *job.Record {
	r := new(job.Record)
	p.UnpackInto(r)
	return r
}

// UnpackInto overwrites dst with the record p was packed from (a caller
// walking many records reuses one).
func (p *Packed) UnpackInto(dst *job.Record) {
	s := p.spec
	*dst = job.Record{
		JobID: p.JobID, UpdateTimeMs: p.UpdateTimeMs, MutationState: p.MutationState, RefreshState: p.RefreshState,
		CatalogID: p.CatalogID, DB: p.DB, Table: p.Table,
		Creator: s.Creator, ClaimedCreator: s.ClaimedCreator, Provider: s.Provider, Locator: s.Locator,
		DisplayIndexName: s.DisplayIndexName, NormalizedIndexName: s.NormalizedIndexName,
		MutationType: s.MutationType, IfNotExists: s.IfNotExists, IfExists: s.IfExists,
		IndexType: s.IndexType, Column: s.Column, PropertiesJSON: s.PropertiesJSON, SchemaContract: s.SchemaContract,
	}
	rest := p.Rest
	mask, pos := uvarint(rest, 0)
	for m := mask; m != 0; m &= m - 1 {
		f := &restFields[bits.TrailingZeros64(m)]
		switch {
		case f.i64 != nil:
			*f.i64(dst), pos = varint(rest, pos)
		case f.i32 != nil:
			var v int64
			v, pos = varint(rest, pos)
			*f.i32(dst) = int32(v)
		case f.u64 != nil:
			*f.u64(dst), pos = uvarint(rest, pos)
		case f.str != nil:
			var n uint64
			n, pos = uvarint(rest, pos)
			*f.str(dst) = rest[pos : pos+int(n)]
			pos += int(n)
		default:
			*f.bit(dst) = true
		}
	}
}

// RestoreHold is the record's restore hold, read without unpacking it: a
// bit field of Rest is its bit of the mask.
func (p *Packed) RestoreHold() bool {
	mask, _ := uvarint(p.Rest, 0)
	return mask&restoreHoldBit != 0
}

// restoreHoldBit is RestoreHold's bit of the mask: the one bit field a
// record that holds nothing else sets.
var restoreHoldBit = func() uint64 {
	r := &job.Record{RestoreHold: true}
	for i := range restFields {
		if f := &restFields[i]; f.bit != nil && *f.bit(r) {
			return 1 << i
		}
	}
	panic("jobcodec: RestoreHold is not a field of Rest")
}()

// CreateTimeMs is the record's create time, read without unpacking it.
func (p *Packed) CreateTimeMs() int64 {
	mask, pos := uvarint(p.Rest, 0)
	if mask&1 == 0 {
		return 0
	}
	v, _ := varint(p.Rest, pos)
	return v
}

// uvarint and varint read what Pack wrote (Rest is never malformed: only
// Pack makes it).
func uvarint(s string, pos int) (uint64, int) {
	var x uint64
	for shift := uint(0); ; shift += 7 {
		c := s[pos]
		pos++
		x |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return x, pos
		}
	}
}

func varint(s string, pos int) (int64, int) {
	u, pos := uvarint(s, pos)
	return int64(u>>1) ^ -int64(u&1), pos
}
