package raftfsm

import (
	"errors"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/raftfsm/jobcodec"
)

// M0: admission. The leader has run DESIGN.md §5 steps 1-7 (gate, static
// validation, dataset snapshot, IF-preflight, schema contract, canonical
// properties); the FSM re-checks what only it can check atomically — the
// catalog, the fence and the three quotas — and allocates the job id, so two
// admissions racing through different masters cannot both pass.
//
// Any check added here must stay true for every entry already in a journal:
// a replica replaying an old log with a stricter check would diverge. So
// the re-checks of DESIGN.md §13.8 (the mutation gate and the option bounds
// as the replicated options stand at this point of the log) apply only to
// entries whose leader asked for them (admit_rules >= AdmitRulesRecheck).

// AdmitRulesRecheck is the admit_rules value with which Apply re-checks the
// mutation gate and the option-derived bounds (§13.8).
const AdmitRulesRecheck int32 = 2

func init() {
	register(CommandSpec{Type: CmdAdmit, Name: "admit", Forward: ForwardFromFollower, Wake: WakeDispatcher}, journal.NewTAdmitCommand, applyAdmit)
	registerDecoded(CommandSpec{Type: CmdAdmitBatch, Name: "admit_batch", Forward: ForwardFromFollower, Wake: WakeDispatcher},
		decodeAdmitBatch, applyAdmitBatch)
}

func applyAdmit(t *tx, c *journal.TAdmitCommand) (*journal.TApplyResponse, error) {
	if c.Job == nil {
		return respFail(journal.TApplyCode_INVALID, "admit command carries no job"), nil
	}
	return admit(t, jobcodec.RecordFromThrift(c.Job), c.GetAdmitRules())
}

// decodeAdmitBatch reads a CmdAdmitBatch body with jobcodec's direct
// decoder (jobcodec.DecodeAdmitBatch, held to the generated reader).
// Admission batches are most of a busy journal's entries, and every replica
// decodes each one: the generated reader allocated the struct, a pointer
// per optional field and each string before the record was built from them
// (docs/benchmarks.md).
func decodeAdmitBatch(body []byte) (*jobcodec.AdmitBatch, int64, error) {
	b, err := jobcodec.DecodeAdmitBatch(body)
	if err != nil {
		return nil, 0, err
	}
	return b, b.NowMs, nil
}

// applyAdmitBatch is M0 for concurrent admissions (the leader's group
// commit): every job in order, each exactly as its own CmdAdmit entry would
// be at this point of the log, with an item result per job. An item sees the
// items before it (their ids, fences and quota charges), so two jobs of one
// batch with the same fence key cannot both pass; a refused item changes
// nothing and does not stop the others.
func applyAdmitBatch(t *tx, c *jobcodec.AdmitBatch) (*journal.TApplyResponse, error) {
	items := make([]*journal.TItemResult_, 0, len(c.Jobs))
	for _, in := range c.Jobs {
		resp, err := admit(t, in, c.AdmitRules)
		if err != nil {
			return nil, err
		}
		items = append(items, admitItem(resp))
	}
	return respItems(items), nil
}

// admitItem carries a single admission's answer as a batch item: the
// allocated id (also as job_id) or the refusal with its fencing job id.
func admitItem(resp *journal.TApplyResponse) *journal.TItemResult_ {
	return &journal.TItemResult_{JobID: resp.GetID(), Code: resp.Code, Message: resp.Message,
		ID: resp.ID, ConflictJobID: resp.ConflictJobID}
}

// admit is one admission, the whole of CmdAdmit and one item of
// CmdAdmitBatch: in is the leader's record as decoded from the entry (admit
// rebuilds it in place). A guard failure returns before anything is written.
func admit(t *tx, in *job.Record, rules int32) (*journal.TApplyResponse, error) {
	r := admissionRecord(in, t.now)
	if err := validateAdmission(r); err != nil {
		return respFail(journal.TApplyCode_INVALID, "%s", errMessage(err)), nil
	}
	if rules >= AdmitRulesRecheck {
		if resp := recheckOptions(t, r); resp != nil {
			return resp, nil
		}
	}
	cat, ok := catalogByID(t.catalogs.Version(), r.CatalogID)
	if !ok {
		return respFail(journal.TApplyCode_NOT_FOUND, "catalog %d does not exist", r.CatalogID), nil
	}
	if r.Provider != cat.Provider {
		return respFail(journal.TApplyCode_INVALID, "job provider %q does not match catalog %q provider %q",
			r.Provider, cat.Name, cat.Provider), nil
	}
	// The leader derived the locator from the catalog root it read; if the
	// root changed since (allowed while no job was unresolved), the job would
	// target a dataset outside the catalog. Never show the locator.
	if want, err := job.DatasetLocator(cat.RootURI, r.DB, r.Table); err != nil || want != r.Locator {
		return respFail(journal.TApplyCode_CAS_FAILED,
			"the dataset of %s.%s is not under the current root of catalog %q (it changed since admission); admit again",
			r.DB, r.Table, cat.Name), nil
	}
	if resp := checkFenceAndQuota(t, r, cat); resp != nil {
		return resp, nil
	}
	t.m.lastJobID++
	r.JobID = t.m.lastJobID
	r.AdmitIndex = t.index // the timeline's ADMITTED (timeline.go)
	t.shareStrings(r)
	if err := t.put(nil, r); err != nil {
		return nil, err
	}
	return respID(r.JobID), nil
}

