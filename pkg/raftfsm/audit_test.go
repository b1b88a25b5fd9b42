package raftfsm

import (
	"bytes"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/options"
)

// alice is a verified caller who claimed another name.
func alice() *journal.TAuditActor {
	return &journal.TAuditActor{Actor: "alice", Claimed: thrift.StringPtr("bob"), Verified: thrift.BoolPtr(true)}
}

// lastEvent is the newest event; it fails the test when there is none.
func (h *harness) lastEvent() *AuditEvent {
	h.t.Helper()
	evs, _ := h.st().AuditEvents(AuditFilter{}, 0, 1)
	if len(evs) != 1 {
		h.t.Fatalf("no audit event recorded")
	}
	return evs[0]
}

// Every audited FSM command records its event in the entry that makes the
// change: who (the verified actor and the claim), when (the command's
// clock), the entry's index, the subject and what changed. h.apply checks
// that Preview answers what Apply does.
func TestAuditEveryCommandRecordsItsEvent(t *testing.T) {
	h, jobID, be := pendingFixture(t)
	unknown := h.admit(h.st().Catalogs()[0].ID, "db", "t2", "idx2")
	wantItem(t, h.complete(completion(h.run(unknown, be), job.NoTrustedResult, false)), journal.TApplyCode_OK)
	if h.st().AuditEventCount() != 0 {
		t.Fatalf("commands without an actor recorded %d events", h.st().AuditEventCount())
	}
	a := alice()
	steps := []struct {
		kind, subject, summary string
		ct                     CommandType
		cmd                    func(now int64) thrift.TStruct
	}{
		{AuditCatalogCreate, "sea", "root_uri: - → s3://bucket/sea", CmdCreateCatalog, func(now int64) thrift.TStruct {
			return &journal.TCatalogCommand{NowMs: now, Audit: a, Catalog: &journal.TCatalogRecord{Name: "sea", RootURI: thrift.StringPtr("s3://bucket/sea")}}
		}},
		{AuditCatalogUpdate, "sea", "credentials_ref: - → lake-creds", CmdUpdateCatalog, func(now int64) thrift.TStruct {
			return &journal.TCatalogCommand{NowMs: now, Audit: a, Catalog: &journal.TCatalogRecord{Name: "sea", CredentialsRef: thrift.StringPtr("lake-creds")}}
		}},
		{AuditCatalogRemove, "sea", "removed (id 2, root_uri s3://bucket/sea)", CmdRemoveCatalog, func(now int64) thrift.TStruct {
			return &journal.TRemoveCatalogCommand{NowMs: now, Audit: a, Name: "sea"}
		}},
		{AuditBackendAdd, "3 (be3:9060)", "registered", CmdAddBackend, func(now int64) thrift.TStruct {
			return &journal.TBackendCommand{NowMs: now, Audit: a, Address: "be3:9060"}
		}},
		{AuditBackendDrain, "3 (be3:9060)", "drained: false → true", CmdDrainBackend, func(now int64) thrift.TStruct {
			return &journal.TDrainBackendCommand{NowMs: now, Audit: a, BackendID: 3, Drained: true}
		}},
		{AuditBackendUndrain, "3 (be3:9060)", "drained: true → false", CmdDrainBackend, func(now int64) thrift.TStruct {
			return &journal.TDrainBackendCommand{NowMs: now, Audit: a, BackendID: 3, Drained: false}
		}},
		{AuditBackendRemove, "3 (be3:9060)", "removed", CmdRemoveBackend, func(now int64) thrift.TStruct {
			return &journal.TRemoveBackendCommand{NowMs: now, Audit: a, BackendID: 3}
		}},
		{AuditOptionSet, options.OptMaxDispatchPerRound, "value: default → 4", CmdSetOption, func(now int64) thrift.TStruct {
			return &journal.TSetOptionCommand{NowMs: now, Audit: a, Key: options.OptMaxDispatchPerRound, Value: "4"}
		}},
		{AuditOptionSet, options.OptMaxDispatchPerRound, "value: 4 → 8", CmdSetOption, func(now int64) thrift.TStruct {
			return &journal.TSetOptionCommand{NowMs: now, Audit: a, Key: options.OptMaxDispatchPerRound, Value: "8"}
		}},
		{AuditJobCancel, JobSubject(jobID), "mutation_state: PENDING → CANCELLED", CmdCancel, func(now int64) thrift.TStruct {
			return &journal.TCancelCommand{NowMs: now, Audit: a, JobID: jobID, Actor: "alice (as bob)"}
		}},
		{AuditJobForce, JobSubject(unknown), "force_released: false → true", CmdForceRelease, func(now int64) thrift.TStruct {
			return &journal.TForceReleaseCommand{NowMs: now, Audit: a, JobID: unknown, Actor: "alice (as bob)", Note: "checked", Warning: "w"}
		}},
		{AuditRaftAddVoter, "m4", "suffrage: - → voter", CmdAudit, func(now int64) thrift.TStruct {
			return &journal.TAuditCommand{NowMs: now, Actor: a, Kind: AuditRaftAddVoter, Subject: "m4", Summary: thrift.StringPtr("suffrage: - → voter")}
		}},
	}
	for i, st := range steps {
		h.now = int64(10_000 + i)
		wantCode(t, h.apply(st.ct, st.cmd(h.now)), journal.TApplyCode_OK)
		e := h.lastEvent()
		if e.Seq != int64(i+1) || e.Index != h.index || e.TimeMs != h.now || e.Kind != st.kind || e.Subject != st.subject ||
			e.Actor != (Actor{Name: "alice", Claimed: "bob", Verified: true}) || !strings.Contains(e.Summary, st.summary) {
			t.Fatalf("step %d (%s): event %+v, want subject %q summary %q at index %d time %d", i, st.kind, e, st.subject, st.summary, h.index, h.now)
		}
	}
	if h.st().AuditEventCount() != len(steps) {
		t.Fatalf("%d events, want %d", h.st().AuditEventCount(), len(steps))
	}
	c, ok := h.st().OptionChange(options.OptMaxDispatchPerRound)
	if !ok || c.Actor.Name != "alice" || c.TimeMs != 10_008 {
		t.Fatalf("option's last change = %+v %v", c, ok)
	}
}

