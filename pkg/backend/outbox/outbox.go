// Package outbox is the backend agent's durable outbox (DESIGN.md §12,
// Improvement): every report of a finished invocation — its typed result
// and/or its termination proof — is written here, and fsynced, before the
// agent first tries to deliver it, and stays until a master accepts it (Ack)
// or it expires. A backend restarted after a build still delivers the
// result, so the job ends with its real outcome instead of UNKNOWN.
//
// # File
//
// One bbolt file (fsync on every commit, bbolt's default), created 0600 and
// forced back to 0600 when it is opened. It holds invocation secrets: a
// report must echo the dispatch's secret to be accepted, so the secret has to
// survive a restart. Treat the file as sensitive (a private disk, backed up
// never or encrypted). bbolt reuses freed pages rather than zeroing them, so
// bytes of acknowledged entries may linger in the file until overwritten.
// Storage credentials are NEVER stored: an Entry has no field that could
// hold one.
//
// # Encoding
//
// Bucket "reports", key = the invocation id, value = one JSON object:
//
//	{"format":1,"report":{...},"index_uuid":"...","deadline_ms":N,"stored_ms":N}
//
// "report" is the wire TLanceIndexJobReport in its generated JSON form (the
// IDL's field names; enums by name, e.g. "NATIVE_OK"); "index_uuid" (may be
// absent) is the uuid the worker announced, which a termination report
// carries. JSON was chosen over Thrift compact because the outbox is read
// by people during incidents and the volume is tiny (one entry per finished
// build); "format" versions it.
//
// Bucket "progress" (KindProgress), key = the invocation id, value:
//
//	{"format":1,"progress":{...},"deadline_ms":N,"stored_ms":N}
//
// "progress" is the wire TLanceIndexJobProgressReport: what a running
// worker announced (the uuid of the index it builds, its phase), the latest
// only (a newer Put replaces it). An older binary ignores this bucket.
//
// # Concurrency
//
// An Outbox is safe for concurrent use. bbolt takes an exclusive file lock:
// a second Open of the same file (another agent on the same data dir) fails
// after a short wait instead of sharing it.
package outbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/lancemaster/lancemaster/gen-go/wire"
)

// FileMode is the outbox file's permission: owner read/write only.
const FileMode os.FileMode = 0o600

// DefaultGrace is how long an unacknowledged entry is kept after its
// dispatch deadline. After the deadline the master has given the job up
// (UNKNOWN) unless a report arrives; a late result is acknowledged but not
// applied, while a late termination proof still frees a possible-live slot,
// so the outbox keeps trying well past the deadline.
const DefaultGrace = 24 * time.Hour

// lockTimeout bounds the wait for bbolt's file lock.
var lockTimeout = 2 * time.Second

const formatVersion = 1

var (
	bucket         = []byte("reports")
	progressBucket = []byte("progress")
)

// Kind is what an entry holds.
type Kind int

const (
	// KindReport: a finished invocation's report (result and/or proof).
	KindReport Kind = iota
	// KindProgress: what a running worker announced (progress report).
	KindProgress
)

func (k Kind) String() string {
	if k == KindProgress {
		return "progress"
	}
	return "report"
}

func (k Kind) bucket() []byte {
	if k == KindProgress {
		return progressBucket
	}
	return bucket
}

// Errors.
var (
	// ErrInvalidEntry: Put was given an entry without id, report or secret,
	// or whose report names another invocation.
	ErrInvalidEntry = errors.New("outbox: invalid entry")
	// ErrClosed: the outbox was closed.
	ErrClosed = errors.New("outbox: closed")
)

// Entry is one stored report or progress report.
type Entry struct {
	// ID is the invocation id, the entry's key: one entry per invocation
	// and kind.
	ID   string
	Kind Kind
	// Report (KindReport) is what the agent delivers: the dispatch
	// identity, the result code when there is a trusted one, the
	// termination proof when there is one, and the invocation secret that
	// authenticates it.
	Report *wire.TLanceIndexJobReport
	// IndexUUID (KindReport) is the uuid the worker announced, if any.
	IndexUUID string
	// Progress (KindProgress) is the progress report, secret included.
	Progress *wire.TLanceIndexJobProgressReport
	// Deadline is the dispatch's deadline; the entry expires at
	// Deadline + the outbox's grace.
	Deadline time.Time
	// StoredAt is when Put stored it (set by Put when zero).
	StoredAt time.Time
}

