package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/apache/thrift/lib/go/thrift"
	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/groupcommit"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/job/jobwire"
	"github.com/lancemaster/lancemaster/pkg/options"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// maxProperties bounds the property list of one request.
const maxProperties = 32

// admission is one create-index or drop-index request on its way through
// DESIGN.md §5, cheapest check first.
type admission struct {
	catalogName, db, table, indexName, creator string
	mutation                                   job.MutationType
	ifNotExists, ifExists                      bool
	column, indexType                          string
	props                                      []job.Property
}

// CreateIndex admits CREATE or CREATE OR REPLACE.
func (s *Server) CreateIndex(ctx context.Context, r *adminapi.TCreateIndexRequest) (*adminapi.TAdmitResponse, error) {
	if r == nil {
		return nil, adminError(adminapi.TErrorCode_INVALID, "missing request")
	}
	a := admission{
		catalogName: r.Catalog, db: r.Db, table: r.Table, indexName: r.IndexName,
		creator: r.GetCreator(), mutation: job.Create, ifNotExists: r.GetIfNotExists(),
		column: r.Column, indexType: r.IndexType,
	}
	if r.GetReplace() {
		a.mutation = job.Replace
	}
	if len(r.Properties) > maxProperties {
		return nil, adminError(adminapi.TErrorCode_INVALID, "%d properties given; at most %d are allowed", len(r.Properties), maxProperties)
	}
	for _, p := range r.Properties {
		if p == nil {
			return nil, adminError(adminapi.TErrorCode_INVALID, "a property is empty")
		}
		a.props = append(a.props, job.Property{Key: p.Key, Value: p.Value})
	}
	return s.admit(ctx, &a)
}

// DropIndex admits DROP INDEX.
func (s *Server) DropIndex(ctx context.Context, r *adminapi.TDropIndexRequest) (*adminapi.TAdmitResponse, error) {
	if r == nil {
		return nil, adminError(adminapi.TErrorCode_INVALID, "missing request")
	}
	a := admission{
		catalogName: r.Catalog, db: r.Db, table: r.Table, indexName: r.IndexName,
		creator: r.GetCreator(), mutation: job.Drop, ifExists: r.GetIfExists(),
	}
	return s.admit(ctx, &a)
}

func (s *Server) admit(ctx context.Context, a *admission) (*adminapi.TAdmitResponse, error) {
	validate := func(st *raftfsm.State) (*job.Record, *raftfsm.Catalog, error) {
		opts := st.Options()
		// 1. The mutation gate (an operator kill switch; admission only).
		if !opts.EnableMutation {
			return nil, nil, adminError(adminapi.TErrorCode_MUTATION_DISABLED,
				"index mutations are disabled (%s=false)", options.OptEnableMutation)
		}
		// 2. Static validation.
		return s.validateStatic(st, a, opts)
	}
	// 3. One pinned snapshot of the dataset through a backend: decide.go.
	plan := func(rec *job.Record, _ *raftfsm.Catalog, snap *job.Snapshot) (*admissionPlan, error) {
		// 4. IF-preflight.
		noop, err := preflight(a, rec, snap)
		if err != nil {
			return nil, err
		}
		if noop != "" {
			return &admissionPlan{noop: noop}, nil
		}
		// 5. Schema contract v1 of the indexed column.
		if a.mutation != job.Drop {
			f, err := snap.FindColumn(a.column)
			if err != nil {
				return nil, err
			}
			if rec.SchemaContract, err = job.ColumnContract(f, rec.IndexType, rec.PropertiesJSON); err != nil {
				return nil, err
			}
			rec.Column = f.Name
		}
		rec.AdmittedDatasetVersion = snap.Version
		// §13.7: the uuid N has at admission, if it exists, is the evidence a
		// REPLACE or a DROP is later judged by (outcome from the dataset).
		if ix, err := snap.FindIndex(a.indexName); err == nil && ix != nil {
			rec.AdmittedIndexUUID = ix.UUID
		}
		return &admissionPlan{rec: rec, conflict: func(jobID int64) string {
			return fenceHolderMessage(s.d.Reader.State(), rec.DisplayIndexName, jobID)
		}}, nil
	}
	return s.decideAdmission(ctx, validate, plan)
}

