package admin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/options"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// Operator snapshots: `operator snapshot save | restore` move one snapshot
// file (pkg/cluster/snapfile.go) between the leader and the CLI in chunks,
// under a transfer id. A transfer lives on the master that began it:
//
//	save:    beginSnapshotSave → readSnapshotChunk(id, 0), (id, n), … until eof
//	restore: beginSnapshotRestore(size) → writeSnapshotChunk(id, 0, …), … →
//	         finishSnapshotRestore(id)   (verify everything, then restore)
//	either:  abortSnapshotTransfer(id)  (idempotent)
//
// Chunks are at most SnapshotChunkSize bytes, so every frame stays well
// under the 512 KiB bound; offsets must follow each other exactly. At most
// maxSnapshotTransfers transfers run on a master at once, and one left
// idle for snapshotIdleTimeout is dropped (its spool deleted).

const (
	// SnapshotChunkSize is the largest chunk either side sends: half the
	// 512 KiB frame bound.
	SnapshotChunkSize = 256 << 10
	// maxSnapshotTransfers bounds concurrent transfers per master: each
	// holds a spool the size of the state, and a restore decodes it.
	maxSnapshotTransfers = 2
)

// snapshotIdleTimeout drops an abandoned transfer (a var: tests shorten it).
var snapshotIdleTimeout = time.Minute

// SnapshotCluster is the part of the raft node behind operator snapshots.
// It is optional: a Cluster that does not implement it answers UNAVAILABLE.
// Implemented by pkg/cluster's Node through the adapter in pkg/master.
type SnapshotCluster interface {
	// SaveSnapshot takes a consistent snapshot on this master, which must
	// lead (raftfsm.ErrNotLeader otherwise), as a snapshot file to stream.
	SaveSnapshot(ctx context.Context) (SnapshotSource, error)
	// NewSnapshotRestore prepares the upload of a snapshot file of size
	// bytes; this master must lead.
	NewSnapshotRestore(size int64) (SnapshotSink, error)
}

// SnapshotSource is a snapshot file being read; Close deletes its spool.
type SnapshotSource interface {
	io.ReadCloser
	Size() int64
	Index() uint64
	Term() uint64
}

// SnapshotSink receives an uploaded snapshot file, then restores it.
type SnapshotSink interface {
	io.Writer
	// Restore verifies the whole file, then restores it through raft. A
	// file that fails verification is an error wrapping
	// raftfsm.ErrSnapshotFormat, and nothing changed; raftfsm.ErrNotLeader
	// also means nothing changed; ErrOutcomeUnknown means it may have.
	Restore(ctx context.Context) (*RestoreResult, error)
	// Discard deletes the upload; idempotent.
	Discard() error
}

// RestoreResult is what a restore did (see pkg/cluster's RestoreResult).
type RestoreResult struct {
	Index, SnapshotIndex, SnapshotTerm uint64
	Jobs, Catalogs, Backends           int64
	// CarriedForward and Held are the jobs (ids in order) whose newer
	// record the replaced journal kept, and those held because nothing
	// vouched for their dispatch history (raftfsm.PrepareRestore).
	CarriedForward, Held []int64
}

// BeginSnapshotSave takes a consistent snapshot on the leader and opens a
// transfer to read it.
func (s *Server) BeginSnapshotSave(ctx context.Context) (*adminapi.TSnapshotTransfer, error) {
	if err := s.requireLeader(); err != nil {
		return nil, err
	}
	sc, err := s.snapshotCluster()
	if err != nil {
		return nil, err
	}
	t, err := s.reserveTransfer()
	if err != nil {
		return nil, err
	}
	src, err := sc.SaveSnapshot(ctx)
	if err != nil {
		s.endLocked(t)
		return nil, s.operatorError("snapshot save", err)
	}
	t.src, t.size = src, src.Size()
	s.publishTransfer(t)
	index, term := int64(src.Index()), int64(src.Term())
	s.d.Logger.Info("snapshot save started", zap.String("transfer_id", t.id), zap.Int64("bytes", t.size),
		zap.Int64("index", index))
	return &adminapi.TSnapshotTransfer{TransferID: t.id, Size: t.size, ChunkSize: SnapshotChunkSize,
		IdleTimeoutMs: t.idle.Milliseconds(), Index: &index, Term: &term, NodeID: s.nodeID()}, nil
}

