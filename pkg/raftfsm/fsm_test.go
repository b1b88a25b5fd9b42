package raftfsm

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/lancemaster/lancemaster/pkg/testkit"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
)

func TestUnknownIgnorableCommandIsSkipped(t *testing.T) {
	h := newHarness(t)
	h.createCatalog("lake", testRoot)
	before := h.st()
	out := h.applyRaw([]byte{byte(IgnorableFlag | 0x3f), 1, 2, 3})
	resp, ok := out.(*journal.TApplyResponse)
	if !ok || resp.Code != journal.TApplyCode_OK || resp.GetMessage() != "ignored" {
		t.Fatalf("response = %#v", out)
	}
	if len(h.fatals) != 0 {
		t.Fatalf("OnFatal called: %v", h.fatals)
	}
	h.unchanged(before)
	if h.st().AppliedIndex() != h.index {
		t.Fatalf("applied index = %d, want %d", h.st().AppliedIndex(), h.index)
	}
	if h.logs.FilterMessageSnippet("ignorable").Len() != 1 {
		t.Fatalf("no warning logged")
	}
}

func TestUnapplicableEntriesCallOnFatal(t *testing.T) {
	valid, err := Encode(CmdCancel, &journal.TCancelCommand{JobID: 1, Actor: "a"})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		data []byte
		typ  CommandType
	}{
		{"unknown type", []byte{0x3f, 0}, 0x3f},
		{"empty entry", nil, 0},
		{"undecodable body", []byte{byte(CmdAdmit), 0xff, 0xff, 0xff}, CmdAdmit},
		{"truncated body", valid[:len(valid)-2], CmdCancel},
		{"missing required field", []byte{byte(CmdCancel), 0}, CmdCancel},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			h.createCatalog("lake", testRoot)
			before := h.st()
			out := h.applyRaw(c.data)
			if len(h.fatals) != 1 {
				t.Fatalf("OnFatal called %d times", len(h.fatals))
			}
			var fe *FatalError
			if !errors.As(h.fatals[0], &fe) || fe.Type != c.typ || fe.Index != h.index {
				t.Fatalf("fatal error = %v", h.fatals[0])
			}
			if resp, ok := out.(*journal.TApplyResponse); !ok || resp.Code == journal.TApplyCode_OK {
				t.Fatalf("response = %#v", out)
			}
			h.unchanged(before)
			if h.st().AppliedIndex() == h.index {
				t.Fatalf("a fatal entry counted as applied")
			}
		})
	}
}

func TestEveryCommandTypeIsRegistered(t *testing.T) {
	for ct := CmdAdmit; ct <= CmdReportBatch; ct++ {
		if registry[ct] == nil {
			t.Errorf("command type %d has no apply function", ct)
		}
	}
	// The ignorable ones (bit 7 set) are pinned below too.
	if ignorable := []CommandType{CmdSetMemberAddress, CmdSetClusterID, CmdDrainBackend, CmdAudit}; len(registry) != int(CmdReportBatch)+len(ignorable) {
		t.Errorf("%d command types registered; the last pinned is %d (pin a new one here and below)", len(registry), CmdReportBatch)
	}
}

// The type byte is in every log entry ever written: never renumber.
func TestCommandTypesArePinned(t *testing.T) {
	for ct, want := range map[CommandType]uint8{
		CmdAdmit: 1, CmdMarkRunningBatch: 2, CmdCompleteBatch: 3, CmdRecordProofBatch: 4, CmdRefreshBatch: 5,
		CmdCancel: 6, CmdForceRelease: 7, CmdGC: 8, CmdCreateCatalog: 9, CmdUpdateCatalog: 10,
		CmdRemoveCatalog: 11, CmdAddBackend: 12, CmdRemoveBackend: 13, CmdSetOption: 14, CmdAdmitBatch: 15, CmdReportBatch: 16,
	} {
		if uint8(ct) != want {
			t.Errorf("command type %d is pinned to %d", ct, want)
		}
		if ct&IgnorableFlag != 0 {
			t.Errorf("command type %d carries the ignorable bit", ct)
		}
	}
	// Ignorable: an older master skips them (the address book).
	if CmdSetMemberAddress != 17|IgnorableFlag || registry[CmdSetMemberAddress] == nil {
		t.Errorf("the address book command is pinned to %d (17 | ignorable)", uint8(CmdSetMemberAddress))
	}
	if CmdSetClusterID != 18|IgnorableFlag || registry[CmdSetClusterID] == nil {
		t.Errorf("the cluster id command is pinned to %d (18 | ignorable)", uint8(CmdSetClusterID))
	}
	if CmdDrainBackend != 19|IgnorableFlag || registry[CmdDrainBackend] == nil {
		t.Errorf("the drain command is pinned to %d (19 | ignorable)", uint8(CmdDrainBackend))
	}
	if CmdAudit != 20|IgnorableFlag || registry[CmdAudit] == nil {
		t.Errorf("the audit command is pinned to %d (20 | ignorable)", uint8(CmdAudit))
	}
}

// TestSecretsNeverLogged drives a full lifecycle, with failures, and checks
// that no log line carries an invocation secret.
func TestSecretsNeverLogged(t *testing.T) {
	h, id, be := pendingFixture(t)
	r := h.run(id, be)
	bad := completion(r, job.NativeOK, false)
	bad.InvocationID = testSecret
	h.complete(bad)
	h.complete(completion(r, job.NativeIO, false))
	h.proof(proofCmd(h.job(id), job.ProofChildReaped))
	h.forceRelease(id, "n")
	h.applyRaw([]byte{byte(IgnorableFlag | 1)})
	h.applyRaw([]byte{0x7f})
	h.fatals = nil
	testkit.NoSecretInLogs(t, h.logs, testSecret)
	if h.logs.Len() == 0 {
		t.Fatalf("expected some log lines to check")
	}
}

func TestApplyDoesNotMutatePublishedViews(t *testing.T) {
	h, id, be := pendingFixture(t)
	old := h.st()
	oldRec := *h.job(id)
	oldBooks := old.Books()
	h.run(id, be)
	h.admit(1, "db", "t2", "idx")
	if r, _ := old.Job(id); *r != oldRec {
		t.Fatalf("an old view's record changed")
	}
	if len(old.PendingInIDOrder(0)) != 1 || old.HeldSlots(be) != 0 {
		t.Fatalf("an old view's indexes changed")
	}
	if !equalBooksTo(old.Books(), oldBooks) {
		t.Fatalf("an old view's books changed")
	}
}

// Published wakes its waiters on every newer view, an applied entry or a
// restored snapshot, and never before one: a waiter that takes it before
// reading State misses no change.
func TestPublishedWakesOnEveryNewView(t *testing.T) {
	h := newHarness(t)
	closed := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	ch := h.f.Published()
	if closed(ch) {
		t.Fatal("closed before any new view")
	}
	h.createCatalog("lake", "/data/lake")
	if !closed(ch) {
		t.Fatal("an applied entry did not wake the waiters")
	}
	ch = h.f.Published()
	if closed(ch) {
		t.Fatal("a channel taken after the entry is already closed")
	}
	snap := snapshotBytes(t, h.st())
	if err := h.f.Restore(io.NopCloser(bytes.NewReader(snap))); err != nil {
		t.Fatal(err)
	}
	if !closed(ch) {
		t.Fatal("a restored snapshot did not wake the waiters")
	}
}
