package cluster

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// Operator snapshots (`operator snapshot save | restore`): raft's user
// snapshot, wrapped in a checksummed snapshot file (snapfile.go).
//
// Both directions spool through a private file under DataDir/transfers/
// (0700, files 0600: a snapshot carries invocation secrets, like the log):
// a save so the file's header can carry the body's digest before the body,
// a restore so the whole upload is verified before raft sees a byte of it.

const (
	transfersDirName = "transfers" // DataDir/transfers: spools of snapshot transfers
	// staleSpoolAge: spools older than this are leftovers of a crash (a live
	// transfer is dropped after a minute idle) and are deleted.
	staleSpoolAge = time.Hour
	// restoreTimeout is raft.Restore's bound. It bounds the hand-over of the
	// restore and of the no-op after it, but it is armed once, before the
	// copy: a restore slower than it would report a timeout although it
	// happened. So it is generous; the copy itself is local disk I/O.
	restoreTimeout = 10 * time.Minute
)

// SnapshotFile is an open snapshot file being streamed out of the leader.
// Read it to the end, then Close it (which deletes the spool). Not safe for
// concurrent use.
type SnapshotFile struct {
	Header *SnapshotFileHeader
	size   int64
	r      io.Reader
	spool  *spool
}

// Size is the whole file's length in bytes.
func (s *SnapshotFile) Size() int64 { return s.size }

// Index and Term are the snapshot's raft index and term.
func (s *SnapshotFile) Index() uint64 { return s.Header.Raft.Index }
func (s *SnapshotFile) Term() uint64  { return s.Header.Raft.Term }

func (s *SnapshotFile) Read(p []byte) (int, error) { return s.r.Read(p) }

// Close deletes the spool; it is idempotent.
func (s *SnapshotFile) Close() error { return s.spool.discard() }

// SaveSnapshot takes a consistent snapshot of the journal on this node,
// which must lead (else an error wrapping raftfsm.ErrNotLeader): a barrier
// first (every entry committed before the call is in it), then raft's user
// snapshot, spooled with its digest. Raft also truncates its log behind the
// new snapshot, as after any snapshot.
func (n *Node) SaveSnapshot(ctx context.Context) (*SnapshotFile, error) {
	r, err := n.running()
	if err != nil {
		return nil, err
	}
	if r.State() != raft.Leader {
		return nil, fmt.Errorf("cluster: snapshot save on %s: %w", n.cfg.NodeID, raftfsm.ErrNotLeader)
	}
	if err := n.ConsistentRead(ctx); err != nil {
		return nil, err
	}
	f := r.Snapshot()
	if err := waitFuture(ctx, f); err != nil {
		if errors.Is(err, raft.ErrNothingNewToSnapshot) {
			return nil, job.Errorf(job.CodeUnavailable, "nothing to snapshot yet: the journal is empty")
		}
		if strings.Contains(err.Error(), "cannot take snapshot now") {
			return nil, job.Errorf(job.CodeConflict, "a raft configuration change is being applied; retry the save: %v", err)
		}
		return nil, fmt.Errorf("cluster: take snapshot: %w", err)
	}
	meta, rc, err := f.Open()
	if err != nil {
		return nil, fmt.Errorf("cluster: open snapshot: %w", err)
	}
	defer rc.Close()
	sp, err := n.newSpool("save")
	if err != nil {
		return nil, err
	}
	hash := sha256.New()
	size, err := io.Copy(io.MultiWriter(sp.f, hash), rc)
	if err == nil && size != meta.Size {
		err = fmt.Errorf("snapshot %s has %d bytes, its metadata says %d", meta.ID, size, meta.Size)
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("cluster: spool snapshot: %w", err), sp.discard())
	}
	h := &SnapshotFileHeader{
		FormatVersion: SnapshotFileFormatVersion,
		CreatedUnixMs: time.Now().UnixMilli(),
		NodeID:        n.cfg.NodeID,
		Raft:          raftMetaOf(meta),
		BodySize:      size,
		BodySHA256:    hex.EncodeToString(hash.Sum(nil)),
	}
	prefix, err := encodeSnapshotFilePrefix(h)
	if err == nil {
		_, err = sp.f.Seek(0, io.SeekStart)
	}
	if err != nil {
		return nil, errors.Join(err, sp.discard())
	}
	n.log.Info("operator snapshot taken", zap.String("snapshot_id", meta.ID), zap.Uint64("index", meta.Index),
		zap.Uint64("term", meta.Term), zap.Int64("bytes", size))
	return &SnapshotFile{Header: h, size: int64(len(prefix)) + size,
		r: io.MultiReader(bytes.NewReader(prefix), sp.f), spool: sp}, nil
}

// SnapshotRestore is an upload of a snapshot file into a spool, then its
// restore. Write the whole file (exactly the size announced), call Restore,
// and Discard in any case. Not safe for concurrent use.
type SnapshotRestore struct {
	n       *Node
	spool   *spool
	size    int64
	written int64
}

