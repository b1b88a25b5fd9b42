package admin

import (
	"context"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/options"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// OptimizeDataset admits an OPTIMIZE job (DESIGN.md §14): compaction, then
// every index of CATALOG.DB.TABLE brought up to date. OPTIMIZE is a
// dataset-scoped job: its fence is the dataset, so it is exclusive with
// every index job on that dataset, and they with it (the FSM decides, at
// apply time, with the other fences and the quotas; an OPTIMIZE counts as
// one job).
//
// The steps are those of an index admission that apply to a dataset: the
// mutation gate, the catalog and table names, one pinned snapshot through a
// live backend (inspect: the dataset exists and its version is the
// admitted_dataset_version the worker starts from), the quota limits, and
// the group commit with admit_rules 2 (Apply re-checks the gate). There is
// no index name, column, type or properties; the creator is the caller's,
// "operator" when empty, as for create-index.
func (s *Server) OptimizeDataset(ctx context.Context, r *adminapi.TOptimizeRequest) (*adminapi.TAdmitResponse, error) {
	if r == nil {
		return nil, adminError(adminapi.TErrorCode_INVALID, "missing request")
	}
	validate := func(st *raftfsm.State) (*job.Record, *raftfsm.Catalog, error) {
		if !st.Options().EnableMutation {
			return nil, nil, adminError(adminapi.TErrorCode_MUTATION_DISABLED,
				"index mutations are disabled (%s=false)", options.OptEnableMutation)
		}
		return optimizeRecord(st, r)
	}
	plan := func(rec *job.Record, cat *raftfsm.Catalog, snap *job.Snapshot) (*admissionPlan, error) {
		rec.AdmittedDatasetVersion = snap.Version
		return &admissionPlan{rec: rec, conflict: func(jobID int64) string {
			return "dataset " + rec.DB + "." + rec.Table + " of catalog " + quote(cat.Name) +
				" has an unresolved job (job " + itoa(jobID) + "); an OPTIMIZE is exclusive with every job on its dataset: " +
				"wait for it to finish, cancel it if it is PENDING, or force-release it if it is UNKNOWN (jobs resolve --force-release)"
		}}, nil
	}
	return s.decideAdmission(ctx, validate, plan)
}

// optimizeRecord is the static validation of an OPTIMIZE request and the
// record to admit: no index name (its fence name is job.OptimizeFenceName),
// column, type or properties.
func optimizeRecord(st *raftfsm.State, r *adminapi.TOptimizeRequest) (*job.Record, *raftfsm.Catalog, error) {
	for _, f := range []struct{ field, v string }{{"catalog", r.Catalog}, {"db", r.Db}, {"table", r.Table}} {
		if err := job.ValidatePathName(f.field, f.v); err != nil {
			return nil, nil, err
		}
	}
	creator := r.GetCreator()
	if creator == "" {
		creator = "operator"
	}
	if err := job.ValidateActor("creator", creator); err != nil {
		return nil, nil, err
	}
	cat, ok := st.Catalog(r.Catalog)
	if !ok {
		return nil, nil, job.Errorf(job.CodeNotFound, "catalog %q does not exist", r.Catalog)
	}
	loc, err := job.DatasetLocator(cat.RootURI, r.Db, r.Table)
	if err != nil {
		return nil, nil, err
	}
	return job.NewOptimize(cat.ID, r.Db, r.Table, loc, creator), cat, nil
}

// fenceHolderMessage is the FENCE_CONFLICT message of an index admission
// (create-index, drop-index): an unresolved OPTIMIZE of the dataset is named
// as such, any other holder as the index's own job.
func fenceHolderMessage(st *raftfsm.State, display string, jobID int64) string {
	if holder, ok := st.Job(jobID); ok && holder.IsOptimize() {
		return "index " + quote(display) + " cannot be changed now: its dataset has an unresolved OPTIMIZE (job " + itoa(jobID) +
			"), which is exclusive with every index job on the dataset; wait for it to finish, cancel it if it is PENDING, or force-release it if it is UNKNOWN (jobs resolve --force-release)"
	}
	return fenceConflictMessage(display, jobID)
}
