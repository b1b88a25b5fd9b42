// Package jobcodectest makes job records for the tests that hold the
// journal's record codecs (jobcodec, and the snapshot decoder of raftfsm)
// to the generated code: one record with every scalar field set, and
// random ones.
package jobcodectest

import (
	"math/rand/v2"
	"strings"

	"github.com/lancemaster/lancemaster/pkg/job"
)

// Full is a record with every scalar field set to a value of its own (the
// optimized indexes and the timeline empty).
func Full() *job.Record {
	return &job.Record{
		JobID: 7, Creator: "alice", Rev: 4, CreateTimeMs: 1, UpdateTimeMs: 2,
		CatalogID: 3, DB: "db", Table: "t", Provider: "DIRECTORY", Locator: "s3://b/db/t.lance",
		DisplayIndexName: "Idx", NormalizedIndexName: "idx", MutationType: job.Replace,
		IfNotExists: true, IfExists: true, IndexType: "IVF_PQ", Column: "v",
		PropertiesJSON: `{"metric":"l2"}`, AdmittedDatasetVersion: 9, SchemaContract: "{}",
		MutationState: job.Unknown, RefreshState: job.RefreshFailed,
		Result:    job.Result{Code: job.NativeIO, Reason: job.ReasonIfConditionNoop, Message: "m", ExternalMetadataAdvanced: true},
		BackendID: 5, ProcessEpoch: 6, DispatchRevision: 3, InvocationID: "inv", InvocationSecret: "sec",
		DeadlineMs: 8, LeaderTerm: 10, PossibleLiveOwned: true, TerminationProof: job.ProofChildReaped,
		ForceReleased: true, ForceActor: "ops", ForceTimeMs: 11, ForceNote: "n", ForceWarning: "w",
		RefreshFailureTimeMs: 12, CancelActor: "c",
		LeftoverIndexUUID: "0b5d6f9e-3c1a-4e2b-9f7d-1a2b3c4d5e6f", LogTail: "tail\n", DispatchTimeMs: 13, BuildElapsedMs: 14, ProgressTimeMs: 15,
		Resources: job.Resources{StartTimeMs: 16, FinishTimeMs: 17, WallMs: 1, PeakMemoryBytes: 18, PeakMemorySource: job.PeakFromCgroup},
	}
}

// Random is a record whose fields are each empty, negative, or random (any
// length, non-ASCII strings), with optimized indexes and a timeline at times.
func Random(rng *rand.Rand) *job.Record {
	s := func() string {
		if rng.IntN(3) == 0 {
			return ""
		}
		return strings.Repeat(string(rune('a'+rng.IntN(26))), rng.IntN(40)) + "é"
	}
	i := func() int64 {
		switch rng.IntN(4) {
		case 0:
			return 0
		case 1:
			return -rng.Int64()
		}
		return rng.Int64N(1 << uint(1+rng.IntN(62)))
	}
	b := func() bool { return rng.IntN(2) == 0 }
	r := &job.Record{
		JobID: i(), Creator: s(), Rev: i(), CreateTimeMs: i(), UpdateTimeMs: i(), CatalogID: i(),
		DB: s(), Table: s(), Provider: s(), Locator: s(), DisplayIndexName: s(), NormalizedIndexName: s(),
		MutationType: job.MutationType(rng.IntN(5)), IfNotExists: b(), IfExists: b(), IndexType: s(), Column: s(),
		PropertiesJSON: s(), AdmittedDatasetVersion: i(), SchemaContract: s(),
		MutationState: job.MutationState(1 + rng.IntN(6)), RefreshState: job.RefreshState(1 + rng.IntN(5)),
		BackendID: i(), ProcessEpoch: i(), DispatchRevision: i(), InvocationID: s(), InvocationSecret: s(),
		DeadlineMs: i(), LeaderTerm: i(), PossibleLiveOwned: b(), TerminationProof: job.TerminationProof(1 + rng.IntN(5)),
		ForceReleased: b(), ForceActor: s(), ForceTimeMs: i(), ForceNote: s(), ForceWarning: s(),
		RefreshFailureTimeMs: i(), CancelActor: s(),
	}
	if b() {
		r.Result = job.Result{Code: job.ResultCode(rng.IntN(13)), Reason: job.CompletionReason(rng.IntN(3)), Message: s(), ExternalMetadataAdvanced: b()}
	}
	if rng.IntN(4) == 0 {
		r.ResultDatasetVersion = i()
		var ixs []job.OptimizedIndex
		for range rng.IntN(4) {
			ix := job.OptimizedIndex{Name: "ix" + s()}
			if b() {
				ix.Before = &job.IndexCounts{IndexUUID: s(), IndexedRows: rng.Int64N(1 << 40), UnindexedRows: rng.Int64N(100), Segments: rng.Int32N(9)}
			}
			if b() {
				ix.After = &job.IndexCounts{IndexedRows: rng.Int64N(1 << 40)}
			}
			ixs = append(ixs, ix)
		}
		r.OptimizedIndexes, _ = job.EncodeOptimized(ixs)
	}
	if b() {
		r.AdmitIndex = rng.Uint64N(1 << 40)
		var tl []job.Transition
		for range rng.IntN(6) {
			tl = append(tl, job.Transition{Kind: job.TransitionKind(rng.IntN(19)), TimeMs: i(), Index: rng.Uint64N(1 << 40),
				Actor: s(), Detail: s()})
		}
		r.Timeline = job.EncodeTimeline(tl)
	}
	r.RestoreHold = b()
	return r
}
