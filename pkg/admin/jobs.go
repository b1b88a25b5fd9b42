package admin

import (
	"context"
	"slices"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/job/jobwire"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

const (
	defaultListLimit = 100
	maxListLimit     = 1000 // a page must fit one 512 KiB frame (a view is ~0.5 KiB)
	// ForceReleaseWarning is journaled with every force-release (DESIGN.md §9).
	ForceReleaseWarning = "force-released: the old worker may still be running and may still overwrite, remove or reintroduce the index"
	// refreshStatePrefix selects a refresh state in `jobs list --state`.
	refreshStatePrefix = "refresh:"
)

// ListJobs lists jobs, filtered and paged: with oldest_first false, newest
// (largest id) first, paged with before_job_id / next_before_job_id; with
// oldest_first true in id order, paged with after_job_id /
// next_after_job_id. A request that does not set oldest_first is what a
// client older than the field sends, and it gets what it always got: id
// order (the CLI and the HTTP API always set it).
func (s *Server) ListJobs(ctx context.Context, r *adminapi.TListJobsRequest) (*adminapi.TListJobsResponse, error) {
	if r == nil {
		r = &adminapi.TListJobsRequest{}
	}
	st, err := s.readState(ctx, r.GetConsistent())
	if err != nil {
		return nil, err
	}
	limit := int(r.GetLimit())
	if limit <= 0 {
		limit = defaultListLimit
	}
	if limit > maxListLimit {
		return nil, adminError(adminapi.TErrorCode_INVALID, "limit %d is above %d", limit, maxListLimit)
	}
	f := raftfsm.JobFilter{DB: r.GetDb(), Table: r.GetTable(), Unresolved: r.GetUnresolved(), Held: r.GetHeld()}
	for _, field := range []struct{ name, v string }{{"catalog", r.GetCatalog()}, {"db", r.GetDb()}, {"table", r.GetTable()},
		{"state", r.GetState()}, {"mutation_type", r.GetMutationType()}, {"index_type", r.GetIndexType()}} {
		if err := job.CheckBytes(field.name, field.v, job.MaxNameBytes); err != nil {
			return nil, toAdminError(err)
		}
	}
	oldest, err := listOrder(r)
	if err != nil {
		return nil, err
	}
	if err := parseTypeFilters(r, &f); err != nil {
		return nil, err
	}
	if name := r.GetCatalog(); name != "" {
		cat, ok := st.Catalog(name)
		if !ok {
			return &adminapi.TListJobsResponse{Jobs: []*adminapi.TJobView{}}, nil
		}
		f.CatalogID = cat.ID
	}
	if state := r.GetState(); state != "" {
		if err := parseStateFilter(state, &f); err != nil {
			return nil, toAdminError(err)
		}
	}
	var recs []*job.Record
	var more bool
	if oldest {
		recs, more = st.ListJobs(f, r.GetAfterJobID(), limit)
	} else {
		recs, more = st.ListJobsNewestFirst(f, r.GetBeforeJobID(), limit)
	}
	out := &adminapi.TListJobsResponse{Jobs: make([]*adminapi.TJobView, 0, len(recs))}
	if w := s.staleWarning(r.GetConsistent()); w != "" {
		out.StaleWarning = &w
	}
	for _, rec := range recs {
		out.Jobs = append(out.Jobs, view(st, rec))
	}
	if more && len(recs) > 0 {
		next := recs[len(recs)-1].JobID
		if oldest {
			out.NextAfterJobID = &next
		} else {
			out.NextBeforeJobID = &next
		}
	}
	return out, nil
}

// listOrder decides a list's direction and checks its cursor: after_job_id
// pages oldest first, before_job_id newest first, never both.
func listOrder(r *adminapi.TListJobsRequest) (oldest bool, err error) {
	oldest = !r.IsSetOldestFirst() || r.GetOldestFirst()
	switch {
	case r.IsSetAfterJobID() && r.IsSetBeforeJobID():
		return false, adminError(adminapi.TErrorCode_INVALID,
			"after_job_id and before_job_id cannot be combined: after_job_id pages oldest first, before_job_id newest first")
	case r.IsSetAfterJobID() && !oldest:
		return false, adminError(adminapi.TErrorCode_INVALID,
			"after_job_id pages oldest first; with oldest_first false, page with before_job_id")
	case r.IsSetBeforeJobID() && oldest:
		return false, adminError(adminapi.TErrorCode_INVALID,
			"before_job_id pages newest first; with oldest_first, page with after_job_id")
	case r.IsSetAfterJobID() && r.GetAfterJobID() < 0:
		return false, adminError(adminapi.TErrorCode_INVALID, "after_job_id must not be negative, got %d", r.GetAfterJobID())
	case r.IsSetBeforeJobID() && r.GetBeforeJobID() < 1:
		return false, adminError(adminapi.TErrorCode_INVALID, "before_job_id must be a job id (1 or more), got %d", r.GetBeforeJobID())
	case r.GetSinceMs() < 0:
		return false, adminError(adminapi.TErrorCode_INVALID, "since_ms must not be negative, got %d", r.GetSinceMs())
	}
	return oldest, nil
}

// parseTypeFilters reads since_ms, mutation_type (CREATE, REPLACE — also
// spelled CREATE_OR_REPLACE —, DROP, OPTIMIZE) and index_type (a supported
// type), case-insensitively.
func parseTypeFilters(r *adminapi.TListJobsRequest, f *raftfsm.JobFilter) error {
	f.SinceMs = r.GetSinceMs()
	if v := strings.ToUpper(strings.TrimSpace(r.GetMutationType())); v != "" {
		for _, mt := range []job.MutationType{job.Create, job.Replace, job.Drop, job.Optimize} {
			if v == mt.String() {
				f.MutationType = mt
			}
		}
		if v == "CREATE_OR_REPLACE" {
			f.MutationType = job.Replace
		}
		if f.MutationType == 0 {
			return adminError(adminapi.TErrorCode_INVALID, "unknown mutation_type %s (one of CREATE, REPLACE, DROP, OPTIMIZE)", quote(r.GetMutationType()))
		}
	}
	if v := strings.ToUpper(strings.TrimSpace(r.GetIndexType())); v != "" {
		if !slices.Contains(job.SupportedIndexTypes, v) {
			return adminError(adminapi.TErrorCode_INVALID, "unknown index_type %s (one of %s)",
				quote(r.GetIndexType()), strings.Join(job.SupportedIndexTypes, ", "))
		}
		f.IndexType = v
	}
	return nil
}

// parseStateFilter reads one state or several, comma-separated: a mutation
// state name, or "refresh:NAME" (a refresh state; RUNNING exists in both
// machines). A name that is only a refresh state (REQUIRED, DONE, FAILED,
// NOT_REQUIRED) needs no prefix. Several mutation states match any of them;
// mutation and refresh states together must both match.
func parseStateFilter(v string, f *raftfsm.JobFilter) error {
	parts := strings.Split(v, ",")
	if len(parts) == 1 {
		return parseOneState(v, f)
	}
	for _, p := range parts {
		var one raftfsm.JobFilter
		if err := parseOneState(p, &one); err != nil {
			return err
		}
		if one.MutationState != 0 {
			f.MutationStates = append(f.MutationStates, one.MutationState)
		}
		if one.RefreshState != 0 {
			f.RefreshStates = append(f.RefreshStates, one.RefreshState)
		}
	}
	return nil
}

func parseOneState(v string, f *raftfsm.JobFilter) error {
	u := strings.ToUpper(strings.TrimSpace(v))
	if strings.HasPrefix(u, strings.ToUpper(refreshStatePrefix)) {
		rs, ok := job.ParseRefreshState(strings.TrimPrefix(u, strings.ToUpper(refreshStatePrefix)))
		if !ok {
			return job.Errorf(job.CodeInvalid, "unknown refresh state %q", v)
		}
		f.RefreshState = rs
		return nil
	}
	if ms, ok := job.ParseMutationState(u); ok {
		f.MutationState = ms
		return nil
	}
	if rs, ok := job.ParseRefreshState(u); ok {
		f.RefreshState = rs
		return nil
	}
	return job.Errorf(job.CodeInvalid, "unknown state %q (mutation: PENDING RUNNING RESOLVING COMMITTED NOT_COMMITTED UNKNOWN CANCELLED; refresh: refresh:NOT_REQUIRED|REQUIRED|RUNNING|DONE|FAILED)", v)
}

// ShowJob returns one job.
func (s *Server) ShowJob(ctx context.Context, id int64, consistent bool) (*adminapi.TJobView, error) {
	st, err := s.readState(ctx, consistent)
	if err != nil {
		return nil, err
	}
	rec, ok := st.Job(id)
	if !ok {
		return nil, adminError(adminapi.TErrorCode_NOT_FOUND, "job %d does not exist", id)
	}
	v := view(st, rec)
	if w := s.staleWarning(consistent); w != "" {
		v.StaleWarning = &w
	}
	return v, nil
}

// ResolveJob force-releases an UNKNOWN job (DESIGN.md §9). Retrying an
// already released job succeeds without a new entry.
func (s *Server) ResolveJob(ctx context.Context, r *adminapi.TResolveRequest) (*adminapi.TResolveResponse, error) {
	if r == nil {
		return nil, adminError(adminapi.TErrorCode_INVALID, "missing request")
	}
	if !r.ForceRelease {
		return nil, adminError(adminapi.TErrorCode_INVALID, "resolve needs --force-release: it is the only resolution of an UNKNOWN job")
	}
	if strings.TrimSpace(r.Comment) == "" {
		return nil, adminError(adminapi.TErrorCode_INVALID, "a comment is required: say why the job may be released")
	}
	if err := job.CheckBytes("comment", r.Comment, job.MaxNoteBytes); err != nil {
		return nil, toAdminError(err)
	}
	actor := actorOf(ctx, r.GetActor())
	if err := job.ValidateActor("actor", actor); err != nil {
		return nil, toAdminError(err)
	}
	if err := s.current(ctx); err != nil {
		return nil, err
	}
	rec, ok := s.d.Reader.State().Job(r.JobID)
	if !ok {
		return nil, adminError(adminapi.TErrorCode_NOT_FOUND, "job %d does not exist", r.JobID)
	}
	if rec.ForceReleased {
		return &adminapi.TResolveResponse{Job: view(s.d.Reader.State(), rec), AlreadyReleased: true}, nil
	}
	if rec.MutationState != job.Unknown {
		return nil, adminError(adminapi.TErrorCode_INVALID, "job %d is %s; only UNKNOWN jobs can be force-released", r.JobID, rec.MutationState)
	}
	resp, err := s.propose(ctx, raftfsm.CmdForceRelease, &journal.TForceReleaseCommand{
		NowMs: s.nowMs(), JobID: r.JobID, Actor: actor, Note: r.Comment, Warning: ForceReleaseWarning,
		Audit: auditActor(ctx, r.GetActor()),
	}, journal.TApplyCode_NOOP)
	if err != nil {
		return nil, err
	}
	s.d.Logger.Warn("job force-released", zap.Int64("job_id", r.JobID), zap.String("actor", actor))
	st := s.d.Reader.State()
	rec, _ = st.Job(r.JobID)
	if rec == nil {
		return nil, adminError(adminapi.TErrorCode_NOT_FOUND, "job %d does not exist", r.JobID)
	}
	return &adminapi.TResolveResponse{Job: view(st, rec), AlreadyReleased: resp.Code == journal.TApplyCode_NOOP}, nil
}

// CancelJob cancels a PENDING job: it releases fence and quota.
func (s *Server) CancelJob(ctx context.Context, r *adminapi.TCancelRequest) (*adminapi.TJobView, error) {
	if r == nil {
		return nil, adminError(adminapi.TErrorCode_INVALID, "missing request")
	}
	actor := actorOf(ctx, r.GetActor())
	if err := job.ValidateActor("actor", actor); err != nil {
		return nil, toAdminError(err)
	}
	if err := s.current(ctx); err != nil {
		return nil, err
	}
	// The state precondition, decided on current state as resolve's is,
	// with the same code: INVALID (the request does not fit the job). A
	// change between this check and the apply is the FSM's CAS_FAILED:
	// CONFLICT, a concurrent change won.
	if rec, ok := s.d.Reader.State().Job(r.JobID); ok && rec.MutationState != job.Pending && rec.MutationState != job.Cancelled {
		return nil, adminError(adminapi.TErrorCode_INVALID,
			"job %d is %s; only a PENDING job can be cancelled (an UNKNOWN one can be force-released)", r.JobID, rec.MutationState)
	}
	if _, err := s.propose(ctx, raftfsm.CmdCancel, &journal.TCancelCommand{NowMs: s.nowMs(), JobID: r.JobID, Actor: actor, Audit: auditActor(ctx, r.GetActor())},
		journal.TApplyCode_NOOP); err != nil {
		return nil, err
	}
	st := s.d.Reader.State()
	rec, ok := st.Job(r.JobID)
	if !ok {
		return nil, adminError(adminapi.TErrorCode_NOT_FOUND, "job %d does not exist", r.JobID)
	}
	return view(st, rec), nil
}

func actorOr(a string) string {
	if a == "" {
		return "operator"
	}
	return a
}

// view is what an operator sees of a job: never the locator or the secret.
func view(st *raftfsm.State, r *job.Record) *adminapi.TJobView {
	v := &adminapi.TJobView{JobID: r.JobID}
	str, i64 := nonEmpty, nonZero
	b := func(x bool) *bool { return &x }
	v.Creator, v.Rev, v.CreateTimeMs, v.UpdateTimeMs = str(r.Creator), &r.Rev, i64(r.CreateTimeMs), i64(r.UpdateTimeMs)
	v.ClaimedCreator = str(r.ClaimedCreator)
	v.CatalogID, v.Db, v.Table = i64(r.CatalogID), str(r.DB), str(r.Table)
	if c, ok := st.CatalogByID(r.CatalogID); ok {
		v.Catalog = str(c.Name)
	}
	v.IndexName, v.MutationType = str(r.DisplayIndexName), str(r.MutationType.String())
	v.IfNotExists, v.IfExists = b(r.IfNotExists), b(r.IfExists)
	v.IndexType, v.Column, v.PropertiesJSON = str(r.IndexType), str(r.Column), str(r.PropertiesJSON)
	v.AdmittedDatasetVersion = &r.AdmittedDatasetVersion
	v.MutationState, v.RefreshState = str(r.MutationState.String()), str(r.RefreshState.String())
	if r.Result.Code != 0 {
		v.ResultCode = str(r.Result.Code.String())
		v.CompletionReason = str(r.Result.Reason.String())
		v.ResultMessage = str(r.Result.Message)
		v.ExternalMetadataAdvanced = b(r.Result.ExternalMetadataAdvanced)
	}
	if r.InvocationID != "" {
		v.BackendID, v.ProcessEpoch, v.DispatchRevision = &r.BackendID, &r.ProcessEpoch, &r.DispatchRevision
		v.InvocationID, v.DeadlineMs, v.LeaderTerm = str(r.InvocationID), &r.DeadlineMs, &r.LeaderTerm
	}
	v.HoldsSlot = b(r.HoldsPossibleLiveSlot())
	v.TerminationProof = str(r.TerminationProof.String())
	v.ForceReleased = b(r.ForceReleased)
	if r.ForceReleased {
		v.ForceActor, v.ForceTimeMs, v.ForceNote, v.ForceWarning = str(r.ForceActor), i64(r.ForceTimeMs), str(r.ForceNote), str(r.ForceWarning)
	}
	v.RefreshFailureTimeMs = i64(r.RefreshFailureTimeMs)
	v.Unresolved = b(r.Unresolved())
	v.Provider = str(r.Provider)
	v.CancelActor = str(r.CancelActor)
	if r.RestoreHold {
		v.RestoreHold = b(true)
	}
	// Evidence (DESIGN.md §13).
	if r.DispatchAttempts != 0 {
		v.DispatchAttempts = &r.DispatchAttempts
	}
	v.IndexUUID, v.AdmittedIndexUUID = str(r.IndexUUID), str(r.AdmittedIndexUUID)
	v.TerminationMessage, v.BuildPhase = str(r.TerminationMessage), str(r.BuildPhase)
	v.ResolveAfterMs = i64(r.ResolveAfterMs)
	buildView(v, r)
	// OPTIMIZE's result: every index before and after, and the version.
	v.OptimizedIndexes = jobwire.OptimizedToWire(job.DecodeOptimized(r.OptimizedIndexes))
	v.ResultDatasetVersion = i64(r.ResultDatasetVersion)
	return v
}

// buildView fills what the current dispatch's build cost and said: the
// index directory a NOT_COMMITTED build left behind, the dispatch time
// (master clock), the worker's start and finish times, wall time and peak
// memory (backend clock) and its elapsed time at the last progress report.
func buildView(v *adminapi.TJobView, r *job.Record) {
	str, i64 := nonEmpty, nonZero
	v.LeftoverIndexUUID = str(r.LeftoverIndexUUID)
	v.DispatchTimeMs = i64(r.DispatchTimeMs)
	res := r.Resources
	v.StartTimeMs, v.FinishTimeMs, v.WallMs = i64(res.StartTimeMs), i64(res.FinishTimeMs), i64(res.WallMs)
	v.PeakMemoryBytes, v.PeakMemorySource = i64(res.PeakMemoryBytes), str(res.PeakMemorySource)
	if r.ProgressTimeMs != 0 {
		e := r.BuildElapsedMs
		v.BuildElapsedMs, v.ProgressTimeMs = &e, i64(r.ProgressTimeMs)
	}
}

func quote(s string) string { return strconv.Quote(s) }
func itoa(i int64) string   { return strconv.FormatInt(i, 10) }

// nonEmpty and nonZero leave a zero value unset in a view.
func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func nonZero(x int64) *int64 {
	if x == 0 {
		return nil
	}
	return &x
}