// A refused command, or one that changes nothing, records nothing.
func TestAuditNothingForRefusalsAndNoops(t *testing.T) {
	h, id, be := pendingFixture(t)
	h.run(id, be)
	a := alice()
	h.setOption(options.OptMaxDispatchPerRound, "16")
	before := h.st()
	wantCode(t, h.apply(CmdCancel, &journal.TCancelCommand{NowMs: 1, JobID: id, Actor: "x", Audit: a}), journal.TApplyCode_CAS_FAILED)
	wantCode(t, h.apply(CmdAddBackend, &journal.TBackendCommand{NowMs: 1, Address: "be1:9060", Audit: a}), journal.TApplyCode_ALREADY_EXISTS)
	wantCode(t, h.apply(CmdDrainBackend, &journal.TDrainBackendCommand{NowMs: 1, BackendID: be, Drained: false, Audit: a}), journal.TApplyCode_NOOP)
	wantCode(t, h.apply(CmdUpdateCatalog, &journal.TCatalogCommand{NowMs: 1, Audit: a, Catalog: &journal.TCatalogRecord{Name: "lake"}}), journal.TApplyCode_OK)
	wantCode(t, h.apply(CmdSetOption, &journal.TSetOptionCommand{NowMs: 1, Key: options.OptMaxDispatchPerRound, Value: "16", Audit: a}), journal.TApplyCode_OK)
	// A bad actor is refused as INVALID, and nothing changes.
	bad := &journal.TAuditActor{Actor: "a\x00b"}
	wantCode(t, h.apply(CmdAddBackend, &journal.TBackendCommand{NowMs: 1, Address: "be9:9060", Audit: bad}), journal.TApplyCode_INVALID)
	wantCode(t, h.apply(CmdAudit, &journal.TAuditCommand{NowMs: 1, Kind: "Raft!", Subject: "m1", Actor: a}), journal.TApplyCode_INVALID)
	wantCode(t, h.apply(CmdAudit, &journal.TAuditCommand{NowMs: 1, Kind: AuditRaftPromote, Subject: "m1", Actor: a,
		Summary: thrift.StringPtr(strings.Repeat("x", maxAuditSummaryBytes+1))}), journal.TApplyCode_INVALID)
	if n := h.st().AuditEventCount(); n != 0 {
		t.Fatalf("%d events recorded for refusals and no-ops", n)
	}
	h.unchanged(before)
}

