package outbox

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/clocktest"
)

func newClock() *clocktest.Clock                                           { return clocktest.New(clocktest.Epoch) }
func strp(s string) *string                                                { return &s }
func codep(c wire.TLanceIndexJobResultCode) *wire.TLanceIndexJobResultCode { return &c }

func report(id string, jobID int64) *wire.TLanceIndexJobReport {
	proof := wire.TLanceIndexTerminationProof_CHILD_REAPED
	return &wire.TLanceIndexJobReport{
		JobID: jobID, DispatchRevision: 3, InvocationID: id, BeProcessEpoch: 42,
		ResultCode: codep(wire.TLanceIndexJobResultCode_NATIVE_OK), SanitizedMessage: strp("built"),
		TerminationProof: &proof, InvocationSecret: strp("secret-" + id),
	}
}

func open(t *testing.T, path string, clk *clocktest.Clock, opts ...Option) *Outbox {
	t.Helper()
	o, err := Open(path, append([]Option{WithClock(clk.Now)}, opts...)...)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { o.Close() })
	return o
}

func pending(t *testing.T, o *Outbox) ([]Entry, []string) {
	t.Helper()
	p, exp, err := o.Pending()
	if err != nil {
		t.Fatalf("Pending: %v", err)
	}
	return p, exp
}

