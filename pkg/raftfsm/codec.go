package raftfsm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
)

// The journal's wire form: one type byte, then the Thrift compact encoding of
// the command (idl/journal.thrift). Compact field ids let a newer master add
// fields that an older one skips, which is what makes rolling upgrades safe.

// thriftConf bounds what a decoder accepts; journal entries and snapshot
// items are small, so the library defaults (100 MB messages) are plenty.
var thriftConf = &thrift.TConfiguration{}

// ErrEmptyEntry: a log entry without even a type byte.
var ErrEmptyEntry = errors.New("raftfsm: empty log entry")

// Encode builds a log entry: the type byte followed by the compact encoding
// of cmd. cmd must be a pointer to a generated struct. A command missing a
// required field is an error here rather than a fatal entry on every replica.
func Encode(t CommandType, cmd thrift.TStruct) (out []byte, err error) {
	buf := thrift.NewTMemoryBufferLen(256)
	if err := buf.WriteByte(byte(t)); err != nil {
		return nil, err
	}
	if err := writeCompact(buf, cmd); err != nil {
		return nil, fmt.Errorf("raftfsm: encode command type %d: %w", t, err)
	}
	out = buf.Bytes()
	// Thrift writes a nil required struct (or a nil list element) as an
	// empty struct that no replica can decode, and an undecodable committed
	// entry stops every master (OnFatal). Refuse it here, before proposing.
	fresh := reflect.New(reflect.TypeOf(cmd).Elem()).Interface().(thrift.TStruct)
	if err := decodeCompact(out[1:], fresh); err != nil {
		return nil, fmt.Errorf("raftfsm: command type %d would not decode (a required field is missing): %w", t, err)
	}
	return out, nil
}

// EncodeResponse encodes an Apply response for forwarding between masters.
func EncodeResponse(r *journal.TApplyResponse) ([]byte, error) {
	if r == nil {
		return nil, errors.New("raftfsm: encode nil apply response")
	}
	buf := thrift.NewTMemoryBufferLen(64)
	if err := writeCompact(buf, r); err != nil {
		return nil, fmt.Errorf("raftfsm: encode apply response: %w", err)
	}
	return buf.Bytes(), nil
}

// DecodeResponse decodes what EncodeResponse produced.
func DecodeResponse(b []byte) (*journal.TApplyResponse, error) {
	r := journal.NewTApplyResponse()
	if err := decodeCompact(b, r); err != nil {
		return nil, fmt.Errorf("raftfsm: decode apply response: %w", err)
	}
	return r, nil
}

// writeCompact appends the compact encoding of s to buf. Generated Write
// dereferences required struct fields, so a nil one would panic; turn that
// into an error because Encode runs on request paths.
func writeCompact(buf *thrift.TMemoryBuffer, s thrift.TStruct) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("incomplete struct (a required field is nil): %v", r)
		}
	}()
	p := thrift.NewTCompactProtocolConf(buf, thriftConf)
	if err := s.Write(context.Background(), p); err != nil {
		return err
	}
	return p.Flush(context.Background())
}

// decodeCompact reads one compact-encoded struct from b. b is read in place,
// never written: every Apply on every replica decodes its entry, and a copy
// of each showed in the admission benchmark's allocation profile.
func decodeCompact(b []byte, s thrift.TStruct) error {
	buf := &thrift.TMemoryBuffer{Buffer: bytes.NewBuffer(b)}
	p := thrift.NewTCompactProtocolConf(buf, thriftConf)
	return s.Read(context.Background(), p)
}

// ---- job records ------------------------------------------------------------

// jobWire holds a copy of one record next to the Thrift view of it: the
// view's optional fields point into the copy, so encoding a record costs one
// allocation (RecordToThrift) or none at all when Persist reuses the holder.
type jobWire struct {
	rec job.Record
	t   journal.TJobRecord
	res journal.TJobResult_
	mt  journal.TMutationType
	ms  journal.TMutationState
	rs  journal.TRefreshState
	tp  journal.TTerminationProof
	rc  journal.TResultCode
	rr  journal.TCompletionReason
	ai  int64
}

