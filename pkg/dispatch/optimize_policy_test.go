package dispatch

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/options"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// policyFake is the admin side of the policy: a backend's inspect answers
// (unindexed rows per table, of one index "vec") and admission straight
// into the env's FSM, which decides the fence.
type policyFake struct {
	e         *env
	mu        sync.Mutex
	unindexed map[string]int64
	inspected []string
	// during, when set, runs inside each inspect (what changes while the
	// backend reads the dataset).
	during func()
}

func (f *policyFake) inspect(_ context.Context, catalog, db, table string) (*adminapi.TDatasetView, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inspected = append(f.inspected, db+"."+table)
	n := f.unindexed[table]
	if f.during != nil {
		f.during()
	}
	return &adminapi.TDatasetView{DatasetVersion: 3, Indexes: []*wire.TLanceIndexInfo{
		{Name: "id_idx", IndexType: "BTREE", UnindexedRows: thrift.Int64Ptr(0)},
		{Name: "vec", IndexType: "IVF_PQ", UnindexedRows: thrift.Int64Ptr(n)}}}, nil
}

func (f *policyFake) admit(_ context.Context, r *adminapi.TOptimizeRequest) (*adminapi.TAdmitResponse, error) {
	loc, err := job.DatasetLocator(testRoot, r.Db, r.Table)
	if err != nil {
		return nil, err
	}
	rec := job.NewOptimize(f.e.catalogID, r.Db, r.Table, loc, r.GetCreator())
	resp := f.e.propose(raftfsm.CmdAdmit, &journal.TAdmitCommand{NowMs: f.e.nowMs(), Job: raftfsm.RecordToThrift(rec),
		AdmitRules: thrift.Int32Ptr(raftfsm.AdmitRulesRecheck)})
	switch resp.Code {
	case journal.TApplyCode_OK:
	case journal.TApplyCode_FENCE_CONFLICT:
		return nil, &adminapi.TAdminError{Code: adminapi.TErrorCode_FENCE_CONFLICT, Message: resp.GetMessage(), JobID: resp.ConflictJobID}
	default:
		return nil, &adminapi.TAdminError{Code: adminapi.TErrorCode_INTERNAL, Message: resp.GetMessage()}
	}
	return &adminapi.TAdmitResponse{JobID: resp.ID}, nil
}

func (f *policyFake) inspects() int { f.mu.Lock(); defer f.mu.Unlock(); return len(f.inspected) }

func newPolicy(e *env, f *policyFake, set OptimizeSettings) *OptimizePolicy {
	return NewOptimizePolicy(OptimizePolicyDeps{Reader: e.fsm, Inspect: f.inspect, Admit: f.admit, Clock: e.clock.Now, Logger: e.d.log,
		Settings: func(c *raftfsm.Catalog) OptimizeSettings {
			if c.ID == e.catalogID {
				return set
			}
			return OptimizeSettings{}
		}})
}

// settle cancels a PENDING job: resolved, its fence released.
func (e *env) settle(id int64) {
	e.t.Helper()
	if resp := e.propose(raftfsm.CmdCancel, &journal.TCancelCommand{NowMs: e.nowMs(), JobID: id, Actor: "ops"}); resp.Code != journal.TApplyCode_OK {
		e.t.Fatalf("cancel %d: %v %s", id, resp.Code, resp.GetMessage())
	}
}

func TestOptimizePolicyAdmitsOverTheThresholdOncePerInterval(t *testing.T) {
	e := newEnv(t)
	f := &policyFake{e: e, unindexed: map[string]int64{"t1": 50}}
	e.settle(e.admitIn(e.catalogID, testRoot, "t1")) // lancemaster manages db.t1
	p := newPolicy(e, f, OptimizeSettings{UnindexedRows: 100, MinIntervalSecond: 3600})

	if got := p.RunOnce(e.ctx); len(got) != 0 || f.inspects() != 1 {
		t.Fatalf("under the threshold: admitted %v after %d inspects", got, f.inspects())
	}
	f.unindexed["t1"] = 150
	got := p.RunOnce(e.ctx)
	if len(got) != 1 {
		t.Fatalf("over the threshold: admitted %v", got)
	}
	opt := e.wantState(got[0], job.Pending)
	if !opt.IsOptimize() || opt.Creator != PolicyCreator || opt.Table != "t1" {
		t.Fatalf("admitted %+v", opt)
	}

	// Not a second while it runs: the dataset is not even inspected.
	n := f.inspects()
	if got := p.RunOnce(e.ctx); len(got) != 0 || f.inspects() != n {
		t.Fatalf("while the OPTIMIZE runs: admitted %v, %d inspects", got, f.inspects()-n)
	}
	// Not again before the interval since its admission, even once it
	// ended, and even by another leader's policy (the journal is the clock's source).
	e.settle(opt.JobID)
	e.clock.Advance(30 * time.Minute)
	other := newPolicy(e, f, OptimizeSettings{UnindexedRows: 100, MinIntervalSecond: 3600})
	if got := other.RunOnce(e.ctx); len(got) != 0 {
		t.Fatalf("before the interval: admitted %v", got)
	}
	e.clock.Advance(31 * time.Minute)
	if got := other.RunOnce(e.ctx); len(got) != 1 {
		t.Fatalf("after the interval: admitted %v", got)
	}
}