// journalAdmission is §5 step 8 of every admission (an index job or an
// OPTIMIZE) that p decided to journal: the group commit; the FSM checks
// fence and quotas and allocates the id. A FENCE_CONFLICT's message is
// p.conflict's, given the fencing job id.
func (s *Server) journalAdmission(ctx context.Context, p *admissionPlan) (*adminapi.TAdmitResponse, error) {
	rec := p.rec
	stampCreator(ctx, rec)
	id, err := s.proposeAdmission(ctx, rec)
	if err != nil {
		var ae *adminapi.TAdminError
		if errors.As(err, &ae) && ae.Code == adminapi.TErrorCode_FENCE_CONFLICT {
			ae.Message = p.conflict(ae.GetJobID())
		}
		return nil, err
	}
	msg := "job admitted"
	s.d.Logger.Info("job admitted", zap.Int64("job_id", id), zap.String("mutation", rec.MutationType.String()),
		zap.Int64("catalog_id", rec.CatalogID), zap.String("db", rec.DB), zap.String("table", rec.Table),
		zap.String("index", rec.DisplayIndexName), zap.Int64("admitted_dataset_version", rec.AdmittedDatasetVersion),
		zap.String("creator", rec.Creator))
	return &adminapi.TAdmitResponse{JobID: &id, Message: &msg}, nil
}

// Group commit of admissions (step 8): concurrent admissions share one
// CmdAdmitBatch entry; the FSM applies each exactly as its own CmdAdmit.
const (
	// maxAdmitBatchItems bounds the jobs of one entry.
	maxAdmitBatchItems = 256
	// maxAdmitBatchBytes keeps an entry, forwarded by a follower in one
	// Thrift frame, well under the 512 KiB frame bound (DESIGN.md §10): one
	// admitted job is at most ~80 KiB (a 64 KiB schema contract), a typical
	// one a few hundred bytes.
	maxAdmitBatchBytes = 256 << 10
	// maxAdmitFlights is how many admission entries may be in flight; raft
	// pipelines them, and under light load no admission waits for another.
	// Fewer flights make bigger entries: at 64-256 concurrent admissions, 2
	// cost ~10-20% less CPU per admission than 4 or 8 (three replicas on
	// shared cores pay every entry's fsync, bolt commit and transaction).
	maxAdmitFlights = 2
)

// newAdmitGroup returns the group commit of admissions.
func (s *Server) newAdmitGroup() *groupcommit.Group[*journal.TJobRecord] {
	return groupcommit.New(groupcommit.Config[*journal.TJobRecord]{
		MaxItems: maxAdmitBatchItems, MaxFlights: maxAdmitFlights, MaxBytes: maxAdmitBatchBytes,
		Size: jobWireBytes, Timeout: s.d.ApplyTimeout,
		Propose: func(ctx context.Context, jobs []*journal.TJobRecord) (*journal.TApplyResponse, error) {
			data, err := raftfsm.Encode(raftfsm.CmdAdmitBatch, &journal.TAdmitBatch{NowMs: s.nowMs(), Jobs: jobs,
				AdmitRules: thrift.Int32Ptr(raftfsm.AdmitRulesRecheck)})
			if err != nil {
				return nil, &encodeError{err}
			}
			resp, err := s.d.Proposer.Propose(ctx, data)
			if err != nil && !errors.Is(err, raftfsm.ErrNotLeader) {
				s.d.Logger.Warn("propose failed", zap.Uint8("command", uint8(raftfsm.CmdAdmitBatch)),
					zap.Int("jobs", len(jobs)), zap.Error(err))
			}
			return resp, err
		}})
}

// encodeError: a batch did not encode (a bug: every job comes from
// RecordToThrift).
type encodeError struct{ err error }