// Option configures Open.
type Option func(*Outbox)

// WithGrace sets how long an unacknowledged entry is kept after its deadline
// (DefaultGrace when not set; a value ≤ 0 is ignored).
func WithGrace(d time.Duration) Option {
	return func(o *Outbox) {
		if d > 0 {
			o.grace = d
		}
	}
}

// WithClock replaces time.Now (tests).
func WithClock(now func() time.Time) Option {
	return func(o *Outbox) {
		if now != nil {
			o.now = now
		}
	}
}

// Outbox is an open outbox file.
type Outbox struct {
	db    *bolt.DB
	path  string
	grace time.Duration
	now   func() time.Time
}

// Open opens (creating it when missing) the outbox file at path. Its
// directory must exist.
func Open(path string, opts ...Option) (*Outbox, error) {
	o := &Outbox{path: path, grace: DefaultGrace, now: time.Now}
	for _, opt := range opts {
		opt(o)
	}
	db, err := bolt.Open(path, FileMode, &bolt.Options{Timeout: lockTimeout})
	if err != nil {
		if errors.Is(err, bolt.ErrTimeout) {
			return nil, fmt.Errorf("outbox %s: locked by another process (is another backend using this data dir?)", path)
		}
		return nil, fmt.Errorf("outbox %s: %w", path, err)
	}
	// An existing file keeps its mode on open: force it back to owner-only.
	if err := os.Chmod(path, FileMode); err != nil {
		db.Close()
		return nil, fmt.Errorf("outbox %s: %w", path, err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucket, progressBucket} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		db.Close()
		return nil, fmt.Errorf("outbox %s: %w", path, err)
	}
	o.db = db
	return o, nil
}

// Path returns the file's path.
func (o *Outbox) Path() string { return o.path }

// Grace returns how long an unacknowledged entry is kept after its deadline.
func (o *Outbox) Grace() time.Duration { return o.grace }

// ExpiresAt is when e expires.
func (o *Outbox) ExpiresAt(e Entry) time.Time { return e.Deadline.Add(o.grace) }

// stored is the on-disk form.
type stored struct {
	Format     int                                `json:"format"`
	Report     *wire.TLanceIndexJobReport         `json:"report,omitempty"`
	IndexUUID  string                             `json:"index_uuid,omitempty"`
	Progress   *wire.TLanceIndexJobProgressReport `json:"progress,omitempty"`
	DeadlineMs int64                              `json:"deadline_ms"`
	StoredMs   int64                              `json:"stored_ms"`
}

// Put stores e durably (the commit is fsynced before Put returns). A second
// Put of the same id and kind replaces the first.
func (o *Outbox) Put(e Entry) error {
	var invocation string
	var secret *string
	switch e.Kind {
	case KindReport:
		if e.Report == nil || e.Progress != nil {
			return fmt.Errorf("%w: a report entry holds a report only", ErrInvalidEntry)
		}
		invocation, secret = e.Report.InvocationID, e.Report.InvocationSecret
	case KindProgress:
		if e.Progress == nil || e.Report != nil {
			return fmt.Errorf("%w: a progress entry holds a progress report only", ErrInvalidEntry)
		}
		invocation, secret = e.Progress.InvocationID, e.Progress.InvocationSecret
	default:
		return fmt.Errorf("%w: unknown kind", ErrInvalidEntry)
	}
	switch {
	case e.ID == "":
		return fmt.Errorf("%w: id is required", ErrInvalidEntry)
	case invocation != e.ID:
		return fmt.Errorf("%w: the report names another invocation", ErrInvalidEntry)
	case secret == nil || *secret == "":
		return fmt.Errorf("%w: the report has no invocation secret", ErrInvalidEntry)
	}
	if e.StoredAt.IsZero() {
		e.StoredAt = o.now()
	}
	b, err := json.Marshal(stored{Format: formatVersion, Report: e.Report, IndexUUID: e.IndexUUID, Progress: e.Progress,
		DeadlineMs: e.Deadline.UnixMilli(), StoredMs: e.StoredAt.UnixMilli()})
	if err != nil {
		return fmt.Errorf("outbox: encode: %w", err)
	}
	return o.updateIn(e.Kind.bucket(), func(b2 *bolt.Bucket) error { return b2.Put([]byte(e.ID), b) })
}

