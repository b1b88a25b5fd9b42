package raftfsm

import (
	"reflect"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
)

func fullRecord() *job.Record {
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

// roundTrip encodes a record through the compact protocol and back.
func roundTrip(t *testing.T, tj *journal.TJobRecord) *job.Record {
	t.Helper()
	data, err := Encode(CmdAdmit, &journal.TAdmitCommand{NowMs: 1, Job: tj})
	if err != nil {
		t.Fatal(err)
	}
	cmd := journal.NewTAdmitCommand()
	if err := decodeCompact(data[1:], cmd); err != nil {
		t.Fatal(err)
	}
	return RecordFromThrift(cmd.Job)
}

func TestRecordRoundTrip(t *testing.T) {
	for name, r := range map[string]*job.Record{
		"full":    fullRecord(),
		"minimal": {JobID: 1, MutationState: job.Pending, RefreshState: job.RefreshNotRequired, TerminationProof: job.ProofNone},
	} {
		t.Run(name, func(t *testing.T) {
			tj := RecordToThrift(r)
			r.Creator = "changed" // the Thrift view must not alias r
			if tj.GetCreator() == "changed" {
				t.Fatalf("RecordToThrift aliases its argument")
			}
			r.Creator = fullRecord().Creator
			if name == "minimal" {
				r.Creator = ""
			}
			if got := roundTrip(t, tj); !reflect.DeepEqual(got, r) {
				t.Fatalf("\n got %+v\nwant %+v", got, r)
			}
		})
	}
}

func TestMissingStatesReadFailClosed(t *testing.T) {
	tj := RecordToThrift(fullRecord())
	tj.MutationState, tj.RefreshState, tj.TerminationProof = nil, nil, nil
	got := roundTrip(t, tj)
	if got.MutationState != job.Unknown || got.RefreshState != job.RefreshRequired || got.TerminationProof != job.ProofNone {
		t.Fatalf("missing values read as %s/%s/%s", got.MutationState, got.RefreshState, got.TerminationProof)
	}
	// Values this master does not know read the same way.
	tj.MutationState, tj.RefreshState, tj.TerminationProof = ptr(journal.TMutationState(40)), ptr(journal.TRefreshState(40)), ptr(journal.TTerminationProof(40))
	got = roundTrip(t, tj)
	if got.MutationState != job.Unknown || got.RefreshState != job.RefreshRequired || got.TerminationProof != job.ProofNone {
		t.Fatalf("unknown values read as %s/%s/%s", got.MutationState, got.RefreshState, got.TerminationProof)
	}
}

func TestCatalogAndBackendRoundTrip(t *testing.T) {
	c := &Catalog{ID: 1, Name: "n", Provider: "DIRECTORY", RootURI: "/r", CredentialsRef: "k", RefreshKind: "webhook",
		RefreshURL: "http://x", CreateTimeMs: 2, UpdateTimeMs: 3, RefreshAddress: "fe:9030", RefreshStatement: "REFRESH TABLE {table}",
		RefreshCredentialsRef: "doris", OptimizeUnindexedRows: 5000, OptimizeMinIntervalSecond: 60}
	if got := CatalogFromThrift(CatalogToThrift(c)); *got != *c {
		t.Fatalf("catalog %+v", got)
	}
	b := &Backend{ID: 1, Address: "h:1", AddTimeMs: 2}
	if got := BackendFromThrift(BackendToThrift(b)); *got != *b {
		t.Fatalf("backend %+v", got)
	}
}

func TestEncodeLayout(t *testing.T) {
	data, err := Encode(CmdSetOption, &journal.TSetOptionCommand{NowMs: 1, Key: "k", Value: "v"})
	if err != nil {
		t.Fatal(err)
	}
	if data[0] != byte(CmdSetOption) {
		t.Fatalf("type byte = %d", data[0])
	}
	cmd := journal.NewTSetOptionCommand()
	if err := decodeCompact(data[1:], cmd); err != nil || cmd.Key != "k" || cmd.Value != "v" || cmd.NowMs != 1 {
		t.Fatalf("decoded %+v, %v", cmd, err)
	}
	// A required struct left nil is an error, not a panic.
	if _, err := Encode(CmdAdmit, &journal.TAdmitCommand{NowMs: 1}); err == nil {
		t.Fatalf("encoding an admit without a job succeeded")
	}
	// Thrift would write a nil list element as an empty struct that no
	// replica can decode: a poison entry. Encode refuses it.
	if _, err := Encode(CmdMarkRunningBatch, &journal.TMarkRunningBatch{Jobs: []*journal.TMarkRunning{nil}}); err == nil {
		t.Fatalf("encoding a batch with a nil item succeeded")
	}
	if _, err := Encode(CmdCancel, nil); err == nil {
		t.Fatalf("encoding nil succeeded")
	}
}

func TestResponseRoundTrip(t *testing.T) {
	r := &journal.TApplyResponse{Code: journal.TApplyCode_FENCE_CONFLICT, Message: thrift.StringPtr("m"),
		ID: thrift.Int64Ptr(3), ConflictJobID: thrift.Int64Ptr(2),
		Items: []*journal.TItemResult_{{JobID: 1, Code: journal.TApplyCode_NOOP, Message: thrift.StringPtr("x")}}}
	b, err := EncodeResponse(r)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeResponse(b)
	if err != nil || !reflect.DeepEqual(got, r) {
		t.Fatalf("got %+v, %v", got, err)
	}
	if _, err := DecodeResponse([]byte{0xff}); err == nil {
		t.Fatalf("garbage decoded")
	}
	if _, err := EncodeResponse(nil); err == nil {
		t.Fatalf("nil encoded")
	}
}
