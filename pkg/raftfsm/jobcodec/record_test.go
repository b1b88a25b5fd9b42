package jobcodec

import (
	"reflect"
	"testing"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/raftfsm/jobcodec/jobcodectest"
)

// roundTrip encodes a record through the compact protocol and back with
// the generated code.
func roundTrip(t *testing.T, tj *journal.TJobRecord) *job.Record {
	t.Helper()
	r, err := generated(compact(t, tj))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRecordRoundTrip(t *testing.T) {
	for name, r := range map[string]*job.Record{
		"full":    jobcodectest.Full(),
		"minimal": {JobID: 1, MutationState: job.Pending, RefreshState: job.RefreshNotRequired, TerminationProof: job.ProofNone},
	} {
		t.Run(name, func(t *testing.T) {
			tj := RecordToThrift(r)
			r.Creator = "changed" // the Thrift view must not alias r
			if tj.GetCreator() == "changed" {
				t.Fatalf("RecordToThrift aliases its argument")
			}
			r.Creator = jobcodectest.Full().Creator
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
	tj := RecordToThrift(jobcodectest.Full())
	tj.MutationState, tj.RefreshState, tj.TerminationProof = nil, nil, nil
	got := roundTrip(t, tj)
	if got.MutationState != job.Unknown || got.RefreshState != job.RefreshRequired || got.TerminationProof != job.ProofNone {
		t.Fatalf("missing values read as %s/%s/%s", got.MutationState, got.RefreshState, got.TerminationProof)
	}
	// Values this master does not know read the same way.
	ms, rs, tp := journal.TMutationState(40), journal.TRefreshState(40), journal.TTerminationProof(40)
	tj.MutationState, tj.RefreshState, tj.TerminationProof = &ms, &rs, &tp
	got = roundTrip(t, tj)
	if got.MutationState != job.Unknown || got.RefreshState != job.RefreshRequired || got.TerminationProof != job.ProofNone {
		t.Fatalf("unknown values read as %s/%s/%s", got.MutationState, got.RefreshState, got.TerminationProof)
	}
}
