package admin

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// Sources of a job's log (TJobLogs.source).
const (
	LogSourceBackend = "backend"
	LogSourceJournal = "journal"
	LogSourceNone    = "none"
)

// Bounds of jobs logs: the default and the largest max_bytes (the backend's
// own bound), and how long the backend is given to answer.
const (
	MaxJobLogBytes = job.MaxJobLogBytes
	jobLogTimeout  = 10 * time.Second
)

// JobLogs answers a job's worker log (jobs logs): the redacted stderr the
// backend of its current dispatch still holds (queued, running, or
// finished and not yet dropped), else the tail the journal kept (the last
// 4 KiB, from the result or termination report), else nothing — source
// says which, and note why the backend's copy was not used.
//
// Only the leader asks the backend (with the cluster id and its leader
// term, as its other calls to backends do: a deposed leader's request is
// refused STALE_LEADER_TERM). A follower forwards the call to the leader
// and, when it cannot, answers from its own journal.
func (s *Server) JobLogs(ctx context.Context, jobID int64, maxBytes int32) (*adminapi.TJobLogs, error) {
	if maxBytes < 0 || maxBytes > MaxJobLogBytes {
		return nil, adminError(adminapi.TErrorCode_INVALID, "max bytes %d: want 1..%d (0 = %d)", maxBytes, MaxJobLogBytes, MaxJobLogBytes)
	}
	if maxBytes == 0 {
		maxBytes = MaxJobLogBytes
	}
	st := s.d.Reader.State()
	rec, ok := st.Job(jobID)
	if !ok {
		return nil, adminError(adminapi.TErrorCode_NOT_FOUND, "job %d does not exist", jobID)
	}
	if !s.d.Proposer.IsLeader() {
		note := "this master is not the leader and no leader could be asked"
		if _, addr := s.d.Cluster.Leader(); addr != "" && s.d.LeaderCall != nil {
			var out *adminapi.TJobLogs
			err := s.d.LeaderCall(ctx, addr, func(ctx context.Context, c *adminapi.LanceMasterServiceClient) (err error) {
				out, err = c.JobLogs(ctx, jobID, maxBytes)
				return err
			})
			if err == nil && out != nil {
				return out, nil
			}
			s.d.Logger.Debug("job logs: the leader could not be asked; answering from the journal", zap.Int64("job_id", jobID), zap.Error(err))
			note = "the leader could not be asked"
		}
		return journalLog(rec, int(maxBytes), note), nil
	}
	if rec.InvocationID == "" {
		return journalLog(rec, int(maxBytes), "the job has not been dispatched"), nil
	}
	b, ok := st.Backend(rec.BackendID)
	if !ok {
		return journalLog(rec, int(maxBytes), fmt.Sprintf("backend %d is no longer registered", rec.BackendID)), nil
	}
	term := int64(s.d.Proposer.LeaderTerm())
	cluster := st.ClusterID()
	req := &wire.TJobLogRequest{InvocationID: rec.InvocationID, LeaderTerm: &term, MaxBytes: &maxBytes}
	if cluster != "" {
		req.ClusterID = &cluster
	}
	cctx, cancel := context.WithTimeout(ctx, jobLogTimeout)
	resp, err := s.d.Backends.JobLog(cctx, b.Address, req)
	cancel()
	if note := backendLogNote(rec.BackendID, resp, err); note != "" {
		if err != nil {
			s.d.Logger.Info("job logs: the backend could not be asked; answering from the journal", zap.Int64("job_id", jobID),
				zap.Int64("backend_id", rec.BackendID), zap.Error(err))
		}
		return journalLog(rec, int(maxBytes), note), nil
	}
	// The backend redacted the log; the catalog's credentials are removed
	// again here (never shown unredacted, even by a backend that failed to).
	opts, err := s.catalogCredentials(st, rec)
	if err != nil {
		s.d.Logger.Warn("job logs: the catalog's credentials cannot be read to redact the backend's log", zap.Int64("job_id", jobID),
			zap.Error(err))
		return journalLog(rec, int(maxBytes), "the catalog's credentials could not be read to redact the backend's log"), nil
	}
	text := job.RedactLog(resp.GetLog(), opts, 0)
	out := &adminapi.TJobLogs{Log: tailBytes(text, int(maxBytes)), Source: LogSourceBackend, Truncated: resp.Truncated,
		Phase: resp.Phase, ElapsedMs: resp.ElapsedMs}
	if len(out.Log) < len(text) { // a backend that ignored max_bytes, or the redaction made it longer
		out.Truncated = boolPtr(true)
	}
	return out, nil
}

// catalogCredentials are the storage options of the job's catalog (none
// without a reference).
func (s *Server) catalogCredentials(st *raftfsm.State, rec *job.Record) (map[string]string, error) {
	c, ok := st.CatalogByID(rec.CatalogID)
	if !ok || c.CredentialsRef == "" {
		return nil, nil
	}
	return s.d.Credentials.Resolve(c.CredentialsRef)
}

// backendLogNote says why the backend's answer is not used ("" = it is).
func backendLogNote(backendID int64, resp *wire.TJobLogResponse, err error) string {
	switch {
	case err != nil:
		return fmt.Sprintf("backend %d could not be reached", backendID)
	case resp == nil || resp.Status == nil:
		return fmt.Sprintf("backend %d answered without a status", backendID)
	case resp.Status.StatusCode == wire.TStatusCode_NOT_IMPLEMENTED_ERROR:
		return fmt.Sprintf("backend %d does not serve job logs (an older version)", backendID)
	case resp.Status.StatusCode != wire.TStatusCode_OK:
		return fmt.Sprintf("backend %d refused the request (%s)", backendID, resp.Status.StatusCode)
	case !resp.IsSetLog():
		// UNKNOWN_INVOCATION: a restarted backend; FORGOTTEN: dropped after its grace.
		return fmt.Sprintf("backend %d no longer holds the invocation (%s)", backendID, resp.GetState())
	}
	return ""
}

// journalLog is the tail the journal kept, or nothing (source none).
func journalLog(rec *job.Record, maxBytes int, why string) *adminapi.TJobLogs {
	out := &adminapi.TJobLogs{Source: LogSourceJournal}
	if rec.LogTail == "" {
		out.Source = LogSourceNone
		why += "; the journal holds no log tail for it (one is kept from the result or termination report)"
	} else {
		out.Log = tailBytes(rec.LogTail, maxBytes)
		if len(out.Log) < len(rec.LogTail) {
			out.Truncated = boolPtr(true)
		}
		why += fmt.Sprintf("; showing the last part the journal keeps (at most %d bytes)", job.MaxLogTailBytes)
	}
	out.Note = &why
	if rec.MutationState == job.Running && rec.BuildPhase != "" {
		phase := rec.BuildPhase
		out.Phase = &phase
	}
	if rec.MutationState == job.Running && rec.BuildElapsedMs != 0 {
		e := rec.BuildElapsedMs
		out.ElapsedMs = &e
	}
	return out
}

// tailBytes is the newest at most n bytes of s, cut at a character start.
func tailBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := len(s) - n
	for i < len(s) && s[i]&0xC0 == 0x80 {
		i++
	}
	return s[i:]
}

func boolPtr(b bool) *bool { return &b }