// recheckOptions is §13.8: the leader validated against its own replica,
// which may be behind; the gate and the bounds are decided here, on the
// options as the log stands. Once `config set enable_lance_index_mutation
// false` has been applied, no later admission entry admits anything.
func recheckOptions(t *tx, r *job.Record) *journal.TApplyResponse {
	o := t.m.resolved
	if !o.EnableMutation {
		return respFail(journal.TApplyCode_MUTATION_DISABLED,
			"index mutation is disabled (enable_lance_index_mutation is false); nothing was admitted")
	}
	if r.MutationType == job.Drop || r.IsOptimize() {
		return nil
	}
	lim := job.Limits(o.IndexLimits())
	if err := job.CheckPropertyBounds(r.PropertiesJSON, lim); err != nil {
		return respFail(journal.TApplyCode_INVALID, "%s", errMessage(err))
	}
	return nil
}

// admissionRecord keeps what the leader's record may set and sets every
// field the FSM owns: the id comes later, the states, rev and times are
// fixed, and nothing of a dispatch, result, release or cancel may be
// smuggled in.
func admissionRecord(in *job.Record, now int64) *job.Record {
	// The record is rebuilt in the decoded one's place (the literal is
	// evaluated before it is stored): one allocation per admitted job.
	*in = job.Record{
		Creator:                in.Creator,
		ClaimedCreator:         in.ClaimedCreator,
		CreateTimeMs:           now,
		UpdateTimeMs:           now,
		CatalogID:              in.CatalogID,
		DB:                     in.DB,
		Table:                  in.Table,
		Provider:               in.Provider,
		Locator:                in.Locator,
		DisplayIndexName:       in.DisplayIndexName,
		NormalizedIndexName:    in.NormalizedIndexName,
		MutationType:           in.MutationType,
		IfNotExists:            in.IfNotExists,
		IfExists:               in.IfExists,
		IndexType:              in.IndexType,
		Column:                 in.Column,
		PropertiesJSON:         in.PropertiesJSON,
		AdmittedDatasetVersion: in.AdmittedDatasetVersion,
		SchemaContract:         in.SchemaContract,
		AdmittedIndexUUID:      in.AdmittedIndexUUID,
		MutationState:          job.Pending,
		RefreshState:           job.RefreshNotRequired,
		TerminationProof:       job.ProofNone,
	}
	return in
}

// shareStrings replaces what an admitted record repeats from other jobs
// (its target, definition and creator) with the FSM's shared copies.
func (t *tx) shareStrings(r *job.Record) {
	p := t.strs
	r.Creator, r.DB, r.Table = p.Get(r.Creator), p.Get(r.DB), p.Get(r.Table)
	r.ClaimedCreator = p.Get(r.ClaimedCreator)
	r.Provider, r.Locator = p.Get(r.Provider), p.Get(r.Locator)
	r.DisplayIndexName = p.Get(r.DisplayIndexName)
	if r.NormalizedIndexName == r.DisplayIndexName {
		r.NormalizedIndexName = r.DisplayIndexName
	} else {
		r.NormalizedIndexName = p.Get(r.NormalizedIndexName)
	}
	r.IndexType, r.Column = p.Get(r.IndexType), p.Get(r.Column)
	r.PropertiesJSON, r.SchemaContract = p.Get(r.PropertiesJSON), p.Get(r.SchemaContract)
}