// The table keeps audit_retention_count events: the entry that records one
// more removes the oldest, and two replicas of one log agree byte for byte.
func TestAuditRetentionIsBounded(t *testing.T) {
	h := newHarness(t)
	a := alice()
	wantCode(t, h.apply(CmdSetOption, &journal.TSetOptionCommand{NowMs: 1, Key: options.OptAuditRetentionCount, Value: "3", Audit: a}), journal.TApplyCode_OK)
	for i := 0; i < 5; i++ {
		wantCode(t, h.apply(CmdAddBackend, &journal.TBackendCommand{NowMs: int64(2 + i), Address: "be" + itoa(int64(i)) + ":1", Audit: a}), journal.TApplyCode_OK)
	}
	evs, more := h.st().AuditEvents(AuditFilter{}, 0, 0)
	if len(evs) != 3 || more || evs[0].Seq != 6 || evs[2].Seq != 4 {
		t.Fatalf("kept %v, want seqs 6, 5, 4", seqs(evs))
	}
	// Raising it keeps everything from then on; lowering it trims at the
	// next event.
	wantCode(t, h.apply(CmdSetOption, &journal.TSetOptionCommand{NowMs: 9, Key: options.OptAuditRetentionCount, Value: "1", Audit: a}), journal.TApplyCode_OK)
	if evs, _ := h.st().AuditEvents(AuditFilter{}, 0, 0); len(evs) != 1 || evs[0].Kind != AuditOptionSet {
		t.Fatalf("after lowering the retention: %v", seqs(evs))
	}
	other := newHarness(t)
	for _, e := range h.log {
		other.applyRaw(e)
	}
	if !bytes.Equal(snapshotBytes(t, h.st()), snapshotBytes(t, other.st())) {
		t.Fatalf("two replicas of one log trimmed differently")
	}
}

func seqs(evs []*AuditEvent) []int64 {
	out := make([]int64, len(evs))
	for i, e := range evs {
		out[i] = e.Seq
	}
	return out
}

// Events and each option's last change survive a snapshot; a restored FSM
// writes the same bytes and allocates the next seq above the restored ones.
func TestAuditSnapshotRoundTrip(t *testing.T) {
	h := newHarness(t)
	a := alice()
	wantCode(t, h.apply(CmdSetOption, &journal.TSetOptionCommand{NowMs: 5, Key: options.OptMaxDispatchPerRound, Value: "4", Audit: a}), journal.TApplyCode_OK)
	wantCode(t, h.apply(CmdAudit, &journal.TAuditCommand{NowMs: 6, Kind: AuditRaftRemovePeer, Subject: "m3", Actor: a}), journal.TApplyCode_OK)
	data := snapshotBytes(t, h.st())
	f := restored(t, data)
	if !bytes.Equal(data, snapshotBytes(t, f.State())) {
		t.Fatalf("a restored FSM writes a different snapshot")
	}
	got, _ := f.State().AuditEvents(AuditFilter{}, 0, 0)
	want, _ := h.st().AuditEvents(AuditFilter{}, 0, 0)
	if len(got) != 2 || *got[0] != *want[0] || *got[1] != *want[1] {
		t.Fatalf("restored events %+v, want %+v", got, want)
	}
	if c, ok := f.State().OptionChange(options.OptMaxDispatchPerRound); !ok || c.Actor.Name != "alice" || c.TimeMs != 5 {
		t.Fatalf("restored option change = %+v %v", c, ok)
	}
	h2 := &harness{t: t, f: f, index: 100}
	h2.f.OnFatal = func(err error) { t.Fatalf("fatal: %v", err) }
	wantCode(t, h2.apply(CmdAudit, &journal.TAuditCommand{NowMs: 7, Kind: AuditSnapshotRestore, Subject: "snapshot", Actor: a}), journal.TApplyCode_OK)
	if e := h2.lastEvent(); e.Seq != 3 || e.Index != 101 {
		t.Fatalf("after restore: %+v", e)
	}
	// A snapshot written before the audit trail existed has none and restores.
	var old bytes.Buffer
	writeSnapshotFrom(t, &old, emptyMeta(), nil, nil, nil)
	g := New(nil)
	if err := g.Restore(io.NopCloser(&old)); err != nil || g.State().AuditEventCount() != 0 {
		t.Fatalf("old snapshot: %v, %d events", err, g.State().AuditEventCount())
	}
}

