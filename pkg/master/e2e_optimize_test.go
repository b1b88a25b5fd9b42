package master_test

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/pkg/job"
)

// appendRows adds n rows to the rig's dataset: one new version, and rows
// its indexes do not cover yet.
func (r *evidenceRig) appendRows(n int) {
	r.t.Helper()
	args := []string{filepath.Join(r.builder, "make-dataset.js"), filepath.Join(r.lake, "db"), "items", "--append", "--rows", strconv.Itoa(n)}
	if out, err := exec.Command("node", args...).CombinedOutput(); err != nil {
		r.t.Fatalf("make-dataset --append: %v\n%s", err, out)
	}
}

// testPolicyInterval is the OPTIMIZE policy's pass period in the rig.
const testPolicyInterval = 200 * time.Millisecond

func (r *evidenceRig) optimize() int64 {
	return r.admit(func(a *adminapi.LanceMasterServiceClient, ctx context.Context) (*adminapi.TAdmitResponse, error) {
		return a.OptimizeDataset(ctx, &adminapi.TOptimizeRequest{Catalog: "lake", Db: "db", Table: "items"})
	})
}

// unindexed is every index's unindexed row count, as inspect reads it now.
func (r *evidenceRig) unindexed() map[string]int64 {
	out := map[string]int64{}
	r.call(func(ctx context.Context, a *adminapi.LanceMasterServiceClient) error {
		view, err := a.InspectDataset(ctx, "lake", "db", "items")
		for _, ix := range view.GetIndexes() {
			out[ix.Name] = ix.GetUnindexedRows()
		}
		return err
	})
	return out
}

// fenced runs an admission and expects FENCE_CONFLICT naming holder.
func (r *evidenceRig) fenced(what string, holder int64, admit func(ctx context.Context, a *adminapi.LanceMasterServiceClient) error) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := r.c.Client(r.l).Call(ctx, func(ctx context.Context, a *adminapi.LanceMasterServiceClient) error { return admit(ctx, a) })
	var ae *adminapi.TAdminError
	if !errors.As(err, &ae) || ae.Code != adminapi.TErrorCode_FENCE_CONFLICT || ae.GetJobID() != holder {
		r.t.Fatalf("%s: %v, want FENCE_CONFLICT naming job %d", what, err, holder)
	}
}

