package raftfsm

import (
	"bytes"
	"io"
	"reflect"
	"slices"
	"testing"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
)

// reread is s written as a snapshot and read back: the state a restore
// reads off a file.
func reread(t testing.TB, s *State) *State {
	t.Helper()
	var b bytes.Buffer
	if err := s.WriteSnapshot(&b); err != nil {
		t.Fatal(err)
	}
	f := New(nil)
	if err := f.Restore(io.NopCloser(&b)); err != nil {
		t.Fatal(err)
	}
	return f.State()
}

// restoreWorld is a journal saved to a file while jobs were in every
// state, then moved on: file is the saved state, the harness goes on.
type restoreWorld struct {
	h                    *harness
	file                 *State
	pending              int64 // PENDING at the save, and still
	dispatchedAfter      int64 // PENDING at the save, then RUNNING
	committedAfter       int64 // PENDING at the save, then COMMITTED
	runningThenCommitted int64 // RUNNING at the save, then COMMITTED
	committed            int64 // COMMITTED at the save, and still
	admittedAfter        int64 // admitted after the save: not in the file
}

func newRestoreWorld(t *testing.T) *restoreWorld {
	h := newHarness(t)
	wantCode(t, h.apply(CmdSetClusterID, &journal.TClusterIDCommand{NowMs: h.now, ClusterID: "c-1"}), journal.TApplyCode_OK)
	cat := h.createCatalog("c", testRoot)
	be := h.addBackend("127.0.0.1:9001")
	w := &restoreWorld{h: h}
	w.pending = h.admit(cat, "d", "t1", "i")
	w.dispatchedAfter = h.admit(cat, "d", "t2", "i")
	w.committedAfter = h.admit(cat, "d", "t3", "i")
	w.runningThenCommitted = h.admit(cat, "d", "t4", "i")
	w.committed = h.admit(cat, "d", "t5", "i")
	h.run(w.runningThenCommitted, be)
	wantItem(t, h.complete(completion(h.run(w.committed, be), job.NativeOK, true)), journal.TApplyCode_OK)
	w.file = reread(t, h.st())

	h.now += 1000
	h.run(w.dispatchedAfter, be)
	wantItem(t, h.complete(completion(h.run(w.committedAfter, be), job.NativeOK, true)), journal.TApplyCode_OK)
	wantItem(t, h.complete(completion(h.job(w.runningThenCommitted), job.NativeOK, true)), journal.TApplyCode_OK)
	w.admittedAfter = h.admit(cat, "d", "t6", "i")
	return w
}

// prepare runs PrepareRestore and checks what every restore must keep:
// books equal to a recomputation, and the same state once written and read
// back (what raft installs on every replica).
func prepare(t *testing.T, file, current *State) (*State, RestoreEvidence) {
	t.Helper()
	got, ev, err := PrepareRestore(file, current, 2_000_000)
	if err != nil {
		t.Fatal(err)
	}
	if !equalBooks(got) {
		t.Fatal("books differ from a recomputation")
	}
	if c, want := got.JobCounts(), bruteCounts(got); !reflect.DeepEqual(c, want) {
		t.Fatalf("counts %+v, records say %+v", c, want)
	}
	if back := reread(t, got); !bytes.Equal(snapshotBytes(t, back), snapshotBytes(t, got)) || !equalBooksTo(back.Books(), got.Books()) {
		t.Fatal("the prepared state does not read back as itself")
	}
	again, _, err := PrepareRestore(file, current, 2_000_000)
	if err != nil || !bytes.Equal(snapshotBytes(t, again), snapshotBytes(t, got)) {
		t.Fatalf("not deterministic (%v)", err)
	}
	return got, ev
}

func pendingIDs(s *State) []int64 {
	var ids []int64
	for _, r := range s.PendingInIDOrder(0) {
		ids = append(ids, r.JobID)
	}
	return ids
}

// A restore into the history the file was saved from keeps what happened to
// the file's jobs since: nothing is held, and no job the journal saw
// dispatched is PENDING again.
func TestRestoreCarriesForwardWhatTheJournalKnows(t *testing.T) {
	w := newRestoreWorld(t)
	cur := w.h.st()
	got, ev := prepare(t, w.file, cur)
	if want := []int64{w.dispatchedAfter, w.committedAfter, w.runningThenCommitted}; !slices.Equal(ev.CarriedForward, want) || len(ev.Held) != 0 {
		t.Fatalf("evidence %+v, want carried %v and none held", ev, want)
	}
	for _, id := range ev.CarriedForward {
		g, _ := got.Job(id)
		c, _ := cur.Job(id)
		if *g != *c {
			t.Fatalf("job %d: carried %+v, journal has %+v", id, g, c)
		}
	}
	if p, _ := got.Job(w.pending); *p != *must(w.file.Job(w.pending)) {
		t.Fatal("a job untouched since the save changed")
	}
	if _, ok := got.Job(w.admittedAfter); ok {
		t.Fatal("a job admitted after the save is in the restored state")
	}
	if ids := pendingIDs(got); !slices.Equal(ids, []int64{w.pending}) {
		t.Fatalf("dispatchable %v, want only %d", ids, w.pending)
	}
	if got.ClusterID() != w.file.ClusterID() || got.AppliedIndex() != w.file.AppliedIndex() {
		t.Fatal("meta changed")
	}
}