func (e *encodeError) Error() string { return e.err.Error() }
func (e *encodeError) Unwrap() error { return e.err }

// jobWireBytes bounds a job's share of an encoded batch from above: its
// strings plus room for ids, enums and field headers.
func jobWireBytes(j *journal.TJobRecord) int {
	n := 128
	for _, p := range []*string{j.Creator, j.Db, j.Table, j.Provider, j.Locator, j.DisplayIndexName,
		j.NormalizedIndexName, j.IndexType, j.Column, j.PropertiesJSON, j.SchemaContract} {
		if p != nil {
			n += len(*p) + 5 // a length varint
		}
	}
	return n
}

// proposeAdmission journals rec through the group commit and returns the
// allocated job id, or the typed error of the FSM's refusal (as propose
// does for a single command). The FSM's answer is read back here before
// returning (read-your-writes, also on a follower).
func (s *Server) proposeAdmission(ctx context.Context, rec *job.Record) (int64, error) {
	o := s.admits.Do(ctx, raftfsm.RecordToThrift(rec))
	if o.Err != nil {
		var ee *encodeError
		switch {
		case errors.As(o.Err, &ee):
			return 0, s.internal("encode command", o.Err)
		case errors.Is(o.Err, raftfsm.ErrNotLeader):
			return 0, s.notLeader()
		case errors.Is(o.Err, groupcommit.ErrBatchRefused):
			return 0, s.internal("admission batch", o.Err)
		case ctx.Err() != nil && !notApplied(o.Err):
			// The caller stopped waiting: the item may still be journaled.
			s.d.Logger.Warn("propose failed", zap.Uint8("command", uint8(raftfsm.CmdAdmitBatch)), zap.Error(o.Err))
			return 0, outcomeUnknownError("the admission")
		}
		return 0, toAdminError(o.Err)
	}
	if err := s.waitApplied(ctx, o.Index); err != nil {
		return 0, err
	}
	it := o.Item
	if it.Code == journal.TApplyCode_OK {
		if !it.IsSetID() {
			return 0, s.internal("admission batch", errors.New("an admitted item carries no job id"))
		}
		return it.GetID(), nil
	}
	return 0, applyError(&journal.TApplyResponse{Code: it.Code, Message: it.Message, ConflictJobID: it.ConflictJobID})
}

func fenceConflictMessage(display string, jobID int64) string {
	return "index " + quote(display) + " already has an unresolved job (job " + itoa(jobID) +
		"); wait for it to finish, cancel it if it is PENDING, or force-release it if it is UNKNOWN (jobs resolve --force-release)"
}