// OPTIMIZE with the real builder: after 3 appends of 2,000 rows both
// indexes have unindexed rows; the OPTIMIZE job ends COMMITTED with none
// left (per-index before/after journaled); while it runs an index job on
// the dataset is fenced, and while an index job runs an OPTIMIZE is; the
// catalog's policy admits one OPTIMIZE over its threshold, not a second
// while it runs nor before its interval.
func TestEndToEndOptimize(t *testing.T) {
	r := newEvidenceRig(t)
	vec := r.createIVFPQ("vec", false)
	bt := r.admit(func(a *adminapi.LanceMasterServiceClient, ctx context.Context) (*adminapi.TAdmitResponse, error) {
		return a.CreateIndex(ctx, &adminapi.TCreateIndexRequest{Catalog: "lake", Db: "db", Table: "items", IndexName: "id_bt",
			Column: "id", IndexType: "BTREE"})
	})
	settled := func(j *job.Record) bool { return j.MutationState.IsOutcome() && !j.Unresolved() }
	for _, id := range []int64{vec, bt} {
		if rec := r.waitJob(id, "the index to be built", settled); rec.MutationState != job.Committed {
			t.Fatalf("index job %d: %s %q", id, rec.MutationState, rec.Result.Message)
		}
	}
	start := time.Now()
	for i := 0; i < 3; i++ {
		r.appendRows(2000)
	}
	if got := r.unindexed(); got["vec"] != 6000 || got["id_bt"] != 6000 {
		t.Fatalf("after 3 appends of 2,000 rows: unindexed %v", got)
	}

	// While the OPTIMIZE runs, an index job on the dataset is fenced.
	r.holdAt("before-commit")
	opt := r.optimize()
	r.waitReached("before-commit")
	r.fenced("CREATE during OPTIMIZE", opt, func(ctx context.Context, a *adminapi.LanceMasterServiceClient) error {
		_, err := a.CreateIndex(ctx, &adminapi.TCreateIndexRequest{Catalog: "lake", Db: "db", Table: "items", IndexName: "text_bt",
			Column: "text", IndexType: "BTREE"})
		return err
	})
	r.release("before-commit")
	rec := r.waitJob(opt, "the OPTIMIZE to settle", settled)
	t.Logf("figure: OPTIMIZE after 3 appends of 2,000 rows (IVF_PQ + BTREE, through the masters), admitted to settled in %.1f s",
		time.Since(start).Seconds())
	if rec.MutationState != job.Committed || rec.ResultDatasetVersion <= rec.AdmittedDatasetVersion {
		t.Fatalf("OPTIMIZE: %s %q, version %d after admitted %d", rec.MutationState, rec.Result.Message, rec.ResultDatasetVersion, rec.AdmittedDatasetVersion)
	}
	ixs := job.DecodeOptimized(rec.OptimizedIndexes)
	if len(ixs) != 2 {
		t.Fatalf("optimized indexes %+v", ixs)
	}
	for _, ix := range ixs {
		if ix.Before == nil || ix.Before.UnindexedRows != 6000 || ix.After == nil || ix.After.UnindexedRows != 0 || ix.After.IndexedRows != 8000 {
			t.Errorf("%s: before %+v after %+v", ix.Name, ix.Before, ix.After)
		}
	}
	if got := r.unindexed(); got["vec"] != 0 || got["id_bt"] != 0 {
		t.Fatalf("after OPTIMIZE: unindexed %v", got)
	}

	// While an index job runs, an OPTIMIZE is fenced.
	r.holdAt("before-commit")
	c := r.admit(func(a *adminapi.LanceMasterServiceClient, ctx context.Context) (*adminapi.TAdmitResponse, error) {
		return a.CreateIndex(ctx, &adminapi.TCreateIndexRequest{Catalog: "lake", Db: "db", Table: "items", IndexName: "text_bt",
			Column: "text", IndexType: "BTREE"})
	})
	r.waitReached("before-commit")
	r.fenced("OPTIMIZE during CREATE", c, func(ctx context.Context, a *adminapi.LanceMasterServiceClient) error {
		_, err := a.OptimizeDataset(ctx, &adminapi.TOptimizeRequest{Catalog: "lake", Db: "db", Table: "items"})
		return err
	})
	r.release("before-commit")
	if rec := r.waitJob(c, "the CREATE to settle", settled); rec.MutationState != job.Committed {
		t.Fatalf("CREATE after OPTIMIZE: %s %q", rec.MutationState, rec.Result.Message)
	}

	// The policy: one OPTIMIZE over the threshold, not a second while it
	// runs, and none again before the interval.
	policyJobs := func() []*job.Record {
		var out []*job.Record
		for _, j := range allJobs(r.c.Masters[r.l].FSM().State()) {
			if j.IsOptimize() && j.Creator == "policy:optimize" {
				out = append(out, j)
			}
		}
		return out
	}
	policy := func(every int64) {
		r.call(func(ctx context.Context, a *adminapi.LanceMasterServiceClient) error {
			rows := int64(1000)
			_, err := a.UpdateCatalog(ctx, &adminapi.TUpdateCatalogRequest{Name: "lake", OptimizeUnindexedRows: &rows, OptimizeMinIntervalSecond: &every})
			return err
		})
	}
	r.holdAt("before-commit")
	r.appendRows(2000)
	// A short interval first: the operator's OPTIMIZE above counts too.
	policy(1)
	eventually(t, 60*time.Second, "the policy to admit an OPTIMIZE", func() bool { return len(policyJobs()) == 1 })
	r.waitReached("before-commit")
	quiet := func(what string) {
		// A negative: let the policy run several passes (every 200 ms here).
		time.Sleep(10 * testPolicyInterval)
		if n := len(policyJobs()); n != 1 {
			t.Fatalf("%s: %d policy OPTIMIZE jobs, want 1", what, n)
		}
	}
	quiet("while it runs")
	r.release("before-commit")
	if rec := r.waitJob(policyJobs()[0].JobID, "the policy's OPTIMIZE to settle", settled); rec.MutationState != job.Committed {
		t.Fatalf("policy OPTIMIZE: %s %q", rec.MutationState, rec.Result.Message)
	}
	policy(3600)
	r.appendRows(2000)
	quiet("within the interval, over the threshold again")
}
