package raftfsm

import (
	"reflect"
	"strings"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/raftfsm/jobcodec"
)

// step is one expected transition: its kind, actor and detail; its time and
// index are those of the entry just applied.
type step struct {
	kind          job.TransitionKind
	actor, detail string
}

// timelineRig checks a job's timeline after each entry: what the entry
// appended, stamped with the entry's clock and index, in order.
type timelineRig struct {
	t    *testing.T
	h    *harness
	id   int64
	want []job.Transition
}

func (r *timelineRig) expect(steps ...step) {
	r.t.Helper()
	for _, s := range steps {
		r.want = append(r.want, job.Transition{Kind: s.kind, TimeMs: r.h.now, Index: r.h.index, Actor: s.actor, Detail: s.detail})
	}
	got := job.TimelineOf(r.h.job(r.id))
	if !reflect.DeepEqual(got, r.want) {
		r.t.Fatalf("timeline\n got %+v\nwant %+v", got, r.want)
	}
}

func newTimelineRig(t *testing.T) (*timelineRig, int64) {
	h, id, be := pendingFixture(t)
	r := &timelineRig{t: t, h: h, id: id}
	r.want = []job.Transition{{Kind: job.TransitionAdmitted, TimeMs: h.now, Index: h.index, Actor: "alice"}}
	if rec := h.job(id); rec.Timeline != "" || rec.AdmitIndex != h.index {
		t.Fatalf("an admitted job carries a timeline %q or not its admission index (%d, want %d)", rec.Timeline, rec.AdmitIndex, h.index)
	}
	r.expect()
	return r, be
}

// Every transition kind, through Apply: a dispatch refused and returned,
// a second dispatch whose worker announces its index and phases, is proven
// gone without a result (RESOLVING), resolves COMMITTED, then the refresh
// R1 (running), R3 (failed), R1 again and R2 (done).
func TestTimelineThroughADispatch(t *testing.T) {
	r, be := newTimelineRig(t)
	h := r.h
	bes := "backend " + itoa(be)
	h.now += 10
	first := h.run(r.id, be)
	r.expect(step{job.TransitionDispatched, "", bes + ", attempt 1"})
	h.now += 10
	wantItem(t, h.complete(returnCmd(first, "no slot")), journal.TApplyCode_OK)
	r.expect(step{job.TransitionSlotReleased, "", "NOT_ENQUEUED"}, step{job.TransitionReturnedToPending, "", "attempts 1"})
	h.now += 10
	second := h.run(r.id, be)
	r.expect(step{job.TransitionDispatched, "", bes + ", attempt 2"})
	h.now += 10
	progress := func(uuid, phase string) {
		t.Helper()
		cur := h.job(r.id)
		p := &journal.TProgress{JobID: r.id, DispatchRevision: cur.DispatchRevision, InvocationID: cur.InvocationID,
			ProcessEpoch: cur.ProcessEpoch, Phase: thrift.StringPtr(phase)}
		if uuid != "" {
			p.IndexUUID = &uuid
		}
		wantItem(t, h.report(&journal.TReportItem{Progress: p}), journal.TApplyCode_OK)
	}
	progress("uuid-1", "loading")
	r.expect(step{job.TransitionAccepted, "", "uuid-1"}, step{job.TransitionPhase, "", "loading"})
	h.now += 10
	progress("", "ivf_training")
	r.expect(step{job.TransitionPhase, "", "ivf_training"})
	h.now += 10
	p := proofCmd(second, job.ProofChildReaped)
	p.FinishedWithoutResult_ = thrift.BoolPtr(true)
	wantItem(t, h.proof(p), journal.TApplyCode_OK)
	r.expect(step{job.TransitionSlotReleased, "", "CHILD_REAPED"}, step{job.TransitionResolving, "", ""})
	h.now += 10
	c := completion(h.job(r.id), job.NativeOK, true)
	c.Result_.Reason = ptr(journal.TCompletionReason(job.ReasonResolvedFromDataset))
	wantItem(t, h.complete(c), journal.TApplyCode_OK)
	r.expect(step{job.TransitionReported, "", "NATIVE_OK"}, step{job.TransitionResolved, "", "COMMITTED"},
		step{job.TransitionRefreshRequired, "", ""})
	for _, s := range []struct {
		to   job.RefreshState
		kind job.TransitionKind
	}{{job.RefreshRunning, job.TransitionRefreshRunning}, {job.RefreshFailed, job.TransitionRefreshFailed},
		{job.RefreshRunning, job.TransitionRefreshRunning}, {job.RefreshRequired, job.TransitionRefreshRequired},
		{job.RefreshRunning, job.TransitionRefreshRunning}} {
		h.now += 10
		wantItem(t, h.refresh(r.id, h.job(r.id).Rev, s.to), journal.TApplyCode_OK)
		r.expect(step{s.kind, "", ""})
	}
	h.now += 10
	wantItem(t, h.refresh(r.id, h.job(r.id).Rev, job.RefreshDone), journal.TApplyCode_OK)
	r.expect(step{job.TransitionRefreshDone, "", ""}, step{job.TransitionDone, "", ""})
	if strings.Contains(h.job(r.id).Timeline, testSecret) {
		t.Fatal("the timeline carries the invocation secret")
	}
}

