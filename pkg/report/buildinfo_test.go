package report

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/config"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

const leftUUID = "0b5d6f9e-3c1a-4e2b-9f7d-1a2b3c4d5e6f"

func wireResources() *wire.TBuildResources {
	return &wire.TBuildResources{StartTimeMs: thrift.Int64Ptr(100), FinishTimeMs: thrift.Int64Ptr(1600), WallMs: thrift.Int64Ptr(1400),
		PeakMemoryBytes: thrift.Int64Ptr(300 << 20), PeakMemorySource: thrift.StringPtr("rusage")}
}

var wantResources = job.Resources{StartTimeMs: 100, FinishTimeMs: 1600, WallMs: 1400, PeakMemoryBytes: 300 << 20, PeakMemorySource: "rusage"}

// A result report's resources, log tail and leftover uuid reach the record
// through M2; a termination report's resources and log tail through P.
func TestBuildInfoIsJournaled(t *testing.T) {
	f := newFixture(t)
	rec := f.running("t1")
	r := validReport(rec, job.NativeCommitConflict)
	r.Resources, r.LogTail, r.LeftoverIndexUUID = wireResources(), thrift.StringPtr("conflict\n"), thrift.StringPtr(strings.ToUpper(leftUUID))
	wantStatus(t, f.result(r), wire.TStatusCode_OK)
	got := f.job(rec.JobID)
	if got.Resources != wantResources || got.LogTail != "conflict\n" || got.LeftoverIndexUUID != leftUUID {
		t.Fatalf("after the result %+v", got)
	}

	rec2 := f.running("t2")
	term := validTermination(rec2, wire.TLanceIndexTerminationProof_CHILD_REAPED)
	term.NoResult_, term.Resources, term.LogTail = thrift.BoolPtr(true), wireResources(), thrift.StringPtr("Killed\n")
	wantStatus(t, f.termination(term), wire.TStatusCode_OK)
	if got := f.job(rec2.JobID); got.MutationState != job.Resolving || got.Resources != wantResources || got.LogTail != "Killed\n" {
		t.Fatalf("after the termination %+v", got)
	}
	assertNoSecret(t, f)
}

// A malformed part is dropped with INVALID_ARGUMENT; the result applies.
func TestMalformedBuildInfoIsDropped(t *testing.T) {
	for name, edit := range map[string]func(*wire.TLanceIndexJobReport){
		"negative wall":  func(r *wire.TLanceIndexJobReport) { r.Resources.WallMs = thrift.Int64Ptr(-1) },
		"unknown source": func(r *wire.TLanceIndexJobReport) { r.Resources.PeakMemorySource = thrift.StringPtr("guess") },
		"finish first":   func(r *wire.TLanceIndexJobReport) { r.Resources.FinishTimeMs = thrift.Int64Ptr(1) },
		"long tail": func(r *wire.TLanceIndexJobReport) {
			r.LogTail = thrift.StringPtr(strings.Repeat("x", job.MaxLogTailBytes+1))
		},
		"bad utf-8":    func(r *wire.TLanceIndexJobReport) { r.LogTail = thrift.StringPtr("\xff") },
		"bad leftover": func(r *wire.TLanceIndexJobReport) { r.LeftoverIndexUUID = thrift.StringPtr("../../etc") },
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			rec := f.running("t1")
			r := validReport(rec, job.NativeCommitConflict)
			r.Resources, r.LogTail = wireResources(), thrift.StringPtr("ok\n")
			edit(r)
			st := f.result(r)
			wantStatus(t, st, wire.TStatusCode_INVALID_ARGUMENT)
			if !strings.Contains(st.ErrorMsgs[0], "the result was accepted") {
				t.Fatalf("status %v", st)
			}
			if got := f.job(rec.JobID); got.MutationState != job.NotCommitted {
				t.Fatalf("the result did not apply: %+v", got)
			}
		})
	}
}

// A progress report's elapsed time is journaled with the phase; the
// record's progress time is the batch's clock.
func TestProgressElapsedIsJournaled(t *testing.T) {
	f := newFixture(t)
	rec := f.running("t1")
	p := validProgress(rec)
	p.Phase, p.ElapsedMs = thrift.StringPtr("shuffling"), thrift.Int64Ptr(4200)
	wantStatus(t, f.h.HandleProgress(context.Background(), p), wire.TStatusCode_OK)
	got := f.job(rec.JobID)
	if got.BuildPhase != "shuffling" || got.BuildElapsedMs != 4200 || got.ProgressTimeMs == 0 {
		t.Fatalf("%+v", got)
	}
}

// With Deps.Credentials the masters redact a log tail of the job's catalog
// credentials again before it is journaled (a backend that failed to is
// not trusted), and drop a tail whose credentials cannot be read.
func TestLogTailRedactedOfTheCatalogCredentials(t *testing.T) {
	const canary = "STORAGE-CANARY-report-5e1f"
	f := newFixture(t, func(d *Deps) {
		d.Credentials = config.StaticCredentials{"vault-creds": {"aws_secret_access_key": canary}}
	})
	f.catalogID = f.apply(raftfsm.CmdCreateCatalog, &journal.TCatalogCommand{NowMs: f.now, Catalog: &journal.TCatalogRecord{
		Name: "vault", RootURI: thrift.StringPtr(testRoot), CredentialsRef: thrift.StringPtr("vault-creds")}}).GetID()
	rec := f.running("t1")
	r := validReport(rec, job.NativeCommitConflict)
	r.LogTail = thrift.StringPtr("opening with " + canary + "\n")
	wantStatus(t, f.result(r), wire.TStatusCode_OK)
	if got := f.job(rec.JobID); got.LogTail != "opening with [redacted]\n" {
		t.Fatalf("journaled tail %q", got.LogTail)
	}
	if bytes.Contains(f.snapshot(), []byte(canary)) {
		t.Fatal("the journal holds the credential")
	}

	f.catalogID = f.apply(raftfsm.CmdCreateCatalog, &journal.TCatalogCommand{NowMs: f.now, Catalog: &journal.TCatalogRecord{
		Name: "gone", RootURI: thrift.StringPtr(testRoot), CredentialsRef: thrift.StringPtr("missing-creds")}}).GetID()
	rec2 := f.running("t2")
	term := validTermination(rec2, wire.TLanceIndexTerminationProof_CHILD_REAPED)
	term.NoResult_, term.LogTail = thrift.BoolPtr(true), thrift.StringPtr("whatever\n")
	wantStatus(t, f.termination(term), wire.TStatusCode_OK)
	if got := f.job(rec2.JobID); got.MutationState != job.Resolving || got.LogTail != "" {
		t.Fatalf("a tail whose credentials cannot be read was kept: %+v", got)
	}
}