// Ack removes the report entry of id: a master accepted it, or it can never
// be accepted. Acknowledging a missing id is not an error.
func (o *Outbox) Ack(id string) error { return o.Remove(KindReport, id) }

// Remove removes the entry of id of kind k (missing is not an error).
func (o *Outbox) Remove(k Kind, id string) error {
	return o.updateIn(k.bucket(), func(b *bolt.Bucket) error { return b.Delete([]byte(id)) })
}

// Pending removes the expired entries, then returns the others (both
// kinds), oldest first, with the ids of those it removed (for the caller to
// log). An entry that cannot be decoded is removed and reported as expired:
// it could never be delivered.
func (o *Outbox) Pending() (pending []Entry, expired []string, err error) {
	now := o.now()
	err = o.db.Update(func(tx *bolt.Tx) error {
		for _, k := range []Kind{KindReport, KindProgress} {
			b := tx.Bucket(k.bucket())
			var drop [][]byte
			if err := b.ForEach(func(key, v []byte) error {
				e, ok := decode(k, key, v)
				if !ok || now.After(o.ExpiresAt(e)) {
					drop = append(drop, append([]byte(nil), key...))
					return nil
				}
				pending = append(pending, e)
				return nil
			}); err != nil {
				return err
			}
			for _, key := range drop {
				if err := b.Delete(key); err != nil {
					return err
				}
				expired = append(expired, string(key))
			}
		}
		return nil
	})
	if err = wrapClosed(err); err != nil {
		return nil, nil, err
	}
	sort.SliceStable(pending, func(i, j int) bool { return pending[i].StoredAt.Before(pending[j].StoredAt) })
	return pending, expired, nil
}

// Len returns the number of stored entries of both kinds (expired ones
// included).
func (o *Outbox) Len() (int, error) {
	n := 0
	err := o.db.View(func(tx *bolt.Tx) error {
		n = tx.Bucket(bucket).Stats().KeyN + tx.Bucket(progressBucket).Stats().KeyN
		return nil
	})
	return n, wrapClosed(err)
}

// Close closes the file. It is idempotent.
func (o *Outbox) Close() error {
	return o.db.Close()
}

func (o *Outbox) updateIn(name []byte, fn func(*bolt.Bucket) error) error {
	return wrapClosed(o.db.Update(func(tx *bolt.Tx) error { return fn(tx.Bucket(name)) }))
}

func wrapClosed(err error) error {
	if errors.Is(err, bolt.ErrDatabaseNotOpen) {
		return ErrClosed
	}
	return err
}

func decode(kind Kind, k, v []byte) (Entry, bool) {
	var s stored
	if err := json.Unmarshal(v, &s); err != nil || s.Format != formatVersion {
		return Entry{}, false
	}
	e := Entry{ID: string(k), Kind: kind, Deadline: time.UnixMilli(s.DeadlineMs), StoredAt: time.UnixMilli(s.StoredMs)}
	switch kind {
	case KindReport:
		if s.Report == nil || s.Report.InvocationID != e.ID {
			return Entry{}, false
		}
		e.Report, e.IndexUUID = s.Report, s.IndexUUID
	case KindProgress:
		if s.Progress == nil || s.Progress.InvocationID != e.ID {
			return Entry{}, false
		}
		e.Progress = s.Progress
	}
	return e, true
}