// load points w.t at a copy of r. Zero values are left unset (they decode
// back to zero) except the states and the proof, which are always written:
// a missing state does not read as zero (see RecordFromThrift).
func (w *jobWire) load(r *job.Record) *journal.TJobRecord {
	w.rec = *r
	c := &w.rec
	w.mt = journal.TMutationType(c.MutationType)
	w.ms = journal.TMutationState(c.MutationState)
	w.rs = journal.TRefreshState(c.RefreshState)
	w.tp = journal.TTerminationProof(c.TerminationProof)
	w.t = journal.TJobRecord{
		JobID:                  c.JobID,
		Creator:                optString(&c.Creator),
		Rev:                    optInt64(&c.Rev),
		CreateTimeMs:           optInt64(&c.CreateTimeMs),
		UpdateTimeMs:           optInt64(&c.UpdateTimeMs),
		CatalogID:              optInt64(&c.CatalogID),
		Db:                     optString(&c.DB),
		Table:                  optString(&c.Table),
		Provider:               optString(&c.Provider),
		Locator:                optString(&c.Locator),
		DisplayIndexName:       optString(&c.DisplayIndexName),
		NormalizedIndexName:    optString(&c.NormalizedIndexName),
		IfNotExists:            optBool(&c.IfNotExists),
		IfExists:               optBool(&c.IfExists),
		IndexType:              optString(&c.IndexType),
		Column:                 optString(&c.Column),
		PropertiesJSON:         optString(&c.PropertiesJSON),
		AdmittedDatasetVersion: optInt64(&c.AdmittedDatasetVersion),
		SchemaContract:         optString(&c.SchemaContract),
		MutationState:          &w.ms,
		RefreshState:           &w.rs,
		BackendID:              optInt64(&c.BackendID),
		ProcessEpoch:           optInt64(&c.ProcessEpoch),
		DispatchRevision:       optInt64(&c.DispatchRevision),
		InvocationID:           optString(&c.InvocationID),
		InvocationSecret:       optString(&c.InvocationSecret),
		DeadlineMs:             optInt64(&c.DeadlineMs),
		LeaderTerm:             optInt64(&c.LeaderTerm),
		PossibleLiveOwned:      optBool(&c.PossibleLiveOwned),
		TerminationProof:       &w.tp,
		ForceReleased:          optBool(&c.ForceReleased),
		ForceActor:             optString(&c.ForceActor),
		ForceTimeMs:            optInt64(&c.ForceTimeMs),
		ForceNote:              optString(&c.ForceNote),
		ForceWarning:           optString(&c.ForceWarning),
		RefreshFailureTimeMs:   optInt64(&c.RefreshFailureTimeMs),
		CancelActor:            optString(&c.CancelActor),
		DispatchAttempts:       optInt32(&c.DispatchAttempts),
		IndexUUID:              optString(&c.IndexUUID),
		AdmittedIndexUUID:      optString(&c.AdmittedIndexUUID),
		TerminationMessage:     optString(&c.TerminationMessage),
		BuildPhase:             optString(&c.BuildPhase),
		ResolveAfterMs:         optInt64(&c.ResolveAfterMs),
		LeftoverIndexUUID:      optString(&c.LeftoverIndexUUID),
		LogTail:                optString(&c.LogTail),
		DispatchTimeMs:         optInt64(&c.DispatchTimeMs),
		BuildElapsedMs:         optInt64(&c.BuildElapsedMs),
		ProgressTimeMs:         optInt64(&c.ProgressTimeMs),
		OptimizedIndexes:       optimizedOfRecord(c.OptimizedIndexes),
		ResultDatasetVersion:   optInt64(&c.ResultDatasetVersion),
		ClaimedCreator:         optString(&c.ClaimedCreator),
		Timeline:               timelineToThrift(c.Timeline),
	}
	if c.AdmitIndex != 0 {
		w.ai = int64(c.AdmitIndex)
		w.t.AdmitIndex = &w.ai
	}
	if c.Resources != (job.Resources{}) {
		w.t.Resources = ResourcesToThrift(&c.Resources)
	}
	if c.MutationType != 0 {
		w.t.MutationType = &w.mt
	}
	if c.Result != (job.Result{}) {
		w.rc = journal.TResultCode(c.Result.Code)
		w.rr = journal.TCompletionReason(c.Result.Reason)
		w.res = journal.TJobResult_{
			Message:                  optString(&c.Result.Message),
			ExternalMetadataAdvanced: optBool(&c.Result.ExternalMetadataAdvanced),
		}
		if c.Result.Code != 0 {
			w.res.Code = &w.rc
		}
		if c.Result.Reason != 0 {
			w.res.Reason = &w.rr
		}
		w.t.Result_ = &w.res
	}
	return &w.t
}

