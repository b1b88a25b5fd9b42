package dispatch

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// PolicyCreator is the creator of the OPTIMIZE jobs the policy admits.
const PolicyCreator = "policy:optimize"

// Bounds of the OPTIMIZE policy.
const (
	// DefaultOptimizePolicyInterval is the time between two passes.
	DefaultOptimizePolicyInterval = time.Minute
	// maxPolicyInspects bounds the datasets one pass inspects; the datasets
	// whose last OPTIMIZE is oldest go first, so every one gets its turn.
	maxPolicyInspects = 64
)

// OptimizeSettings are a catalog's OPTIMIZE policy settings.
type OptimizeSettings struct {
	// UnindexedRows: admit an OPTIMIZE for a dataset where some index has
	// more unindexed rows than this; 0 (the default) turns the policy off.
	UnindexedRows int64
	// MinIntervalSecond: at most one OPTIMIZE per dataset per interval,
	// counted from the admission of its last one in the journal.
	MinIntervalSecond int64
}

// catalogOptimizeSettings reads a catalog's policy settings from its
// record. The catalog record fields (optimize_unindexed_rows,
// optimize_min_interval_second) come with the catalog change of this
// release; until they are on raftfsm.Catalog the policy is off.
func catalogOptimizeSettings(c *raftfsm.Catalog) OptimizeSettings {
	return OptimizeSettings{UnindexedRows: c.OptimizeUnindexedRows, MinIntervalSecond: c.OptimizeMinIntervalSecond}
}

// OptimizePolicyDeps are what the OPTIMIZE policy needs. Inspect and Admit
// are the admin API's own InspectDataset and OptimizeDataset: a policy
// OPTIMIZE takes the path of an operator's (the mutation gate, one pinned
// snapshot, the group commit with admit_rules 2, the fence and the quotas
// decided by the FSM).
type OptimizePolicyDeps struct {
	Reader  raftfsm.Reader
	Inspect func(ctx context.Context, catalog, db, table string) (*adminapi.TDatasetView, error)
	Admit   func(ctx context.Context, r *adminapi.TOptimizeRequest) (*adminapi.TAdmitResponse, error)
	// Settings reads a catalog's policy settings; nil = the catalog record's.
	Settings func(*raftfsm.Catalog) OptimizeSettings
	Clock    func() time.Time
	Logger   *zap.Logger
	// Interval between passes; 0 = DefaultOptimizePolicyInterval.
	Interval time.Duration
}

// OptimizePolicy is the per-catalog OPTIMIZE policy, a leader service.
// For every catalog whose optimize_unindexed_rows is positive it inspects
// the datasets of that catalog that have index jobs in the journal (the
// datasets lancemaster manages) and admits one OPTIMIZE (creator
// PolicyCreator) for a dataset where some index's unindexed_rows exceeds
// the threshold:
//
//   - at most one per dataset at a time: the dataset fence ensures it (an
//     OPTIMIZE is exclusive with every job on its dataset); a
//     FENCE_CONFLICT means "not now". A dataset with an unresolved OPTIMIZE
//     in the journal is not even inspected;
//   - not more often than optimize_min_interval_second since the admission
//     of that dataset's last OPTIMIZE, read from the journal's records, so
//     the interval survives a change of leader (until retention GC removes
//     the record).
//
// Concurrency: Run is called by the cluster's leadership monitor, once per
// term; RunOnce may be called by one goroutine at a time.
type OptimizePolicy struct {
	d OptimizePolicyDeps
}

// NewOptimizePolicy returns the policy. Reader, Inspect and Admit are
// required.
func NewOptimizePolicy(d OptimizePolicyDeps) *OptimizePolicy {
	if d.Reader == nil || d.Inspect == nil || d.Admit == nil {
		panic("dispatch.NewOptimizePolicy: Reader, Inspect and Admit are required")
	}
	if d.Logger == nil {
		d.Logger = zap.NewNop()
	}
	if d.Clock == nil {
		d.Clock = time.Now
	}
	if d.Settings == nil {
		d.Settings = catalogOptimizeSettings
	}
	if d.Interval <= 0 {
		d.Interval = DefaultOptimizePolicyInterval
	}
	return &OptimizePolicy{d: d}
}

