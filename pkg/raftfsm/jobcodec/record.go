package jobcodec

import (
	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
)

// The journal form of a job record (TJobRecord, idl/journal.thrift) and of
// what it carries: the result, the resources, an OPTIMIZE's per-index list
// and the timeline. Zero values are left unset; the states and the proof
// are always written and read fail-closed.

// Wire holds a copy of one record next to the Thrift view of it: the
// view's optional fields point into the copy, so encoding a record costs one
// allocation (RecordToThrift) or none at all when Persist reuses the holder.
type Wire struct {
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
func (w *Wire) Load(r *job.Record) *journal.TJobRecord {
	w.rec = *r
	c := &w.rec
	w.mt = journal.TMutationType(c.MutationType)
	w.ms = journal.TMutationState(c.MutationState)
	w.rs = journal.TRefreshState(c.RefreshState)
	w.tp = journal.TTerminationProof(c.TerminationProof)
	w.t = journal.TJobRecord{
		JobID:                  c.JobID,
		Creator:                OptString(&c.Creator),
		Rev:                    OptInt64(&c.Rev),
		CreateTimeMs:           OptInt64(&c.CreateTimeMs),
		UpdateTimeMs:           OptInt64(&c.UpdateTimeMs),
		CatalogID:              OptInt64(&c.CatalogID),
		Db:                     OptString(&c.DB),
		Table:                  OptString(&c.Table),
		Provider:               OptString(&c.Provider),
		Locator:                OptString(&c.Locator),
		DisplayIndexName:       OptString(&c.DisplayIndexName),
		NormalizedIndexName:    OptString(&c.NormalizedIndexName),
		IfNotExists:            OptBool(&c.IfNotExists),
		IfExists:               OptBool(&c.IfExists),
		IndexType:              OptString(&c.IndexType),
		Column:                 OptString(&c.Column),
		PropertiesJSON:         OptString(&c.PropertiesJSON),
		AdmittedDatasetVersion: OptInt64(&c.AdmittedDatasetVersion),
		SchemaContract:         OptString(&c.SchemaContract),
		MutationState:          &w.ms,
		RefreshState:           &w.rs,
		BackendID:              OptInt64(&c.BackendID),
		ProcessEpoch:           OptInt64(&c.ProcessEpoch),
		DispatchRevision:       OptInt64(&c.DispatchRevision),
		InvocationID:           OptString(&c.InvocationID),
		InvocationSecret:       OptString(&c.InvocationSecret),
		DeadlineMs:             OptInt64(&c.DeadlineMs),
		LeaderTerm:             OptInt64(&c.LeaderTerm),
		PossibleLiveOwned:      OptBool(&c.PossibleLiveOwned),
		TerminationProof:       &w.tp,
		ForceReleased:          OptBool(&c.ForceReleased),
		ForceActor:             OptString(&c.ForceActor),
		ForceTimeMs:            OptInt64(&c.ForceTimeMs),
		ForceNote:              OptString(&c.ForceNote),
		ForceWarning:           OptString(&c.ForceWarning),
		RefreshFailureTimeMs:   OptInt64(&c.RefreshFailureTimeMs),
		CancelActor:            OptString(&c.CancelActor),
		DispatchAttempts:       OptInt32(&c.DispatchAttempts),
		IndexUUID:              OptString(&c.IndexUUID),
		AdmittedIndexUUID:      OptString(&c.AdmittedIndexUUID),
		TerminationMessage:     OptString(&c.TerminationMessage),
		BuildPhase:             OptString(&c.BuildPhase),
		ResolveAfterMs:         OptInt64(&c.ResolveAfterMs),
		LeftoverIndexUUID:      OptString(&c.LeftoverIndexUUID),
		LogTail:                OptString(&c.LogTail),
		DispatchTimeMs:         OptInt64(&c.DispatchTimeMs),
		BuildElapsedMs:         OptInt64(&c.BuildElapsedMs),
		ProgressTimeMs:         OptInt64(&c.ProgressTimeMs),
		OptimizedIndexes:       optimizedOfRecord(c.OptimizedIndexes),
		ResultDatasetVersion:   OptInt64(&c.ResultDatasetVersion),
		ClaimedCreator:         OptString(&c.ClaimedCreator),
		Timeline:               timelineToThrift(c.Timeline),
		RestoreHold:            OptBool(&c.RestoreHold),
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
			Message:                  OptString(&c.Result.Message),
			ExternalMetadataAdvanced: OptBool(&c.Result.ExternalMetadataAdvanced),
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
	return new(Wire).Load(r)
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
		RestoreHold:            t.GetRestoreHold(),
	}
	if t.IsSetMutationState() && validMutationState(job.MutationState(*t.MutationState)) {
		r.MutationState = job.MutationState(*t.MutationState)
	}
	if t.IsSetRefreshState() && validRefreshState(job.RefreshState(*t.RefreshState)) {
		r.RefreshState = job.RefreshState(*t.RefreshState)
	}
	if t.IsSetTerminationProof() && ValidProof(job.TerminationProof(*t.TerminationProof)) {
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
func ValidProof(p job.TerminationProof) bool {
	return p >= job.ProofNone && p <= job.ProofNotEnqueued
}

func OptString(p *string) *string {
	if *p == "" {
		return nil
	}
	return p
}

func OptInt64(p *int64) *int64 {
	if *p == 0 {
		return nil
	}
	return p
}

func OptInt32(p *int32) *int32 {
	if *p == 0 {
		return nil
	}
	return p
}

func OptBool(p *bool) *bool {
	if !*p {
		return nil
	}
	return p
}

// Interner shares equal strings while a snapshot is restored: a million
// ResourcesToThrift is r's journal form (zero fields unset); it does not
// alias r.
func ResourcesToThrift(r *job.Resources) *journal.TResources {
	c := *r
	return &journal.TResources{StartTimeMs: OptInt64(&c.StartTimeMs), FinishTimeMs: OptInt64(&c.FinishTimeMs),
		WallMs: OptInt64(&c.WallMs), PeakMemoryBytes: OptInt64(&c.PeakMemoryBytes), PeakMemorySource: OptString(&c.PeakMemorySource)}
}

// ResourcesFromThrift reads the journal form (nil reads as zero).
func ResourcesFromThrift(t *journal.TResources) job.Resources {
	if t == nil {
		return job.Resources{}
	}
	return job.Resources{StartTimeMs: t.GetStartTimeMs(), FinishTimeMs: t.GetFinishTimeMs(), WallMs: t.GetWallMs(),
		PeakMemoryBytes: t.GetPeakMemoryBytes(), PeakMemorySource: t.GetPeakMemorySource()}
}

// OptimizedFromThrift converts the journal's per-index list.
func OptimizedFromThrift(l []*journal.TOptimizedIndexRecord) []job.OptimizedIndex {
	if len(l) == 0 {
		return nil
	}
	out := make([]job.OptimizedIndex, 0, len(l))
	for _, t := range l {
		if t == nil {
			continue
		}
		out = append(out, job.OptimizedIndex{Name: t.Name, Before: countsFromThrift(t.Before), After: countsFromThrift(t.After)})
	}
	return out
}

func countsFromThrift(t *journal.TIndexCountsRecord) *job.IndexCounts {
	if t == nil {
		return nil
	}
	return &job.IndexCounts{IndexUUID: t.GetIndexUUID(), IndexedRows: t.GetIndexedRows(),
		UnindexedRows: t.GetUnindexedRows(), Segments: t.GetSegments()}
}

// OptimizedToThrift converts a per-index list to the journal's form.
func OptimizedToThrift(l []job.OptimizedIndex) []*journal.TOptimizedIndexRecord {
	if len(l) == 0 {
		return nil
	}
	out := make([]*journal.TOptimizedIndexRecord, len(l))
	for i, ix := range l {
		out[i] = &journal.TOptimizedIndexRecord{Name: ix.Name, Before: countsToThrift(ix.Before), After: countsToThrift(ix.After)}
	}
	return out
}

func countsToThrift(c *job.IndexCounts) *journal.TIndexCountsRecord {
	if c == nil {
		return nil
	}
	cp := *c
	return &journal.TIndexCountsRecord{IndexUUID: OptString(&cp.IndexUUID), IndexedRows: thrift.Int64Ptr(cp.IndexedRows),
		UnindexedRows: thrift.Int64Ptr(cp.UnindexedRows), Segments: thrift.Int32Ptr(cp.Segments)}
}

// optimizedOfRecord is a record's per-index list in the journal's form (the
// snapshot and the journal keep the list, the record its canonical string).
func optimizedOfRecord(s string) []*journal.TOptimizedIndexRecord {
	return OptimizedToThrift(job.DecodeOptimized(s))
}

// optimizedOfThrift is the canonical string of a journal list read from a
// record (a snapshot, a command); a list that breaks the bounds reads as
// none (fail-closed: it is a result detail, never evidence).
func optimizedOfThrift(l []*journal.TOptimizedIndexRecord) string {
	s, err := job.EncodeOptimized(OptimizedFromThrift(l))
	if err != nil {
		return ""
	}
	return s
}

func timelineToThrift(s string) []*journal.TJobTransition {
	tl := job.DecodeTimeline(s)
	if len(tl) == 0 {
		return nil
	}
	out := make([]*journal.TJobTransition, len(tl))
	for i := range tl {
		e := &tl[i]
		j := &journal.TJobTransition{Kind: journal.TJobTransitionKind(e.Kind), TimeMs: OptInt64(&e.TimeMs),
			Actor: OptString(&e.Actor), Detail: OptString(&e.Detail)}
		if e.Index != 0 {
			ix := int64(e.Index)
			j.Index = &ix
		}
		out[i] = j
	}
	return out
}

// timelineOfThrift reads a journal timeline; an element of an unknown kind
// is kept (a newer master's), and the bound holds whatever the list says.
func timelineOfThrift(l []*journal.TJobTransition) string {
	if len(l) == 0 {
		return ""
	}
	out := make([]job.Transition, 0, min(len(l), job.MaxTimeline))
	for _, j := range l {
		if j == nil {
			continue
		}
		out = append(out, job.Transition{Kind: job.TransitionKind(j.Kind), TimeMs: j.GetTimeMs(),
			Index: uint64(max(j.GetIndex(), 0)), Actor: j.GetActor(), Detail: j.GetDetail()})
	}
	return job.EncodeTimeline(job.BoundTimeline(out))
}