// RecordToThrift converts a record to its journal form. The result does not
// alias r.
func RecordToThrift(r *job.Record) *journal.TJobRecord {
	return new(jobWire).load(r)
}

// RecordFromThrift converts a journal record (from a command or a snapshot)
// to the domain record. Missing or unrecognized values read fail-closed
// (DESIGN.md §2): mutation_state as UNKNOWN, refresh_state as REQUIRED, and
// termination_proof as NONE (a slot with no recorded proof is still held).
func RecordFromThrift(t *journal.TJobRecord) *job.Record {
	r := &job.Record{
		JobID:                  t.JobID,
		Creator:                t.GetCreator(),
		Rev:                    t.GetRev(),
		CreateTimeMs:           t.GetCreateTimeMs(),
		UpdateTimeMs:           t.GetUpdateTimeMs(),
		CatalogID:              t.GetCatalogID(),
		DB:                     t.GetDb(),
		Table:                  t.GetTable(),
		Provider:               t.GetProvider(),
		Locator:                t.GetLocator(),
		DisplayIndexName:       t.GetDisplayIndexName(),
		NormalizedIndexName:    t.GetNormalizedIndexName(),
		MutationType:           job.MutationType(t.GetMutationType()),
		IfNotExists:            t.GetIfNotExists(),
		IfExists:               t.GetIfExists(),
		IndexType:              t.GetIndexType(),
		Column:                 t.GetColumn(),
		PropertiesJSON:         t.GetPropertiesJSON(),
		AdmittedDatasetVersion: t.GetAdmittedDatasetVersion(),
		SchemaContract:         t.GetSchemaContract(),
		MutationState:          job.Unknown,
		RefreshState:           job.RefreshRequired,
		BackendID:              t.GetBackendID(),
		ProcessEpoch:           t.GetProcessEpoch(),
		DispatchRevision:       t.GetDispatchRevision(),
		InvocationID:           t.GetInvocationID(),
		InvocationSecret:       t.GetInvocationSecret(),
		DeadlineMs:             t.GetDeadlineMs(),
		LeaderTerm:             t.GetLeaderTerm(),
		PossibleLiveOwned:      t.GetPossibleLiveOwned(),
		TerminationProof:       job.ProofNone,
		ForceReleased:          t.GetForceReleased(),
		ForceActor:             t.GetForceActor(),
		ForceTimeMs:            t.GetForceTimeMs(),
		ForceNote:              t.GetForceNote(),
		ForceWarning:           t.GetForceWarning(),
		RefreshFailureTimeMs:   t.GetRefreshFailureTimeMs(),
		CancelActor:            t.GetCancelActor(),
		DispatchAttempts:       t.GetDispatchAttempts(),
		IndexUUID:              t.GetIndexUUID(),
		AdmittedIndexUUID:      t.GetAdmittedIndexUUID(),
		TerminationMessage:     t.GetTerminationMessage(),
		BuildPhase:             t.GetBuildPhase(),
		ResolveAfterMs:         t.GetResolveAfterMs(),
		LeftoverIndexUUID:      t.GetLeftoverIndexUUID(),
		Resources:              ResourcesFromThrift(t.Resources),
		LogTail:                t.GetLogTail(),
		DispatchTimeMs:         t.GetDispatchTimeMs(),
		BuildElapsedMs:         t.GetBuildElapsedMs(),
		ProgressTimeMs:         t.GetProgressTimeMs(),
		OptimizedIndexes:       optimizedOfThrift(t.OptimizedIndexes),
		ResultDatasetVersion:   t.GetResultDatasetVersion(),
		ClaimedCreator:         t.GetClaimedCreator(),
		AdmitIndex:             uint64(max(t.GetAdmitIndex(), 0)),
		Timeline:               timelineOfThrift(t.Timeline),
	}
	if t.IsSetMutationState() && validMutationState(job.MutationState(*t.MutationState)) {
		r.MutationState = job.MutationState(*t.MutationState)
	}
	if t.IsSetRefreshState() && validRefreshState(job.RefreshState(*t.RefreshState)) {
		r.RefreshState = job.RefreshState(*t.RefreshState)
	}
	if t.IsSetTerminationProof() && validProof(job.TerminationProof(*t.TerminationProof)) {
		r.TerminationProof = job.TerminationProof(*t.TerminationProof)
	}
	// Share the display spelling when it is already lowercase: most names are.
	if r.NormalizedIndexName == r.DisplayIndexName {
		r.NormalizedIndexName = r.DisplayIndexName
	}
	if res := t.Result_; res != nil {
		r.Result = job.Result{
			Code:                     job.ResultCode(res.GetCode()),
			Reason:                   job.CompletionReason(res.GetReason()),
			Message:                  res.GetMessage(),
			ExternalMetadataAdvanced: res.GetExternalMetadataAdvanced(),
		}
	}
	return r
}