func must[T any](v T, ok bool) T {
	if !ok {
		panic("missing")
	}
	return v
}

// A file nothing vouches for (another cluster's, or no journal at all):
// every job that could be dispatched is held, with its timeline saying so;
// M1 refuses it through Apply, the dispatcher never sees it, and an
// operator can still cancel a held PENDING job.
func TestRestoreHoldsWhatNothingVouchesFor(t *testing.T) {
	w := newRestoreWorld(t)
	other := newHarness(t)
	wantCode(t, other.apply(CmdSetClusterID, &journal.TClusterIDCommand{NowMs: other.now, ClusterID: "c-2"}), journal.TApplyCode_OK)
	for name, current := range map[string]*State{"another cluster": other.st(), "no journal": nil} {
		got, ev := prepare(t, w.file, current)
		want := []int64{w.pending, w.dispatchedAfter, w.committedAfter, w.runningThenCommitted}
		if !slices.Equal(ev.Held, want) || len(ev.CarriedForward) != 0 {
			t.Fatalf("%s: evidence %+v, want held %v", name, ev, want)
		}
		for _, id := range want {
			r, f := must(got.Job(id)), must(w.file.Job(id))
			tl := job.TimelineOf(r)
			if !r.RestoreHold || r.Rev != f.Rev+1 || r.MutationState != f.MutationState || tl[len(tl)-1].Kind != job.TransitionHeld {
				t.Fatalf("%s: job %d %+v", name, id, r)
			}
		}
		if c := must(got.Job(w.committed)); *c != *must(w.file.Job(w.committed)) {
			t.Fatalf("%s: a terminal job changed", name)
		}
		if ids := pendingIDs(got); len(ids) != 0 {
			t.Fatalf("%s: dispatchable %v", name, ids)
		}
		if n := got.JobCounts().HeldPending; n != 3 {
			t.Fatalf("%s: %d held PENDING jobs counted, want 3", name, n)
		}
	}

	// Installed as raft would: M1 refuses a held job and changes nothing.
	got, _, _ := PrepareRestore(w.file, nil, 2_000_000)
	h := newHarness(t)
	var b bytes.Buffer
	if err := got.WriteSnapshot(&b); err != nil {
		t.Fatal(err)
	}
	if err := h.f.Restore(io.NopCloser(&b)); err != nil {
		t.Fatal(err)
	}
	h.index = got.AppliedIndex()
	before := h.st()
	wantItem(t, h.markRunning(markCmd(h.job(w.pending), 1)), journal.TApplyCode_CAS_FAILED)
	h.unchanged(before)
	// The dispatcher's walk passes the held jobs without counting them.
	fresh := h.admit(must(got.Job(w.pending)).CatalogID, "d", "t9", "i")
	if ps := h.st().PendingInIDOrder(1); len(ps) != 1 || ps[0].JobID != fresh {
		t.Fatalf("PendingInIDOrder(1) = %v, want the fresh job %d", ps, fresh)
	}
	wantCode(t, h.cancel(w.pending), journal.TApplyCode_OK)
	if r := h.job(w.pending); r.MutationState != job.Cancelled || r.Unresolved() {
		t.Fatalf("cancelled held job %+v", r)
	}
	if n := h.st().JobCounts().HeldPending; n != 2 {
		t.Fatalf("%d held PENDING jobs counted after a cancel, want 2", n)
	}
}

// The journal vouches for an admission, not a job id: a restore gives the
// ids of the jobs it dropped to new jobs, and a later restore of a file
// that has the old job under that id finds another admission there.
func TestRestoreHoldsAnotherAdmissionUnderTheSameID(t *testing.T) {
	w := newRestoreWorld(t)
	cur := w.h.st()
	// The current journal's job under dispatchedAfter's id is another
	// admission (admitted at another index, as after an earlier restore).
	w.h.restoreWith(t, func(rs []*job.Record) []*job.Record {
		for i, r := range rs {
			if r.JobID == w.dispatchedAfter {
				c := r.Clone()
				c.AdmitIndex += 1000
				rs[i] = c
			}
		}
		return rs
	})
	_, ev := prepare(t, w.file, w.h.st())
	if !slices.Equal(ev.Held, []int64{w.dispatchedAfter}) {
		t.Fatalf("evidence %+v, want %d held", ev, w.dispatchedAfter)
	}
	// A journal that knows a job only at an older revision than the file
	// (it cannot say what came after), or not at all: held too.
	_, ev = prepare(t, reread(t, cur), w.file)
	if want := []int64{w.dispatchedAfter, w.admittedAfter}; !slices.Equal(ev.Held, want) {
		t.Fatalf("journal behind the file: evidence %+v, want held %v", ev, want)
	}
}

// Restoring the same file twice is harmless: the second restore finds the
// first one's holds and carried records in the journal and keeps them.
func TestRestoreTwiceKeepsTheHolds(t *testing.T) {
	w := newRestoreWorld(t)
	first, _ := prepare(t, w.file, nil)
	second, ev := prepare(t, w.file, first)
	if len(ev.Held) != 0 {
		t.Fatalf("second restore held %v again", ev.Held)
	}
	if !bytes.Equal(snapshotBytes(t, first), snapshotBytes(t, second)) {
		t.Fatal("the second restore changed the first one's state")
	}
}