// ReadSnapshotChunk returns the chunk at offset, which must be where the
// previous chunk ended. The chunk with eof ends the transfer.
func (s *Server) ReadSnapshotChunk(ctx context.Context, id string, offset int64) (*adminapi.TSnapshotChunk, error) {
	t, err := s.transfer(id)
	if err != nil {
		return nil, err
	}
	if t.src == nil {
		t.release()
		return nil, adminError(adminapi.TErrorCode_INVALID, "transfer %s is a restore, not a save", clipID(id))
	}
	if offset != t.offset {
		t.release()
		return nil, adminError(adminapi.TErrorCode_INVALID, "chunk offset %d; the transfer is at %d", offset, t.offset)
	}
	buf := make([]byte, min(int64(SnapshotChunkSize), t.size-t.offset))
	n, err := io.ReadFull(t.src, buf)
	if err != nil {
		s.endLocked(t)
		return nil, s.internal("read snapshot", err)
	}
	t.offset += int64(n)
	eof := t.offset == t.size
	chunk := &adminapi.TSnapshotChunk{TransferID: id, Offset: offset, Data: buf[:n], EOF: &eof}
	if eof {
		s.d.Logger.Info("snapshot save sent", zap.String("transfer_id", id), zap.Int64("bytes", t.size))
		s.endLocked(t)
		return chunk, nil
	}
	t.release()
	return chunk, nil
}

// BeginSnapshotRestore opens a transfer that receives a snapshot file of
// size bytes on the leader.
func (s *Server) BeginSnapshotRestore(ctx context.Context, size int64) (*adminapi.TSnapshotTransfer, error) {
	if err := s.requireLeader(); err != nil {
		return nil, err
	}
	if size <= 0 {
		return nil, adminError(adminapi.TErrorCode_INVALID, "a snapshot file of %d bytes", size)
	}
	sc, err := s.snapshotCluster()
	if err != nil {
		return nil, err
	}
	t, err := s.reserveTransfer()
	if err != nil {
		return nil, err
	}
	sink, err := sc.NewSnapshotRestore(size)
	if err != nil {
		s.endLocked(t)
		return nil, s.operatorError("snapshot restore", err)
	}
	t.sink, t.size = sink, size
	s.publishTransfer(t)
	s.d.Logger.Info("snapshot restore upload started", zap.String("transfer_id", t.id), zap.Int64("bytes", size))
	return &adminapi.TSnapshotTransfer{TransferID: t.id, Size: size, ChunkSize: SnapshotChunkSize,
		IdleTimeoutMs: t.idle.Milliseconds(), NodeID: s.nodeID()}, nil
}

// WriteSnapshotChunk appends a chunk to a restore upload.
func (s *Server) WriteSnapshotChunk(ctx context.Context, c *adminapi.TSnapshotChunk) error {
	if c == nil {
		return adminError(adminapi.TErrorCode_INVALID, "no chunk")
	}
	t, err := s.transfer(c.TransferID)
	if err != nil {
		return err
	}
	switch {
	case t.sink == nil:
		t.release()
		return adminError(adminapi.TErrorCode_INVALID, "transfer %s is a save, not a restore", clipID(c.TransferID))
	case len(c.Data) > SnapshotChunkSize:
		t.release()
		return adminError(adminapi.TErrorCode_INVALID, "a chunk of %d bytes exceeds %d", len(c.Data), SnapshotChunkSize)
	case c.Offset != t.offset:
		t.release()
		return adminError(adminapi.TErrorCode_INVALID, "chunk offset %d; the transfer is at %d", c.Offset, t.offset)
	case int64(len(c.Data)) > t.size-t.offset:
		t.release()
		return adminError(adminapi.TErrorCode_INVALID, "the chunk goes past the %d bytes announced", t.size)
	}
	if _, err := t.sink.Write(c.Data); err != nil {
		s.endLocked(t)
		return s.operatorError("snapshot upload", err)
	}
	t.offset += int64(len(c.Data))
	t.release()
	return nil
}