func validMutationState(s job.MutationState) bool { return s >= job.Pending && s <= job.Resolving }
func validRefreshState(s job.RefreshState) bool {
	return s >= job.RefreshNotRequired && s <= job.RefreshFailed
}
func validProof(p job.TerminationProof) bool {
	return p >= job.ProofNone && p <= job.ProofNotEnqueued
}

// ---- catalogs and backends --------------------------------------------------

// CatalogToThrift converts a catalog to its journal form.
func CatalogToThrift(c *Catalog) *journal.TCatalogRecord {
	cp := *c
	return &journal.TCatalogRecord{
		CatalogID:      cp.ID,
		Name:           cp.Name,
		Provider:       optString(&cp.Provider),
		RootURI:        optString(&cp.RootURI),
		CredentialsRef: optString(&cp.CredentialsRef),
		RefreshKind:    optString(&cp.RefreshKind),
		RefreshURL:     optString(&cp.RefreshURL),
		CreateTimeMs:   optInt64(&cp.CreateTimeMs),
		UpdateTimeMs:   optInt64(&cp.UpdateTimeMs),

		RefreshAddress:            optString(&cp.RefreshAddress),
		RefreshStatement:          optString(&cp.RefreshStatement),
		RefreshCredentialsRef:     optString(&cp.RefreshCredentialsRef),
		OptimizeUnindexedRows:     optInt64(&cp.OptimizeUnindexedRows),
		OptimizeMinIntervalSecond: optInt64(&cp.OptimizeMinIntervalSecond),
	}
}

// CatalogFromThrift converts a journal catalog record.
func CatalogFromThrift(t *journal.TCatalogRecord) *Catalog {
	return &Catalog{
		ID:             t.CatalogID,
		Name:           t.Name,
		Provider:       t.GetProvider(),
		RootURI:        t.GetRootURI(),
		CredentialsRef: t.GetCredentialsRef(),
		RefreshKind:    t.GetRefreshKind(),
		RefreshURL:     t.GetRefreshURL(),
		CreateTimeMs:   t.GetCreateTimeMs(),
		UpdateTimeMs:   t.GetUpdateTimeMs(),

		RefreshAddress:            t.GetRefreshAddress(),
		RefreshStatement:          t.GetRefreshStatement(),
		RefreshCredentialsRef:     t.GetRefreshCredentialsRef(),
		OptimizeUnindexedRows:     t.GetOptimizeUnindexedRows(),
		OptimizeMinIntervalSecond: t.GetOptimizeMinIntervalSecond(),
	}
}

// BackendToThrift converts a backend to its journal form.
func BackendToThrift(b *Backend) *journal.TBackendRecord {
	cp := *b
	return &journal.TBackendRecord{BackendID: cp.ID, Address: cp.Address, AddTimeMs: optInt64(&cp.AddTimeMs),
		Drained: optBool(&cp.Drained), DrainTimeMs: optInt64(&cp.DrainTimeMs), DrainActor: optString(&cp.DrainActor)}
}