// validateStatic runs §5 step 2 and builds the record to admit.
func (s *Server) validateStatic(st *raftfsm.State, a *admission, opts options.Options) (*job.Record, *raftfsm.Catalog, error) {
	if err := job.ValidatePathName("catalog", a.catalogName); err != nil {
		return nil, nil, err
	}
	if err := job.ValidatePathName("db", a.db); err != nil {
		return nil, nil, err
	}
	if err := job.ValidatePathName("table", a.table); err != nil {
		return nil, nil, err
	}
	if err := job.ValidateIndexName(a.indexName); err != nil {
		return nil, nil, err
	}
	creator := a.creator
	if creator == "" {
		creator = "operator"
	}
	if err := job.ValidateActor("creator", creator); err != nil {
		return nil, nil, err
	}
	rec := &job.Record{
		Creator: creator, DB: a.db, Table: a.table, Provider: job.ProviderDirectory,
		DisplayIndexName: a.indexName, NormalizedIndexName: job.NormalizeIndexName(a.indexName),
		MutationType: a.mutation, IfNotExists: a.ifNotExists, IfExists: a.ifExists,
	}
	if a.mutation == job.Drop {
		if a.column != "" || a.indexType != "" || len(a.props) > 0 {
			return nil, nil, job.Errorf(job.CodeInvalid, "DROP takes no column, type or properties")
		}
	} else {
		if a.mutation == job.Replace && a.ifNotExists {
			return nil, nil, job.Errorf(job.CodeInvalid, "CREATE OR REPLACE cannot be combined with IF NOT EXISTS")
		}
		if err := job.ValidateColumnName(a.column); err != nil {
			return nil, nil, err
		}
		for _, p := range a.props {
			if err := job.CheckBytes("property key", p.Key, job.MaxNameBytes); err != nil {
				return nil, nil, err
			}
			if err := job.CheckBytes("property value", p.Value, job.MaxPropertiesBytes); err != nil {
				return nil, nil, err
			}
		}
		it, err := job.NormalizeIndexType(a.indexType)
		if err != nil {
			return nil, nil, err
		}
		pj, err := job.CanonicalProperties(it, a.props, job.Limits(opts.IndexLimits()))
		if err != nil {
			return nil, nil, err
		}
		rec.IndexType, rec.Column, rec.PropertiesJSON = it, a.column, pj
	}
	cat, ok := st.Catalog(a.catalogName)
	if !ok {
		return nil, nil, job.Errorf(job.CodeNotFound, "catalog %q does not exist", a.catalogName)
	}
	loc, err := job.DatasetLocator(cat.RootURI, a.db, a.table)
	if err != nil {
		return nil, nil, err
	}
	rec.CatalogID, rec.Locator = cat.ID, loc
	return rec, cat, nil
}

// preflight runs §5 step 4. It returns a non-empty no-op message when the
// request is satisfied already (IF NOT EXISTS / IF EXISTS), with no job.
func preflight(a *admission, rec *job.Record, snap *job.Snapshot) (string, error) {
	existing, err := snap.FindIndex(a.indexName)
	if err != nil {
		return "", err
	}
	switch a.mutation {
	case job.Create:
		if existing == nil {
			return "", nil
		}
		if !a.ifNotExists {
			return "", job.Errorf(job.CodeAlreadyExists, "index %q already exists", existing.Name)
		}
		if sameDefinition(existing, rec) {
			return "index " + quote(existing.Name) + " already exists with the same definition; no job", nil
		}
		return "", job.Errorf(job.CodeDefinitionMismatch, "index %q exists with a different definition", existing.Name)
	case job.Drop:
		if existing != nil {
			return "", nil
		}
		if a.ifExists {
			return "index " + quote(a.indexName) + " does not exist; no job", nil
		}
		return "", job.Errorf(job.CodeNotFound, "index %q does not exist", a.indexName)
	}
	// REPLACE: exists or not, but Lance cannot move an index to another
	// column under the same name; refusing here keeps the job from ending
	// UNKNOWN on the builder's invalid-argument error.
	if existing != nil && (len(existing.Columns) != 1 || !strings.EqualFold(existing.Columns[0], rec.Column)) {
		return "", job.Errorf(job.CodeInvalid, "index %q is on column %s; REPLACE cannot move it to column %q: drop it first",
			existing.Name, strings.Join(existing.Columns, ","), rec.Column)
	}
	return "", nil
}

// sameDefinition compares an existing index with a requested one: type,
// column and every property the request names. The backend may report more
// parameters than were asked for (its defaults); those are not compared. When
// the backend reports none, type and column decide.
func sameDefinition(ix *job.IndexInfo, rec *job.Record) bool {
	if !strings.EqualFold(ix.IndexType, rec.IndexType) || len(ix.Columns) != 1 || !strings.EqualFold(ix.Columns[0], rec.Column) {
		return false
	}
	if ix.PropertiesJSON == "" {
		return true
	}
	var have, want map[string]any
	if json.Unmarshal([]byte(ix.PropertiesJSON), &have) != nil || json.Unmarshal([]byte(rec.PropertiesJSON), &want) != nil {
		return false
	}
	for k, v := range want {
		got, reported := have[strings.ToLower(k)]
		if !reported {
			continue // the backend cannot read this parameter back (e.g. num_partitions)
		}
		if fmt.Sprint(got) != fmt.Sprint(v) {
			return false
		}
	}
	return true
}