// RestoreResult is what a restore did.
type RestoreResult struct {
	// Index is the raft index the restored state now lives at (raft burns
	// one index past everything it had).
	Index uint64
	// SnapshotIndex and SnapshotTerm are the file's.
	SnapshotIndex, SnapshotTerm uint64
	Jobs, Catalogs, Backends    int64
	// CarriedForward and Held are the jobs (ids in order) whose record this
	// node's journal carried over the file's, and those it held
	// (raftfsm.PrepareRestore).
	CarriedForward, Held []int64
}

// NewSnapshotRestore prepares the upload of a snapshot file of size bytes.
// This node must lead.
func (n *Node) NewSnapshotRestore(size int64) (*SnapshotRestore, error) {
	r, err := n.running()
	if err != nil {
		return nil, err
	}
	if r.State() != raft.Leader {
		return nil, fmt.Errorf("cluster: snapshot restore on %s: %w", n.cfg.NodeID, raftfsm.ErrNotLeader)
	}
	if size <= 0 || size > MaxSnapshotFileSize {
		return nil, job.Errorf(job.CodeInvalid, "a snapshot file of %d bytes: the size must be 1..%d", size, int64(MaxSnapshotFileSize))
	}
	sp, err := n.newSpool("restore")
	if err != nil {
		return nil, err
	}
	return &SnapshotRestore{n: n, spool: sp, size: size}, nil
}

// Write appends to the spool; more bytes than announced are refused.
func (u *SnapshotRestore) Write(p []byte) (int, error) {
	if int64(len(p)) > u.size-u.written {
		return 0, job.Errorf(job.CodeInvalid, "the upload exceeds the %d bytes announced", u.size)
	}
	k, err := u.spool.f.Write(p)
	u.written += int64(k)
	if err != nil {
		return k, fmt.Errorf("cluster: write restore spool: %w", err)
	}
	return k, nil
}

// Discard deletes the spool; it is idempotent.
func (u *SnapshotRestore) Discard() error { return u.spool.discard() }

// Restore verifies the uploaded file completely (InspectSnapshotFile: the
// checksums, the formats, a full decode of the journal) and only then
// replaces the cluster's state with it through raft.Restore: a user restore
// that followers install as a snapshot. What raft installs is the file's
// state prepared against this node's journal (prepareRestore): a job the
// journal knows at a later revision keeps that record, and a job it cannot
// vouch for that could be dispatched again is held, so that no job is ever
// dispatched a second time because a restore forgot its dispatch. A file
// that fails verification is refused with a *SnapshotFileError and changes
// nothing. Errors wrapping
// raftfsm.ErrNotLeader also mean nothing changed; ErrFateUnknown means the
// restore may have happened (look, then restore again if needed: restoring
// the same file twice is harmless).
//
// The leader services of this term keep running on the restored state; the
// caller (pkg/admin) then hands leadership over, so the next leader starts
// them afresh in a new term (barrier, R4, reconcile).
func (u *SnapshotRestore) Restore(ctx context.Context) (*RestoreResult, error) {
	n := u.n
	if u.written != u.size {
		return nil, job.Errorf(job.CodeInvalid, "the upload is incomplete: %d of %d bytes", u.written, u.size)
	}
	r, err := n.running()
	if err != nil {
		return nil, err
	}
	if r.State() != raft.Leader {
		return nil, fmt.Errorf("cluster: snapshot restore on %s: %w", n.cfg.NodeID, raftfsm.ErrNotLeader)
	}
	insp, err := InspectSnapshotFile(u.spool.f)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("cluster: %w: %w", ErrNotApplied, err)
	}
	h := insp.Header
	// The journal the restore is prepared against must hold everything
	// committed so far: a leader's FSM may still trail its commit index (a
	// dispatch its predecessor journaled, say).
	if err := n.ConsistentRead(ctx); err != nil {
		if errors.Is(err, raftfsm.ErrNotLeader) {
			return nil, err
		}
		return nil, fmt.Errorf("cluster: %w: %w", ErrNotApplied, err)
	}
	body, ev, err := n.prepareRestore(insp.State())
	if err != nil {
		return nil, err
	}
	defer body.discard()
	meta := h.snapshotMeta()
	meta.Size = body.size
	before := r.LastIndex()
	t0 := time.Now()
	err = r.Restore(meta, newVerifyingReader(body.f, body.size, body.sha256), restoreTimeout)
	if err != nil {
		return nil, n.restoreError(r, before, err)
	}
	res := &RestoreResult{Index: lastSnapshotIndex(r), SnapshotIndex: h.Raft.Index, SnapshotTerm: h.Raft.Term,
		Jobs: insp.Journal.Jobs, Catalogs: insp.Journal.Catalogs, Backends: insp.Journal.Backends,
		CarriedForward: ev.CarriedForward, Held: ev.Held}
	n.log.Warn("operator restored a snapshot: the journal was replaced",
		zap.String("snapshot_id", h.Raft.ID), zap.Uint64("snapshot_index", h.Raft.Index),
		zap.Uint64("restored_at_index", res.Index), zap.Int64("jobs", res.Jobs),
		zap.Int("jobs_carried_forward", len(ev.CarriedForward)), zap.Int("jobs_held", len(ev.Held)),
		zap.Duration("took", time.Since(t0)))
	return res, nil
}