// validateAdmission checks the record's own content: byte bounds, mutation
// type, definition and fence identity.
func validateAdmission(r *job.Record) error {
	bounds := []struct {
		field, value string
		max          int
	}{
		{"creator", r.Creator, job.MaxNameBytes},
		{"claimed creator", r.ClaimedCreator, job.MaxNameBytes},
		{"db", r.DB, job.MaxNameBytes},
		{"table", r.Table, job.MaxNameBytes},
		{"provider", r.Provider, job.MaxNameBytes},
		{"dataset locator", r.Locator, job.MaxURIBytes},
		{"index name", r.DisplayIndexName, job.MaxNameBytes},
		{"normalized index name", r.NormalizedIndexName, job.MaxNameBytes},
		{"index type", r.IndexType, job.MaxNameBytes},
		{"column", r.Column, job.MaxNameBytes},
		{"properties", r.PropertiesJSON, job.MaxPropertiesBytes},
		{"schema contract", r.SchemaContract, job.MaxSchemaBytes},
		{"admitted index uuid", r.AdmittedIndexUUID, job.MaxIndexUUIDBytes},
	}
	for _, b := range bounds {
		if err := job.CheckBytes(b.field, b.value, b.max); err != nil {
			return err
		}
	}
	switch r.MutationType {
	case job.Create, job.Replace:
		if r.IndexType == "" || r.Column == "" {
			return job.Errorf(job.CodeInvalid, "%s needs an index type and a column", r.MutationType)
		}
	case job.Drop:
	case job.Optimize:
		if err := validateOptimize(r); err != nil {
			return err
		}
	default:
		return job.Errorf(job.CodeInvalid, "mutation type %d is not CREATE, REPLACE, DROP or OPTIMIZE", int32(r.MutationType))
	}
	if !r.HasFenceIdentity() {
		return job.Errorf(job.CodeInvalid, "the job has no fence identity (catalog, provider, dataset and index name are all required)")
	}
	if r.IsOptimize() {
		return nil
	}
	// The dataset fence name is OPTIMIZE's alone (no leader ever admitted
	// an index under the reserved prefix, so no journaled entry fails this).
	if r.NormalizedIndexName == job.OptimizeFenceName {
		return job.Errorf(job.CodeInvalid, "index name %q is reserved", r.DisplayIndexName)
	}
	// Only what cannot drift between releases (job.NormalizedNameConsistent):
	// the leader normalized the name once, with the pinned mapping.
	if !job.NormalizedNameConsistent(r.DisplayIndexName, r.NormalizedIndexName) {
		return job.Errorf(job.CodeInvalid, "normalized index name is not the lowercase of index name %q", r.DisplayIndexName)
	}
	return nil
}

// checkFenceAndQuota returns the rejection of an admission, or nil: a corrupt
// unresolved record blocks everything (fail-closed), then the fence (the
// same-name fence, and the dataset fence of OPTIMIZE: checkFence), then the per-table, per-catalog and global quotas (DESIGN.md §4).
func checkFenceAndQuota(t *tx, r *job.Record, cat *Catalog) *journal.TApplyResponse {
	b, o := t.books(), t.m.resolved
	if b.corrupts > 0 {
		return respFail(journal.TApplyCode_ADMISSION_BLOCKED,
			"admission is blocked: %d unresolved job(s) have no fence identity; resolve, cancel or force-release them (jobs list --state UNKNOWN)", b.corrupts)
	}
	h := b.tableHolds(r.Fence())
	if resp := checkFence(h, r, cat); resp != nil {
		return resp
	}
	if n := h.table; int64(n) >= o.MaxUnresolvedPerTable {
		return respFail(journal.TApplyCode_QUOTA_EXCEEDED,
			"table %s.%s of catalog %q already has %d unresolved jobs (lance_index_job_max_unresolved_per_table is %d)",
			r.DB, r.Table, cat.Name, n, o.MaxUnresolvedPerTable)
	}
	if n := b.catalogCount(r.CatalogID); int64(n) >= o.MaxUnresolvedPerCatalog {
		return respFail(journal.TApplyCode_QUOTA_EXCEEDED,
			"catalog %q already has %d unresolved jobs (lance_index_job_max_unresolved_per_catalog is %d)",
			cat.Name, n, o.MaxUnresolvedPerCatalog)
	}
	if int64(b.globals) >= o.MaxUnresolvedGlobal {
		return respFail(journal.TApplyCode_QUOTA_EXCEEDED,
			"the cluster already has %d unresolved jobs (lance_index_job_max_unresolved_global is %d)",
			b.globals, o.MaxUnresolvedGlobal)
	}
	return nil
}

// errMessage is a typed error's message without its code prefix: the apply
// response carries the code already.
func errMessage(err error) string {
	var je *job.Error
	if errors.As(err, &je) {
		return je.Message
	}
	return err.Error()
}