// BackendFromThrift converts a journal backend record.
func BackendFromThrift(t *journal.TBackendRecord) *Backend {
	return &Backend{ID: t.BackendID, Address: t.Address, AddTimeMs: t.GetAddTimeMs(),
		Drained: t.GetDrained(), DrainTimeMs: t.GetDrainTimeMs(), DrainActor: t.GetDrainActor()}
}

func optString(p *string) *string {
	if *p == "" {
		return nil
	}
	return p
}

func optInt64(p *int64) *int64 {
	if *p == 0 {
		return nil
	}
	return p
}

func optInt32(p *int32) *int32 {
	if *p == 0 {
		return nil
	}
	return p
}

func optBool(p *bool) *bool {
	if !*p {
		return nil
	}
	return p
}

// interner shares equal strings while a snapshot is restored: a million
// retained jobs repeat the same creators, tables, locators, properties and
// schema contracts, and one copy of each saves hundreds of bytes per job.
type interner struct{ m map[string]string }

func newInterner() *interner { return &interner{m: make(map[string]string, 1024)} }

// maxInterned caps the table so a snapshot of unique strings cannot grow it
// without bound; past the cap strings are simply not shared.
const maxInterned = 1 << 20

// bytes returns the shared copy of b, making one when b is new. The lookup
// does not allocate, so a repeated value costs nothing. A nil interner copies.
func (in *interner) bytes(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if in == nil {
		return string(b)
	}
	if v, ok := in.m[string(b)]; ok {
		return v
	}
	s := string(b)
	if len(in.m) < maxInterned {
		in.m[s] = s
	}
	return s
}

// strPool shares equal strings among the records Apply creates, as the
// interner does for a restore: without it every admitted job would carry its
// own copy of its creator, db, table, locator, index names, properties and
// schema contract (a few hundred bytes) however many jobs repeat them. Only
// the FSM goroutine uses it, and sharing changes no record's value, so it
// cannot make replicas differ.
//
// It is bounded by generations: lookups go to the current map and then to
// the previous one (moving a hit forward); when the current map is full it
// becomes the previous one and the oldest is dropped. A string no job uses
// any more is forgotten after two generations.
type strPool struct {
	cur, prev map[string]string
	bytes     int // in cur
}

const (
	strPoolEntries = 1 << 14
	strPoolBytes   = 4 << 20
)

func newStrPool() *strPool { return &strPool{cur: map[string]string{}} }

// get returns the shared copy of s (s itself when it is new).
func (p *strPool) get(s string) string {
	if s == "" || p == nil {
		return s
	}
	if v, ok := p.cur[s]; ok {
		return v
	}
	if v, ok := p.prev[s]; ok {
		s = v
	}
	if len(p.cur) >= strPoolEntries || p.bytes+len(s) > strPoolBytes {
		p.prev, p.cur, p.bytes = p.cur, make(map[string]string, len(p.cur)), 0
	}
	p.cur[s] = s
	p.bytes += len(s)
	return s
}

// ResourcesToThrift is r's journal form (zero fields unset); it does not
// alias r.
func ResourcesToThrift(r *job.Resources) *journal.TResources {
	c := *r
	return &journal.TResources{StartTimeMs: optInt64(&c.StartTimeMs), FinishTimeMs: optInt64(&c.FinishTimeMs),
		WallMs: optInt64(&c.WallMs), PeakMemoryBytes: optInt64(&c.PeakMemoryBytes), PeakMemorySource: optString(&c.PeakMemorySource)}
}

// ResourcesFromThrift reads the journal form (nil reads as zero).
func ResourcesFromThrift(t *journal.TResources) job.Resources {
	if t == nil {
		return job.Resources{}
	}
	return job.Resources{StartTimeMs: t.GetStartTimeMs(), FinishTimeMs: t.GetFinishTimeMs(), WallMs: t.GetWallMs(),
		PeakMemoryBytes: t.GetPeakMemoryBytes(), PeakMemorySource: t.GetPeakMemorySource()}
}