// preparedBody is the snapshot body a restore hands to raft, in a spool,
// with its size and digest: raft's copy of it is verified as it reads.
type preparedBody struct {
	*spool
	size   int64
	sha256 string
}

// prepareRestore writes what the restore installs: the file's verified
// state with what this node's journal proves about the same jobs
// (raftfsm.PrepareRestore: records carried forward, jobs held), read from
// the FSM now, right before raft.Restore and after a barrier (the FSM has
// applied everything committed). The caller has the dispatcher held, so no
// M1 is journaled after this read.
func (n *Node) prepareRestore(file *raftfsm.State) (*preparedBody, raftfsm.RestoreEvidence, error) {
	var current *raftfsm.State
	if s, ok := n.fsm.(interface{ State() *raftfsm.State }); ok {
		current = s.State()
	}
	st, ev, err := raftfsm.PrepareRestore(file, current, time.Now().UnixMilli())
	if err != nil {
		return nil, ev, fmt.Errorf("cluster: %w: prepare the restore: %w", ErrNotApplied, err)
	}
	sp, err := n.newSpool("prepared")
	if err != nil {
		return nil, ev, fmt.Errorf("cluster: %w: %w", ErrNotApplied, err)
	}
	hash := sha256.New()
	err = st.WriteSnapshot(io.MultiWriter(sp.f, hash))
	var size int64
	if err == nil {
		size, err = sp.f.Seek(0, io.SeekCurrent)
	}
	if err == nil {
		_, err = sp.f.Seek(0, io.SeekStart)
	}
	if err != nil {
		return nil, ev, errors.Join(fmt.Errorf("cluster: %w: write the prepared restore: %w", ErrNotApplied, err), sp.discard())
	}
	return &preparedBody{spool: sp, size: size, sha256: hex.EncodeToString(hash.Sum(nil))}, ev, nil
}

// restoreError classifies a failed raft.Restore. Raft copies the file into
// a new local snapshot, restores the FSM from it and records it as the last
// snapshot, then commits a no-op; an error from the no-op comes after the
// restore. The last snapshot index tells the two apart.
func (n *Node) restoreError(r *raft.Raft, before uint64, err error) error {
	var fe *SnapshotFileError
	switch {
	case errors.As(err, &fe):
		return err // our verifying reader: raft cancelled its copy
	case lastSnapshotIndex(r) > before:
		n.log.Warn("snapshot restored locally, but its confirmation failed", zap.Error(err))
		return fmt.Errorf("cluster: %w: the snapshot was restored on %s, but it is not known to have reached a majority: %w",
			ErrFateUnknown, n.cfg.NodeID, err)
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return fmt.Errorf("cluster: snapshot restore (not applied): %w: %w", raftfsm.ErrNotLeader, err)
	case strings.Contains(err.Error(), "cannot restore snapshot now"):
		return job.Errorf(job.CodeConflict, "a raft configuration change is in progress; retry the restore: %v", err)
	default:
		return fmt.Errorf("cluster: %w: snapshot restore: %w", ErrFateUnknown, err)
	}
}

func lastSnapshotIndex(r *raft.Raft) uint64 {
	v, _ := strconv.ParseUint(r.Stats()["last_snapshot_index"], 10, 64)
	return v
}

// spool is a private temporary file under DataDir/transfers.
type spool struct {
	once sync.Once
	f    *os.File
	err  error
}

func (n *Node) newSpool(kind string) (*spool, error) {
	dir := filepath.Join(n.cfg.DataDir, transfersDirName)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("cluster: create %s: %w", dir, err)
	}
	n.sweepSpools(dir)
	f, err := os.CreateTemp(dir, kind+"-*.tmp") // mode 0600
	if err != nil {
		return nil, fmt.Errorf("cluster: create a spool in %s: %w", dir, err)
	}
	return &spool{f: f}, nil
}

func (s *spool) discard() error {
	s.once.Do(func() {
		s.err = errors.Join(s.f.Close(), os.Remove(s.f.Name()))
	})
	return s.err
}

// sweepSpools deletes spools a crash left behind.
func (n *Node) sweepSpools(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || !info.Mode().IsRegular() || time.Since(info.ModTime()) < staleSpoolAge {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err == nil {
			n.log.Info("deleted a stale snapshot transfer spool", zap.String("file", e.Name()))
		}
	}
}