// FinishSnapshotRestore verifies the uploaded file and restores it, then
// pauses the dispatcher, keeps the cluster id and hands leadership over
// (afterRestore). The transfer ends whatever the outcome; claimed is the
// name the client claims (--as), for the audit trail.
func (s *Server) FinishSnapshotRestore(ctx context.Context, id, claimed string) (*adminapi.TSnapshotRestoreResponse, error) {
	t, err := s.transfer(id)
	if err != nil {
		return nil, err
	}
	defer s.endLocked(t)
	who, err := claimOf(ctx, claimed)
	if err != nil {
		return nil, err
	}
	if t.sink == nil {
		return nil, adminError(adminapi.TErrorCode_INVALID, "transfer %s is a save, not a restore", clipID(id))
	}
	if t.offset != t.size {
		return nil, adminError(adminapi.TErrorCode_INVALID, "the upload is incomplete: %d of %d bytes", t.offset, t.size)
	}
	clusterID := s.d.Reader.State().ClusterID() // the restore replaces it with the file's
	if clusterID == "" && s.d.NewClusterID != nil {
		// This history has not journaled its id yet (a restore right after
		// bootstrap): it gets one now, never the file's, which names
		// another term sequence (backends keep their term fence by it).
		if id, err := s.d.NewClusterID(); err == nil {
			clusterID = id
		}
	}
	if s.d.HoldDispatch != nil {
		// No round may dispatch from the restored state before the pause
		// below is journaled (and leadership has moved on).
		release := s.d.HoldDispatch()
		defer release()
	}
	res, err := t.sink.Restore(ctx)
	if err != nil {
		if errors.Is(err, raftfsm.ErrSnapshotFormat) {
			s.d.Logger.Warn("snapshot restore refused", zap.String("transfer_id", id), zap.Error(err))
			return nil, adminError(adminapi.TErrorCode_INVALID, "%s; nothing was changed", err.Error())
		}
		return nil, s.operatorError("snapshot restore", err)
	}
	leader, paused := s.afterRestore(ctx, id, clusterID, who, res)
	if !paused {
		return nil, adminError(adminapi.TErrorCode_UNAVAILABLE,
			"the snapshot was restored (the journal now continues from index %d), but the dispatcher could not be paused: "+
				"run `lancemaster config set %s true` now, check `lancemaster jobs list --restored`, then set it back to false",
			res.Index, options.OptDispatcherPaused)
	}
	carried, held := int64(len(res.CarriedForward)), int64(len(res.Held))
	out := &adminapi.TSnapshotRestoreResponse{Index: int64(res.Index), SnapshotIndex: int64(res.SnapshotIndex),
		SnapshotTerm: int64(res.SnapshotTerm), JobCount: &res.Jobs, CatalogCount: &res.Catalogs, BackendCount: &res.Backends,
		CarriedForward: &carried, Held: &held}
	if leader != "" {
		out.LeaderID = &leader
	}
	return out, nil
}