// Filters and the newest-first cursor of AuditEvents.
func TestAuditEventsFiltersAndCursor(t *testing.T) {
	h := newHarness(t)
	mk := func(now int64, kind, subject, actor string) {
		wantCode(t, h.apply(CmdAudit, &journal.TAuditCommand{NowMs: now, Kind: kind, Subject: subject,
			Actor: &journal.TAuditActor{Actor: actor, Claimed: thrift.StringPtr("c-" + actor)}}), journal.TApplyCode_OK)
	}
	mk(10, AuditRaftAddVoter, "m4", "alice")
	mk(20, AuditRaftPromote, "m4", "bob")
	mk(30, AuditRaftRemovePeer, "M5", "alice")
	mk(40, AuditSnapshotRestore, "snapshot", "carol")
	s := h.st()
	for _, c := range []struct {
		f    AuditFilter
		want []int64
	}{
		{AuditFilter{}, []int64{4, 3, 2, 1}},
		{AuditFilter{Kind: "raft."}, []int64{3, 2, 1}},
		{AuditFilter{Kind: AuditRaftPromote}, []int64{2}},
		{AuditFilter{Kind: "raft"}, nil},
		{AuditFilter{Subject: "m5"}, []int64{3}},
		{AuditFilter{Actor: "ALICE"}, []int64{3, 1}},
		{AuditFilter{Actor: "c-bob"}, []int64{2}},
		{AuditFilter{SinceMs: 20}, []int64{4, 3, 2}},
	} {
		evs, _ := s.AuditEvents(c.f, 0, 0)
		if got := seqs(evs); !slices.Equal(got, c.want) {
			t.Errorf("%+v: %v, want %v", c.f, got, c.want)
		}
	}
	page, more := s.AuditEvents(AuditFilter{}, 0, 2)
	next, more2 := s.AuditEvents(AuditFilter{}, page[1].Seq, 2)
	if !more || more2 || !slices.Equal(seqs(page), []int64{4, 3}) || !slices.Equal(seqs(next), []int64{2, 1}) {
		t.Fatalf("pages %v (%v) %v (%v)", seqs(page), more, seqs(next), more2)
	}
}

// Entries written by an older leader carry no actor: they apply exactly as
// before, and no replica records an event or an option's last change.
func TestAuditOldEntriesWithoutAnActorStillApply(t *testing.T) {
	h, id, be := unknownFixture(t)
	pending := h.admit(h.st().Catalogs()[0].ID, "db", "t3", "idx3")
	h.setOption(options.OptMaxDispatchPerRound, "4")
	wantCode(t, h.apply(CmdUpdateCatalog, &journal.TCatalogCommand{NowMs: h.now,
		Catalog: &journal.TCatalogRecord{Name: "lake", CredentialsRef: thrift.StringPtr("c2")}}), journal.TApplyCode_OK)
	wantCode(t, h.apply(CmdDrainBackend, &journal.TDrainBackendCommand{NowMs: h.now, BackendID: be + 1, Drained: true}), journal.TApplyCode_OK)
	wantCode(t, h.apply(CmdRemoveBackend, &journal.TRemoveBackendCommand{NowMs: h.now, BackendID: be + 1}), journal.TApplyCode_OK)
	wantCode(t, h.cancel(pending), journal.TApplyCode_OK)
	wantCode(t, h.forceRelease(id, "checked"), journal.TApplyCode_OK)
	st := h.st()
	if v, _ := st.OptionValue(options.OptMaxDispatchPerRound); v != "4" || st.Catalogs()[0].CredentialsRef != "c2" ||
		len(st.Backends()) != 1 || !h.job(id).ForceReleased || h.job(pending).MutationState != job.Cancelled {
		t.Fatalf("an entry without an actor did not apply")
	}
	if _, ok := st.OptionChange(options.OptMaxDispatchPerRound); ok || st.AuditEventCount() != 0 {
		t.Fatalf("entries without an actor recorded %d events", st.AuditEventCount())
	}
}

// Newest first across many windows of the walk, with a filter and pages,
// after the oldest were trimmed.
func TestAuditEventsWalkAcrossWindows(t *testing.T) {
	h := newHarness(t)
	a := alice()
	wantCode(t, h.apply(CmdSetOption, &journal.TSetOptionCommand{NowMs: 1, Key: options.OptAuditRetentionCount, Value: "600", Audit: a}), journal.TApplyCode_OK)
	for i := range 700 {
		kind := AuditRaftPromote
		if i%3 == 0 {
			kind = AuditRaftAddVoter
		}
		wantCode(t, h.apply(CmdAudit, &journal.TAuditCommand{NowMs: int64(i), Kind: kind, Subject: "m" + itoa(int64(i)), Actor: a}), journal.TApplyCode_OK)
	}
	all, _ := h.st().AuditEvents(AuditFilter{}, 0, 0)
	if len(all) != 600 || all[0].Seq != 701 || all[599].Seq != 102 {
		t.Fatalf("%d events, seqs %d..%d", len(all), all[0].Seq, all[len(all)-1].Seq)
	}
	var want []int64
	for _, e := range all {
		if e.Kind == AuditRaftAddVoter {
			want = append(want, e.Seq)
		}
	}
	var got []int64
	for before, pages := int64(0), 0; pages < 20; pages++ {
		page, more := h.st().AuditEvents(AuditFilter{Kind: AuditRaftAddVoter}, before, 70)
		got = append(got, seqs(page)...)
		if !more {
			break
		}
		before = page[len(page)-1].Seq
	}
	if !slices.Equal(got, want) {
		t.Fatalf("paged %d events, want %d", len(got), len(want))
	}
}