var quotaOptions = [...]string{options.OptMaxUnresolvedPerTable, options.OptMaxUnresolvedPerCatalog, options.OptMaxUnresolvedGlobal}

func checkQuotaLimits(st *raftfsm.State) error {
	for _, k := range quotaOptions {
		if v, ok := st.OptionValue(k); ok {
			if _, err := options.Validate(k, v); err != nil {
				return job.Errorf(job.CodeInvalid, "quota option %s holds an invalid value; set it again", k)
			}
		}
	}
	return nil
}

// inspect takes the admission snapshot through a live backend (§5 step 3).
// Backends are tried in id order, live ones first; only a transport failure
// moves on to the next one, since a backend's answer about the dataset is the
// answer. Storage credentials travel only inside the request.
//
// It also returns the backend's answer as it came, for what the snapshot
// does not keep (the indexes' statistics: datasets inspect shows them).
func (s *Server) inspect(ctx context.Context, st *raftfsm.State, cat *raftfsm.Catalog, locator string) (*job.Snapshot, *wire.TInspectDatasetResponse, error) {
	backends := st.Backends()
	if len(backends) == 0 {
		return nil, nil, job.Errorf(job.CodeUnavailable, "no backend is registered to inspect the dataset; add one with `backends add`")
	}
	if s.d.BackendView != nil {
		live := backends[:0:0]
		var rest []*raftfsm.Backend
		for _, b := range backends {
			if alive, _, known := s.d.BackendView(b.ID); known && alive {
				live = append(live, b)
			} else {
				rest = append(rest, b)
			}
		}
		backends = append(live, rest...)
	}
	opts, err := s.d.Credentials.Resolve(cat.CredentialsRef)
	if err != nil {
		// The error names the reference, never the content.
		return nil, nil, job.Errorf(job.CodeInvalid, "credentials of catalog %q cannot be read: %v", cat.Name, err)
	}
	var lastErr error
	for _, b := range backends {
		ictx, cancel := context.WithTimeout(ctx, s.d.InspectTimeout)
		timeout := s.d.InspectTimeout.Milliseconds()
		resp, err := s.d.Backends.Inspect(ictx, b.Address, &wire.TInspectDatasetRequest{
			DatasetURI: locator, StorageOptions: opts, TimeoutMs: &timeout})
		cancel()
		if err != nil {
			lastErr = err
			s.d.Logger.Warn("inspect: backend unreachable", zap.Int64("backend_id", b.ID), zap.Error(err))
			continue
		}
		snap, err := snapshotFromWire(b.ID, resp)
		return snap, resp, err
	}
	s.d.Logger.Warn("inspect: no backend answered", zap.Int("backends", len(backends)), zap.Error(lastErr))
	return nil, nil, job.Errorf(job.CodeUnavailable, "no backend could be reached to inspect the dataset (%d tried)", len(backends))
}

// snapshotFromWire checks and converts an inspect answer.
func snapshotFromWire(backendID int64, r *wire.TInspectDatasetResponse) (*job.Snapshot, error) {
	if r == nil || r.Status == nil {
		return nil, job.Errorf(job.CodeInspectFailed, "backend %d answered inspect without a status", backendID)
	}
	if r.Status.StatusCode != wire.TStatusCode_OK {
		msg := ""
		if len(r.Status.ErrorMsgs) > 0 {
			msg = ": " + job.TruncateMessage(r.Status.ErrorMsgs[0])
		}
		return nil, job.Errorf(job.CodeInspectFailed, "backend %d could not inspect the dataset (%s)%s", backendID, r.Status.StatusCode, msg)
	}
	if !r.IsSetDatasetVersion() || r.GetDatasetVersion() < 0 {
		return nil, job.Errorf(job.CodeInspectFailed, "backend %d answered inspect without a dataset version", backendID)
	}
	return jobwire.Snapshot(r), nil
}