// afterRestore runs on the leader that restored, and returns the leader
// afterwards ("" when unknown) and whether the dispatcher was paused.
// clusterID is the cluster id before the restore, who the operator that
// restored (its pause and its audit event record it). Every step is best
// effort: the restore is done, a failure is logged, and a failed pause is
// also the caller's answer (the operator must pause by hand).
//
//  1. The dispatcher is paused (lance_index_job_dispatcher_paused=true): a
//     restored file brings back PENDING and RUNNING jobs whose workers the
//     operator should look at before anything is dispatched again (`jobs
//     list --restored`); `config set lance_index_job_dispatcher_paused
//     false` resumes. This entry also reaches the FSM: the restored journal
//     carries the applied index it was saved at, while raft moved past
//     everything it had; until an entry reaches the FSM every replica would
//     look far behind (readiness, read-your-writes, CaughtUp).
//  2. The pre-restore cluster id is journaled again with replace (DESIGN.md
//     §13.1): the id names this Raft history, whose terms go on, so the
//     backends' term fence for it stays right; the file's id is replaced.
//  3. Leadership is handed over, so the next leader starts the leader
//     services afresh from the restored state in a new term (barrier, R4,
//     reconcile with a new fencing term).
func (s *Server) afterRestore(ctx context.Context, transferID, clusterID string, who *journal.TAuditActor, res *RestoreResult) (leader string, paused bool) {
	type step struct {
		what string
		t    raftfsm.CommandType
		cmd  thrift.TStruct
	}
	steps := []step{{"pausing the dispatcher", raftfsm.CmdSetOption,
		&journal.TSetOptionCommand{NowMs: s.nowMs(), Key: options.OptDispatcherPaused, Value: "true", Audit: who}}}
	if clusterID != "" {
		steps = append(steps, step{"keeping the cluster id", raftfsm.CmdSetClusterID,
			&journal.TClusterIDCommand{NowMs: s.nowMs(), ClusterID: clusterID, Replace: thrift.BoolPtr(true)}})
	}
	// The audit event comes after the restored state, so the restore does
	// not replace it (audit.go).
	steps = append(steps, step{"journaling its audit event (the restore is missing from the audit trail)", raftfsm.CmdAudit,
		restoreAuditCommand(s.nowMs(), who, res)})
	for i, st := range steps {
		cmd, err := raftfsm.Encode(st.t, st.cmd)
		var resp *journal.TApplyResponse
		if err == nil {
			resp, err = s.d.Cluster.ApplyLocal(ctx, cmd)
		}
		if err == nil && resp.Code != journal.TApplyCode_OK {
			err = fmt.Errorf("apply answered %s: %s", resp.Code, resp.GetMessage())
		}
		if err != nil {
			s.d.Logger.Warn("after the restore: "+st.what+" failed", zap.String("transfer_id", transferID), zap.Error(err))
		}
		if i == 0 {
			paused = err == nil
		}
	}
	leader, err := s.d.Cluster.TransferLeadership(ctx, "")
	if err != nil {
		s.d.Logger.Warn("after the restore: leadership transfer failed; this master keeps leading with the restored state",
			zap.String("transfer_id", transferID), zap.Error(err))
		leader, _ = s.d.Cluster.Leader()
	}
	return leader, paused
}

// AbortSnapshotTransfer ends a transfer and deletes its spool; an unknown id
// is not an error.
func (s *Server) AbortSnapshotTransfer(ctx context.Context, id string) error {
	if s.dropTransfer(id) {
		s.d.Logger.Info("snapshot transfer aborted", zap.String("transfer_id", clipID(id)))
	}
	return nil
}

func (s *Server) nodeID() *string {
	if s.d.NodeID == "" {
		return nil
	}
	id := s.d.NodeID
	return &id
}

// clipID keeps a client-supplied id short in messages and logs.
func clipID(id string) string {
	if len(id) > 64 {
		return id[:64] + "…"
	}
	return id
}

// ErrOutcomeUnknown: an operator change (restore, membership) may or may
// not have been applied. The Cluster adapter wraps the cluster's own
// "fate unknown" errors with it.
var ErrOutcomeUnknown = errors.New("the change may or may not have been applied")

// ErrNotApplied: an operator change provably was not applied; retry it.
var ErrNotApplied = errors.New("the change was not applied")

// operatorError maps an error of an operator method of the Cluster.
func (s *Server) operatorError(what string, err error) error {
	var je *job.Error
	switch {
	case errors.Is(err, raftfsm.ErrNotLeader):
		return s.notLeader()
	case errors.As(err, &je):
		return toAdminError(err)
	case outcomeUnknown(err):
		s.d.Logger.Warn("admin: "+what+": outcome unknown", zap.Error(err))
		return outcomeUnknownError(what)
	case notApplied(err):
		return adminError(adminapi.TErrorCode_UNAVAILABLE, "%s was not applied; it is safe to retry", what)
	}
	return s.internal(what, err)
}
