package report

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/job"
)

const leaderAddr = "10.0.0.9:9060"

// loopClient is a thrift.TClient that serializes each call's arguments, as
// the wire would, and hands them to the leader's Handler.
type loopClient struct {
	leader *Handler
	calls  []string
}

func (c *loopClient) Call(ctx context.Context, method string, args, result thrift.TStruct) (thrift.ResponseMeta, error) {
	c.calls = append(c.calls, method)
	b, err := thrift.NewTSerializer().Write(ctx, args)
	if err != nil {
		return thrift.ResponseMeta{}, err
	}
	switch method {
	case "reportLanceIndexJobResult":
		var in adminapi.LanceMasterServiceReportLanceIndexJobResultArgs
		if err := thrift.NewTDeserializer().Read(ctx, &in, b); err != nil {
			return thrift.ResponseMeta{}, err
		}
		result.(*adminapi.LanceMasterServiceReportLanceIndexJobResultResult).Success = c.leader.HandleResult(ctx, in.Report)
	case "reportLanceIndexJobTermination":
		var in adminapi.LanceMasterServiceReportLanceIndexJobTerminationArgs
		if err := thrift.NewTDeserializer().Read(ctx, &in, b); err != nil {
			return thrift.ResponseMeta{}, err
		}
		result.(*adminapi.LanceMasterServiceReportLanceIndexJobTerminationResult).Success = c.leader.HandleTermination(ctx, in.Report)
	case "reportLanceIndexJobProgress":
		var in adminapi.LanceMasterServiceReportLanceIndexJobProgressArgs
		if err := thrift.NewTDeserializer().Read(ctx, &in, b); err != nil {
			return thrift.ResponseMeta{}, err
		}
		result.(*adminapi.LanceMasterServiceReportLanceIndexJobProgressResult).Success = c.leader.HandleProgress(ctx, in.Report)
	default:
		return thrift.ResponseMeta{}, fmt.Errorf("unexpected method %s", method)
	}
	return thrift.ResponseMeta{}, nil
}

// follower is a second master over the same journal that does not lead.
type follower struct {
	h      *Handler
	prop   *capturingProposer
	client *loopClient
	addrs  []string
}

func newFollower(f *fixture, leader func() (string, string), forwardErr error) *follower {
	fo := &follower{prop: newFollowerProposer(f.fsm), client: &loopClient{leader: f.h}}
	fo.h = New(Deps{Proposer: fo.prop, Reader: f.fsm, Leader: leader, Logger: f.h.log,
		Forward: func(ctx context.Context, addr string, fn func(context.Context, *adminapi.LanceMasterServiceClient) error) error {
			fo.addrs = append(fo.addrs, addr)
			if forwardErr != nil {
				return forwardErr
			}
			return fn(ctx, adminapi.NewLanceMasterServiceClient(fo.client))
		}})
	return fo
}

func knownLeader() (string, string) { return "m1", leaderAddr }

func TestFollowerForwardsToTheLeader(t *testing.T) {
	f := newFixture(t)
	rec := f.running("t1")
	fo := newFollower(f, knownLeader, nil)

	r := validReport(rec, job.NativeOK)
	r.TerminationProof = ptr(wire.TLanceIndexTerminationProof_CHILD_REAPED)
	wantStatus(t, fo.h.HandleResult(context.Background(), r), wire.TStatusCode_OK)
	if got := f.job(rec.JobID); got.MutationState != job.Committed || got.TerminationProof != job.ProofChildReaped {
		t.Fatalf("the leader did not apply the forwarded report: %s %s", got.MutationState, got.TerminationProof)
	}
	if fo.prop.count() != 0 {
		t.Fatal("the follower proposed itself")
	}

	// The leader's refusal comes back as is.
	forged := validReport(rec, job.NativeOK)
	forged.InvocationSecret = thrift.StringPtr("forged-secret")
	wantStatus(t, fo.h.HandleResult(context.Background(), forged), wire.TStatusCode_UNAUTHENTICATED)

	rec2 := f.running("t2")
	wantStatus(t, fo.h.HandleTermination(context.Background(),
		validTermination(rec2, wire.TLanceIndexTerminationProof_NEVER_LAUNCHED)), wire.TStatusCode_OK)
	if got := f.job(rec2.JobID); got.TerminationProof != job.ProofNeverLaunched {
		t.Fatalf("forwarded termination not applied: %s", got.TerminationProof)
	}

	want := []string{"reportLanceIndexJobResult", "reportLanceIndexJobResult", "reportLanceIndexJobTermination"}
	if fmt.Sprint(fo.client.calls) != fmt.Sprint(want) {
		t.Fatalf("calls = %v, want %v", fo.client.calls, want)
	}
	for _, a := range fo.addrs {
		if a != leaderAddr {
			t.Fatalf("forwarded to %q, want %q", a, leaderAddr)
		}
	}
	wantCounts(t, fo.h, map[string]int64{"forwarded": 3, "applied_result": 0})
	wantCounts(t, f.h, map[string]int64{"applied_result": 1, "applied_proof": 2, "unauthenticated": 1})
	assertNoSecret(t, f)
}