// Run runs a pass, then one per interval, until ctx is done. A pass's
// failures are logged, never returned: the next pass tries again.
func (p *OptimizePolicy) Run(ctx context.Context) error {
	for {
		p.RunOnce(ctx)
		t := time.NewTimer(p.d.Interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// policyDataset is one dataset the journal knows index jobs of.
type policyDataset struct {
	db, table       string
	lastOptimizeMs  int64 // the admission time of its last OPTIMIZE; 0: none
	optimizeRunning bool  // an unresolved OPTIMIZE holds its fence
}

// RunOnce is one pass over every catalog with the policy on. It returns
// the ids of the OPTIMIZE jobs it admitted.
func (p *OptimizePolicy) RunOnce(ctx context.Context) []int64 {
	st := p.d.Reader.State()
	if !st.Options().EnableMutation {
		return nil
	}
	nowMs := p.d.Clock().UnixMilli()
	var admitted []int64
	budget := maxPolicyInspects
	for _, cat := range st.Catalogs() {
		set := p.d.Settings(cat)
		if set.UnindexedRows <= 0 {
			continue
		}
		for _, ds := range policyDatasets(st, cat.ID) {
			if ctx.Err() != nil || budget == 0 {
				return admitted
			}
			if ds.optimizeRunning || (ds.lastOptimizeMs != 0 && nowMs-ds.lastOptimizeMs < set.MinIntervalSecond*1000) {
				continue
			}
			budget--
			id, stop := p.consider(ctx, cat, ds, set)
			if id != 0 {
				admitted = append(admitted, id)
			}
			if stop {
				return admitted
			}
		}
	}
	return admitted
}

// consider inspects one dataset and admits its OPTIMIZE when an index has
// more unindexed rows than the threshold. stop says the pass should end
// (the mutation gate closed, leadership lost).
func (p *OptimizePolicy) consider(ctx context.Context, cat *raftfsm.Catalog, ds policyDataset, set OptimizeSettings) (id int64, stop bool) {
	fields := []zap.Field{zap.Int64("catalog_id", cat.ID), zap.String("db", ds.db), zap.String("table", ds.table)}
	view, err := p.d.Inspect(ctx, cat.Name, ds.db, ds.table)
	if err == nil && view == nil {
		err = errors.New("inspect answered no view")
	}
	if err != nil {
		p.d.Logger.Info("optimize policy: the dataset could not be inspected; next pass", append(fields, zap.Error(err))...)
		return 0, adminCode(err) == adminapi.TErrorCode_NOT_LEADER
	}
	// The operator may have changed the catalog's policy while the dataset
	// was inspected (raised the interval or the threshold, or turned it
	// off): the decision is made on the settings current now, not on those
	// the pass started with.
	cur, ok := p.d.Reader.State().CatalogByID(cat.ID)
	if !ok {
		return 0, false
	}
	set = p.d.Settings(cur)
	if set.UnindexedRows <= 0 || (ds.lastOptimizeMs != 0 && p.d.Clock().UnixMilli()-ds.lastOptimizeMs < set.MinIntervalSecond*1000) {
		return 0, false
	}
	worst, over := "", int64(0)
	for _, ix := range view.GetIndexes() {
		if ix == nil {
			continue
		}
		if n := ix.GetUnindexedRows(); n > set.UnindexedRows && n > over {
			worst, over = ix.Name, n
		}
	}
	if worst == "" {
		return 0, false
	}
	creator := PolicyCreator
	resp, err := p.d.Admit(ctx, &adminapi.TOptimizeRequest{Catalog: cat.Name, Db: ds.db, Table: ds.table, Creator: &creator})
	switch code := adminCode(err); {
	case err == nil:
		p.d.Logger.Info("optimize policy: OPTIMIZE admitted", append(fields, zap.Int64("job_id", resp.GetJobID()),
			zap.String("index", worst), zap.Int64("unindexed_rows", over), zap.Int64("threshold", set.UnindexedRows))...)
		return resp.GetJobID(), false
	case code == adminapi.TErrorCode_FENCE_CONFLICT, code == adminapi.TErrorCode_QUOTA_EXCEEDED:
		// Not now: another job holds the dataset (or the quota is full).
		p.d.Logger.Debug("optimize policy: not now", append(fields, zap.Stringer("code", code))...)
		return 0, false
	case code == adminapi.TErrorCode_MUTATION_DISABLED, code == adminapi.TErrorCode_NOT_LEADER:
		return 0, true
	}
	p.d.Logger.Warn("optimize policy: the OPTIMIZE was not admitted; next pass", append(fields, zap.Error(err))...)
	return 0, ctx.Err() != nil
}

// policyDatasets lists the datasets of a catalog that have index jobs in
// the journal, with their last OPTIMIZE; oldest last OPTIMIZE first (never
// optimized first), then by name. It walks the catalog's retained jobs
// (the jobs-by-catalog index) once per pass: O(jobs of the catalog), on the
// leader only, once per interval.
func policyDatasets(st *raftfsm.State, catalogID int64) []policyDataset {
	type key struct{ db, table string }
	byKey := map[key]*policyDataset{}
	indexed := map[key]bool{}
	st.EachJobOfCatalog(catalogID, func(r raftfsm.JobFacts) bool {
		k := key{r.DB, r.Table}
		ds := byKey[k]
		if ds == nil {
			ds = &policyDataset{db: r.DB, table: r.Table}
			byKey[k] = ds
		}
		if r.MutationType != job.Optimize {
			indexed[k] = true
			return true
		}
		ds.lastOptimizeMs = max(ds.lastOptimizeMs, r.CreateTimeMs)
		ds.optimizeRunning = ds.optimizeRunning || r.Unresolved
		return true
	})
	out := make([]policyDataset, 0, len(indexed))
	for k := range indexed {
		out = append(out, *byKey[k])
	}
	slices.SortFunc(out, func(a, b policyDataset) int {
		return cmp.Or(cmp.Compare(a.lastOptimizeMs, b.lastOptimizeMs), cmp.Compare(a.db, b.db), cmp.Compare(a.table, b.table))
	})
	return out
}

// adminCode is the code of an admin API error, or -1.
func adminCode(err error) adminapi.TErrorCode {
	var ae *adminapi.TAdminError
	if errors.As(err, &ae) {
		return ae.Code
	}
	return -1
}
