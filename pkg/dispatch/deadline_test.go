package dispatch

import (
	"testing"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/options"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// An IVF_HNSW_* job runs under lance_index_job_hnsw_execute_deadline_second,
// every other under lance_index_job_execute_deadline_second.
func TestHNSWJobsGetTheHNSWDeadline(t *testing.T) {
	e := newEnv(t)
	e.addBackend("b1:9060", 1)
	e.setOption(options.OptMaxInflightPerBackend, "10")
	e.setOption(options.OptExecuteDeadlineSecond, "5")
	e.setOption(options.OptHNSWExecuteDeadlineSecond, "50")
	btree := e.admit(1)[0]
	hnsw := *e.job(btree) // the same dataset, another index
	hnsw.IndexType, hnsw.Column, hnsw.PropertiesJSON = job.IndexIVFHNSWPQ, "vector", `{"m":16}`
	hnsw.DisplayIndexName, hnsw.NormalizedIndexName = "vec_hnsw", "vec_hnsw"
	hnsw.SchemaContract = `{"v":1,"fields":[{"id":1,"name":"vector","type":"fixed_size_list","nullable":false,"dim":8,"elem":"float32"}]}`
	resp := e.propose(raftfsm.CmdAdmit, &journal.TAdmitCommand{NowMs: e.nowMs(), Job: raftfsm.RecordToThrift(&hnsw)})
	if resp.Code != journal.TApplyCode_OK {
		t.Fatalf("admit: %v %s", resp.Code, resp.GetMessage())
	}
	e.heartbeat()
	e.round()
	if r := e.job(btree); r.MutationState != job.Running || r.DeadlineMs != e.nowMs()+5_000 {
		t.Errorf("BTREE job: %s, deadline %d; want now+5s %d", r.MutationState, r.DeadlineMs, e.nowMs()+5_000)
	}
	if r := e.job(resp.GetID()); r.MutationState != job.Running || r.DeadlineMs != e.nowMs()+50_000 {
		t.Errorf("IVF_HNSW_PQ job: %s, deadline %d; want now+50s %d", r.MutationState, r.DeadlineMs, e.nowMs()+50_000)
	}
}