// The follower judges nothing itself: even a report its own replica would
// call unknown goes to the leader, whose view is the one that counts.
func TestFollowerDoesNotJudge(t *testing.T) {
	f := newFixture(t)
	fo := newFollower(f, knownLeader, nil)
	c := wire.TLanceIndexJobResultCode_NATIVE_OK
	wantStatus(t, fo.h.HandleResult(context.Background(), &wire.TLanceIndexJobReport{JobID: 77, ResultCode: &c}),
		wire.TStatusCode_STALE_REPORT)
	wantCounts(t, fo.h, map[string]int64{"forwarded": 1, "unknown_job": 0})
	wantCounts(t, f.h, map[string]int64{"unknown_job": 1})
}

func TestFollowerWithoutALeader(t *testing.T) {
	f := newFixture(t)
	rec := f.running("t1")
	before := f.snapshot()
	for _, tc := range []struct {
		name   string
		fo     *follower
		reason string
	}{
		{"no leader known", newFollower(f, func() (string, string) { return "", "" }, nil), "no_leader"},
		{"forwarding fails", newFollower(f, knownLeader, errors.New("dial tcp: connection refused")), "forward_failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantStatus(t, tc.fo.h.HandleResult(context.Background(), validReport(rec, job.NativeOK)), wire.TStatusCode_NOT_LEADER)
			wantStatus(t, tc.fo.h.HandleTermination(context.Background(),
				validTermination(rec, wire.TLanceIndexTerminationProof_CHILD_REAPED)), wire.TStatusCode_NOT_LEADER)
			wantCounts(t, tc.fo.h, map[string]int64{tc.reason: 2, "forwarded": 0})
			if len(tc.fo.client.calls) != 0 {
				t.Fatal("the leader was called")
			}
		})
	}
	// Forwarding disabled (no Forward func): NOT_LEADER too.
	off := New(Deps{Proposer: newFollowerProposer(f.fsm), Reader: f.fsm, Leader: knownLeader})
	wantStatus(t, off.HandleResult(context.Background(), validReport(rec, job.NativeOK)), wire.TStatusCode_NOT_LEADER)
	wantCounts(t, off, map[string]int64{"no_leader": 1})
	if !bytes.Equal(before, f.snapshot()) {
		t.Fatal("state changed")
	}
}

// Forwarding is one hop: a follower handed a report that another master
// already forwarded answers NOT_LEADER instead of forwarding it again, so two
// followers that each think the other leads cannot bounce it.
func TestForwardingIsOneHop(t *testing.T) {
	f := newFixture(t)
	rec := f.running("t1")
	fo := newFollower(f, knownLeader, nil)
	r := validReport(rec, job.NativeOK)
	r.Forwarded = thrift.BoolPtr(true)
	wantStatus(t, fo.h.HandleResult(context.Background(), r), wire.TStatusCode_NOT_LEADER)
	tr := validTermination(rec, wire.TLanceIndexTerminationProof_CHILD_REAPED)
	tr.Forwarded = thrift.BoolPtr(true)
	wantStatus(t, fo.h.HandleTermination(context.Background(), tr), wire.TStatusCode_NOT_LEADER)
	if len(fo.addrs) != 0 {
		t.Fatalf("a forwarded report was forwarded again to %v", fo.addrs)
	}
	// A follower's own forward marks the report, and the leader still applies it.
	wantStatus(t, fo.h.HandleResult(context.Background(), validReport(rec, job.NativeOK)), wire.TStatusCode_OK)
	if f.job(rec.JobID).MutationState != job.Committed {
		t.Fatal("the marked report was not applied by the leader")
	}
}