// The operator's acts carry the actor: a cancel, and a force-release of an
// UNKNOWN job (with the note).
func TestTimelineOperatorActs(t *testing.T) {
	r, _ := newTimelineRig(t)
	r.h.now += 10
	wantCode(t, r.h.cancel(r.id), journal.TApplyCode_OK)
	r.expect(step{job.TransitionCancelled, "ops", ""}, step{job.TransitionDone, "", ""})

	h, id, be := pendingFixture(t)
	h.now += 10
	wantItem(t, h.complete(completion(h.run(id, be), job.NoTrustedResult, false)), journal.TApplyCode_OK)
	h.now += 10
	wantCode(t, h.forceRelease(id, "checked by hand"), journal.TApplyCode_OK)
	got := job.TimelineOf(h.job(id))
	var kinds []string
	for _, e := range got {
		kinds = append(kinds, e.Kind.String())
	}
	if strings.Join(kinds, " ") != "ADMITTED DISPATCHED REPORTED UNKNOWN FORCE_RELEASED DONE" {
		t.Fatalf("kinds %v", kinds)
	}
	if fr := got[4]; fr.Actor != "ops" || fr.Detail != "checked by hand" || fr.TimeMs != h.now || fr.Index != h.index {
		t.Fatalf("force-release %+v", fr)
	}
}

// The bound: at most MaxTimeline stored; the oldest PHASE goes first, the
// dispatch stays; ADMITTED is never dropped (it is not stored).
func TestTimelineBound(t *testing.T) {
	r, be := newTimelineRig(t)
	h := r.h
	h.run(r.id, be)
	for i := 0; i < 2*job.MaxTimeline; i++ {
		cur := h.job(r.id)
		h.now++
		wantItem(t, h.report(&journal.TReportItem{Progress: &journal.TProgress{JobID: r.id, DispatchRevision: cur.DispatchRevision,
			InvocationID: cur.InvocationID, ProcessEpoch: cur.ProcessEpoch, Phase: thrift.StringPtr("phase-" + itoa(int64(i)))}}),
			journal.TApplyCode_OK)
	}
	got := job.TimelineOf(h.job(r.id))
	if len(got) != job.MaxTimeline+1 || got[0].Kind != job.TransitionAdmitted || got[1].Kind != job.TransitionDispatched {
		t.Fatalf("%d transitions, first %v %v", len(got), got[0].Kind, got[1].Kind)
	}
	if last := got[len(got)-1]; last.Detail != "phase-"+itoa(2*job.MaxTimeline-1) || got[2].Detail != "phase-"+itoa(job.MaxTimeline+1) {
		t.Fatalf("kept %q .. %q", got[2].Detail, last.Detail)
	}
	// Without PHASE entries the oldest goes, whatever it is.
	var tl []job.Transition
	for i := 0; i < job.MaxTimeline+3; i++ {
		tl = job.DecodeTimeline(job.AppendTimeline(job.EncodeTimeline(tl), job.Transition{Kind: job.TransitionRefreshRunning, Index: uint64(i)}))
	}
	if len(tl) != job.MaxTimeline || tl[0].Index != 3 {
		t.Fatalf("no-phase bound: %d, first index %d", len(tl), tl[0].Index)
	}
}

// Snapshots keep the timeline and the admission index: through the
// generated reader and the direct decoder alike.
func TestTimelineSnapshotRoundTrip(t *testing.T) {
	r, be := newTimelineRig(t)
	h := r.h
	h.now += 10
	wantItem(t, h.complete(completion(h.run(r.id, be), job.NativeOK, false)), journal.TApplyCode_OK)
	want := *h.job(r.id)
	if want.Timeline == "" {
		t.Fatal("no timeline to round-trip")
	}
	if got, _ := restored(t, snapshotBytes(t, h.st())).State().Job(r.id); *got != want {
		t.Fatalf("restored\n got %+v\nwant %+v", got, &want)
	}
	if got := jobcodec.RecordFromThrift(RecordToThrift(&want)); *got != want {
		t.Fatalf("thrift round trip\n got %+v\nwant %+v", got, &want)
	}
}

// A record journaled before timelines (no admit_index, no timeline)
// decodes, and shows what its fields say happened, index 0.
func TestTimelineOfAnOldRecord(t *testing.T) {
	h, id := committedFixture(t)
	old := h.job(id).Clone()
	old.AdmitIndex, old.Timeline = 0, ""
	old.RefreshState = job.RefreshDone
	tj := RecordToThrift(old)
	if tj.IsSetTimeline() || tj.IsSetAdmitIndex() {
		t.Fatal("an old record must encode without the new fields")
	}
	got := job.TimelineOf(jobcodec.RecordFromThrift(tj))
	var kinds []string
	for _, e := range got {
		if e.Index != 0 {
			t.Fatalf("a derived transition claims index %d", e.Index)
		}
		kinds = append(kinds, e.Kind.String())
	}
	if strings.Join(kinds, " ") != "ADMITTED DISPATCHED REPORTED RESOLVED REFRESH_DONE DONE" {
		t.Fatalf("derived %v", kinds)
	}
}

// pkg/job's kinds are the journal's enum, value for value.
func TestTransitionKindsAreTheJournals(t *testing.T) {
	for _, k := range job.TransitionKinds() {
		if journal.TJobTransitionKind(k).String() != k.String() {
			t.Errorf("kind %d: job %s, journal %s", k, k, journal.TJobTransitionKind(k))
		}
	}
	if n := len(job.TransitionKinds()); n != 18 {
		t.Errorf("%d kinds", n)
	}
}