// A policy the operator changes while a pass inspects the dataset decides
// on the new settings: a raised interval or threshold admits nothing (the
// pass started with the old ones; before, it admitted on them).
func TestOptimizePolicyDecidesOnTheSettingsCurrentAtAdmission(t *testing.T) {
	for _, tc := range []struct {
		name        string
		start, then OptimizeSettings
	}{
		{"interval raised", OptimizeSettings{UnindexedRows: 100, MinIntervalSecond: 1}, OptimizeSettings{UnindexedRows: 100, MinIntervalSecond: 3600}},
		{"threshold raised", OptimizeSettings{UnindexedRows: 100, MinIntervalSecond: 1}, OptimizeSettings{UnindexedRows: 1000, MinIntervalSecond: 1}},
		{"policy off", OptimizeSettings{UnindexedRows: 100, MinIntervalSecond: 1}, OptimizeSettings{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			f := &policyFake{e: e, unindexed: map[string]int64{"t1": 150}}
			e.settle(e.admitIn(e.catalogID, testRoot, "t1"))
			var mu sync.Mutex
			set := tc.start
			p := NewOptimizePolicy(OptimizePolicyDeps{Reader: e.fsm, Inspect: f.inspect, Admit: f.admit, Clock: e.clock.Now, Logger: e.d.log,
				Settings: func(*raftfsm.Catalog) OptimizeSettings { mu.Lock(); defer mu.Unlock(); return set }})
			first := p.RunOnce(e.ctx) // over the threshold: the dataset's last OPTIMIZE
			if len(first) != 1 {
				t.Fatalf("first pass admitted %v", first)
			}
			e.settle(first[0])
			e.clock.Advance(time.Minute)
			f.during = func() { mu.Lock(); set = tc.then; mu.Unlock() }
			if got := p.RunOnce(e.ctx); len(got) != 0 {
				t.Fatalf("admitted %v on the settings the pass started with", got)
			}
		})
	}
}

// A FENCE_CONFLICT (an index job holds the dataset) is "not now".
func TestOptimizePolicyFenceConflictIsNotNow(t *testing.T) {
	e := newEnv(t)
	f := &policyFake{e: e, unindexed: map[string]int64{"t1": 500}}
	idx := e.admitIn(e.catalogID, testRoot, "t1") // PENDING: holds the dataset
	p := newPolicy(e, f, OptimizeSettings{UnindexedRows: 100})
	if got := p.RunOnce(e.ctx); len(got) != 0 || f.inspects() != 1 {
		t.Fatalf("fenced: admitted %v after %d inspects", got, f.inspects())
	}
	if n := len(e.fsm.State().PendingInIDOrder(0)); n != 1 {
		t.Fatalf("%d PENDING jobs, want the index job only", n)
	}
	if e.logs.FilterMessage("optimize policy: not now").Len() != 1 || e.logs.FilterLevelExact(zap.WarnLevel).Len() != 0 {
		t.Fatalf("a FENCE_CONFLICT must be \"not now\", not a failure:\n%s", e.logText())
	}
	e.settle(idx)
	if got := p.RunOnce(e.ctx); len(got) != 1 {
		t.Fatalf("once free: admitted %v", got)
	}
}

// Off by default, for datasets without index jobs, and while mutations
// are disabled: nothing is inspected.
func TestOptimizePolicyOff(t *testing.T) {
	e := newEnv(t)
	f := &policyFake{e: e, unindexed: map[string]int64{"t1": 500, "t2": 500}}
	e.settle(e.admitIn(e.catalogID, testRoot, "t1"))
	if got := newPolicy(e, f, OptimizeSettings{}).RunOnce(e.ctx); len(got) != 0 || f.inspects() != 0 {
		t.Fatalf("policy off: admitted %v after %d inspects", got, f.inspects())
	}
	if got := NewOptimizePolicy(OptimizePolicyDeps{Reader: e.fsm, Inspect: f.inspect, Admit: f.admit}).RunOnce(e.ctx); len(got) != 0 {
		t.Fatalf("default settings: admitted %v", got)
	}
	e.setOption(options.OptEnableMutation, "false")
	if got := newPolicy(e, f, OptimizeSettings{UnindexedRows: 1}).RunOnce(e.ctx); len(got) != 0 || f.inspects() != 0 {
		t.Fatalf("mutation disabled: admitted %v after %d inspects", got, f.inspects())
	}
}

// Run is a leader service: it returns when its term's context ends.
func TestOptimizePolicyRunStopsWithTheTerm(t *testing.T) {
	e := newEnv(t)
	f := &policyFake{e: e, unindexed: map[string]int64{}}
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- newPolicy(e, f, OptimizeSettings{UnindexedRows: 1}).Run(ctx) }()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}