func TestPutRestartPending(t *testing.T) {
	path := filepath.Join(t.TempDir(), "outbox.db")
	clk := newClock()
	o := open(t, path, clk)
	dl := clk.Now().Add(time.Hour)
	if err := o.Put(Entry{ID: "inv-1", Report: report("inv-1", 1), Deadline: dl}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	if err := o.Put(Entry{ID: "inv-2", Report: report("inv-2", 2), Deadline: dl}); err != nil {
		t.Fatal(err)
	}
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	if err := o.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, _, err := o.Pending(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Pending after Close: %v, want ErrClosed", err)
	}

	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != FileMode {
		t.Fatalf("mode %v, want %v", st.Mode().Perm(), FileMode)
	}

	o2 := open(t, path, clk)
	got, exp := pending(t, o2)
	if len(exp) != 0 || len(got) != 2 || got[0].ID != "inv-1" || got[1].ID != "inv-2" {
		t.Fatalf("after restart: pending %+v expired %v", got, exp)
	}
	r := got[0].Report
	if r.JobID != 1 || r.GetResultCode() != wire.TLanceIndexJobResultCode_NATIVE_OK || r.GetInvocationSecret() != "secret-inv-1" ||
		r.GetTerminationProof() != wire.TLanceIndexTerminationProof_CHILD_REAPED || r.BeProcessEpoch != 42 || r.DispatchRevision != 3 {
		t.Fatalf("report did not round-trip: %+v", r)
	}
	if !got[0].Deadline.Equal(dl) {
		t.Fatalf("deadline %v, want %v", got[0].Deadline, dl)
	}
}

func TestAck(t *testing.T) {
	clk := newClock()
	o := open(t, filepath.Join(t.TempDir(), "outbox.db"), clk)
	dl := clk.Now().Add(time.Hour)
	for _, id := range []string{"a", "b"} {
		if err := o.Put(Entry{ID: id, Report: report(id, 7), Deadline: dl}); err != nil {
			t.Fatal(err)
		}
	}
	if err := o.Ack("a"); err != nil {
		t.Fatal(err)
	}
	if err := o.Ack("a"); err != nil {
		t.Fatalf("second Ack: %v", err)
	}
	if err := o.Ack("never-stored"); err != nil {
		t.Fatalf("Ack of a missing id: %v", err)
	}
	got, _ := pending(t, o)
	if len(got) != 1 || got[0].ID != "b" {
		t.Fatalf("pending %+v, want only b", got)
	}
	// A second Put of the same id replaces the first.
	r := report("b", 7)
	r.ResultCode = codep(wire.TLanceIndexJobResultCode_NATIVE_IO)
	if err := o.Put(Entry{ID: "b", Report: r, Deadline: dl}); err != nil {
		t.Fatal(err)
	}
	got, _ = pending(t, o)
	if len(got) != 1 || got[0].Report.GetResultCode() != wire.TLanceIndexJobResultCode_NATIVE_IO {
		t.Fatalf("pending %+v, want the replaced b", got)
	}
}

func TestExpiry(t *testing.T) {
	clk := newClock()
	o := open(t, filepath.Join(t.TempDir(), "outbox.db"), clk, WithGrace(10*time.Minute))
	if o.Grace() != 10*time.Minute {
		t.Fatalf("grace %v", o.Grace())
	}
	now := clk.Now()
	if err := o.Put(Entry{ID: "early", Report: report("early", 1), Deadline: now.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if err := o.Put(Entry{ID: "late", Report: report("late", 2), Deadline: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(11 * time.Minute) // at early's deadline + grace exactly: still kept
	if got, exp := pending(t, o); len(got) != 2 || len(exp) != 0 {
		t.Fatalf("at the boundary: pending %d expired %v", len(got), exp)
	}
	clk.Advance(time.Millisecond)
	got, exp := pending(t, o)
	if len(got) != 1 || got[0].ID != "late" || len(exp) != 1 || exp[0] != "early" {
		t.Fatalf("after expiry: pending %+v expired %v", got, exp)
	}
	if n, err := o.Len(); err != nil || n != 1 {
		t.Fatalf("Len = %d, %v; the expired entry must be deleted", n, err)
	}
}

func TestPutRejectsInvalidEntries(t *testing.T) {
	clk := newClock()
	o := open(t, filepath.Join(t.TempDir(), "outbox.db"), clk)
	noSecret := report("x", 1)
	noSecret.InvocationSecret = nil
	for name, e := range map[string]Entry{
		"no id":        {Report: report("x", 1)},
		"no report":    {ID: "x"},
		"other id":     {ID: "y", Report: report("x", 1)},
		"no secret":    {ID: "x", Report: noSecret},
		"empty secret": {ID: "x", Report: func() *wire.TLanceIndexJobReport { r := report("x", 1); r.InvocationSecret = strp(""); return r }()},
	} {
		if err := o.Put(e); !errors.Is(err, ErrInvalidEntry) {
			t.Errorf("%s: Put = %v, want ErrInvalidEntry", name, err)
		}
	}
}

func TestCorruptEntryIsDropped(t *testing.T) {
	clk := newClock()
	path := filepath.Join(t.TempDir(), "outbox.db")
	o := open(t, path, clk)
	if err := o.updateIn(bucket, func(b *bolt.Bucket) error { return b.Put([]byte("junk"), []byte("{not json")) }); err != nil {
		t.Fatal(err)
	}
	got, exp := pending(t, o)
	if len(got) != 0 || len(exp) != 1 || exp[0] != "junk" {
		t.Fatalf("pending %+v expired %v", got, exp)
	}
}

func TestSecondOpenFailsWhileLocked(t *testing.T) {
	clk := newClock()
	path := filepath.Join(t.TempDir(), "outbox.db")
	open(t, path, clk)
	defer func(d time.Duration) { lockTimeout = d }(lockTimeout)
	lockTimeout = 200 * time.Millisecond
	start := time.Now()
	if o, err := Open(path); err == nil {
		o.Close()
		t.Fatal("a second Open of a locked outbox succeeded")
	}
	if time.Since(start) > 10*time.Second {
		t.Fatal("the second Open waited too long")
	}
}

func TestReopenTightensMode(t *testing.T) {
	clk := newClock()
	path := filepath.Join(t.TempDir(), "outbox.db")
	o := open(t, path, clk)
	o.Close()
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	open(t, path, clk)
	st, _ := os.Stat(path)
	if st.Mode().Perm() != FileMode {
		t.Fatalf("mode %v after reopen, want %v", st.Mode().Perm(), FileMode)
	}
}

// The outbox never holds a storage option: an Entry has no field for one,
// and the file's bytes are checked for a canary anyway (the agent's tests
// check the same through a whole dispatch).
func TestFileHoldsNoStorageOption(t *testing.T) {
	const canary = "CANARY-STORAGE-VALUE-9f3c"
	clk := newClock()
	path := filepath.Join(t.TempDir(), "outbox.db")
	o := open(t, path, clk)
	r := report("inv", 1)
	r.SanitizedMessage = strp("IO error reading s3://bucket/x")
	if err := o.Put(Entry{ID: "inv", Report: r, Deadline: clk.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	o.Close()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte(canary)) {
		t.Fatal("the outbox file contains a storage option value")
	}
	if !bytes.Contains(b, []byte("secret-inv")) {
		t.Fatal("the outbox file should hold the invocation secret (sanity check of the scan)")
	}
}

// A progress entry lives beside the report of the same invocation, is
// replaced by a newer Put, survives a reopen, and is removed on its own.
func TestProgressEntries(t *testing.T) {
	clk := newClock()
	path := filepath.Join(t.TempDir(), "outbox.db")
	o := open(t, path, clk)
	dl := clk.Now().Add(time.Hour)
	prog := func(phase string) *wire.TLanceIndexJobProgressReport {
		return &wire.TLanceIndexJobProgressReport{JobID: 1, DispatchRevision: 3, InvocationID: "inv", BeProcessEpoch: 42,
			InvocationSecret: strp("secret-inv"), IndexUUID: strp("0b5d6f9e-3c1a-4e2b-9f7d-1a2b3c4d5e6f"), Phase: strp(phase)}
	}
	for _, ph := range []string{"train", "write"} {
		if err := o.Put(Entry{ID: "inv", Kind: KindProgress, Progress: prog(ph), Deadline: dl}); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(time.Second)
	if err := o.Put(Entry{ID: "inv", Report: report("inv", 1), IndexUUID: "0b5d6f9e-3c1a-4e2b-9f7d-1a2b3c4d5e6f", Deadline: dl}); err != nil {
		t.Fatal(err)
	}
	if err := o.Put(Entry{ID: "inv", Kind: KindProgress, Report: report("inv", 1)}); !errors.Is(err, ErrInvalidEntry) {
		t.Fatalf("a progress entry holding a report: %v", err)
	}
	if err := o.Put(Entry{ID: "other", Kind: KindProgress, Progress: prog("x")}); !errors.Is(err, ErrInvalidEntry) {
		t.Fatalf("a progress entry naming another invocation: %v", err)
	}
	o.Close()
	o = open(t, path, clk)
	got, _ := pending(t, o)
	if len(got) != 2 || got[0].Kind != KindProgress || got[0].Progress.GetPhase() != "write" ||
		got[1].Kind != KindReport || got[1].IndexUUID == "" || got[1].Report.GetResultCode() != wire.TLanceIndexJobResultCode_NATIVE_OK {
		t.Fatalf("pending %+v", got)
	}
	if n, _ := o.Len(); n != 2 {
		t.Fatalf("Len %d, want 2", n)
	}
	if err := o.Remove(KindProgress, "inv"); err != nil {
		t.Fatal(err)
	}
	if got, _ := pending(t, o); len(got) != 1 || got[0].Kind != KindReport {
		t.Fatalf("after removing the progress entry: %+v", got)
	}
}
