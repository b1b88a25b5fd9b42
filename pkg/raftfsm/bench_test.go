package raftfsm

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"sync"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/hashicorp/raft"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/raftfsm/jobcodec"
)

// Benchmarks over DESIGN-scale state: 1,000,000 retained terminal jobs plus
// 1,000 PENDING, 200 RUNNING (holding slots on 100 backends) and 100 jobs
// waiting for a refresh. The fixture is a generated snapshot stream restored
// once (building it through Apply would take minutes); set
// LANCEMASTER_BENCH_JOBS to change the retained count. Run with
// `go test -run '^$' -bench . ./pkg/raftfsm`; -short skips them.

const (
	benchPending   = 1000
	benchRunning   = 200
	benchRefresh   = 100
	benchBackends  = 100
	benchCatalogs  = 10
	benchTables    = 1000 // per catalog
	benchNowMs     = 1_800_000_000_000
	benchRetention = 7 * 24 * 3600 * 1000
)

func benchRetained() int {
	if v, err := strconv.Atoi(os.Getenv("LANCEMASTER_BENCH_JOBS")); err == nil && v > 0 {
		return v
	}
	return 1_000_000
}

var bench struct {
	once sync.Once
	data []byte // the snapshot stream, generated once
	jobs int
	mu   sync.Mutex
	fsm  *FSM // restored from data on demand; dropped before the restore benchmark
}

// benchData returns the fixture snapshot stream.
func benchData(b *testing.B) []byte {
	if testing.Short() {
		b.Skip("heavy fixture; skipped with -short")
	}
	bench.once.Do(func() {
		var buf bytes.Buffer
		bench.jobs = writeBenchSnapshot(&buf, benchRetained())
		bench.data = buf.Bytes()
	})
	return bench.data
}

// benchFixture returns an FSM restored from the fixture, and the stream.
func benchFixture(b *testing.B) (*FSM, []byte) {
	data := benchData(b)
	bench.mu.Lock()
	defer bench.mu.Unlock()
	if bench.fsm == nil {
		f := New(nil)
		if err := f.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
			b.Fatal(err)
		}
		bench.fsm = f
	}
	return bench.fsm, data
}

// dropFixture lets the collector free the fixture FSM, so a measurement of
// heap and restore time does not pay for marking a second million jobs.
func dropFixture() {
	bench.mu.Lock()
	bench.fsm = nil
	bench.mu.Unlock()
}

// benchRecord is a realistic record: shared strings (tables, properties,
// contracts) repeat as in a real cluster; invocation ids and secrets do not.
func benchRecord(id int64) *job.Record {
	cat := id%benchCatalogs + 1
	table := "t" + strconv.FormatInt(id/benchCatalogs%benchTables, 10)
	r := newJob(cat, "s3://bucket/c"+strconv.FormatInt(cat, 10), "db", table,
		"idx_"+strconv.FormatInt(id%50, 10), job.Create)
	if id%3 == 0 {
		r.IndexType, r.Column = job.IndexIVFPQ, "embedding"
		r.PropertiesJSON = `{"metric":"l2","num_bits":8,"num_partitions":256,"num_sub_vectors":16}`
		r.SchemaContract = `{"v":1,"fields":[{"id":3,"name":"embedding","type":"fixed_size_list","nullable":true,"dim":768,"elem":"float32"}]}`
	}
	r.JobID, r.Rev = id, 4
	r.CreateTimeMs = benchNowMs - 2*benchRetention + id*1000
	r.UpdateTimeMs = r.CreateTimeMs + 60_000 + id%7*1000
	r.BackendID, r.ProcessEpoch, r.DispatchRevision = id%benchBackends+1, 1_700_000_000_000_000_000+id%benchBackends, 1
	r.InvocationID = fmt.Sprintf("%08x-0000-4000-8000-%012x", id, id*7919)
	r.InvocationSecret = fmt.Sprintf("%064x", id*2654435761)
	r.DeadlineMs, r.LeaderTerm = r.CreateTimeMs+3_600_000, 3
	r.TerminationProof = job.ProofChildReaped
	switch id % 10 {
	case 0:
		r.MutationState, r.RefreshState = job.NotCommitted, job.RefreshNotRequired
		r.Result = job.Result{Code: job.PreInvocationStaleAdmission, Reason: job.ReasonNone, Message: "dataset changed since admission"}
	case 1:
		r.MutationState, r.RefreshState = job.Unknown, job.RefreshNotRequired
		r.Result = job.Result{Code: job.NoTrustedResult, Reason: job.ReasonNone}
		r.ForceReleased, r.ForceActor, r.ForceTimeMs = true, "ops", r.UpdateTimeMs
		r.ForceNote, r.ForceWarning = "checked by hand", "the old worker may still overwrite, remove or reintroduce the index"
	default:
		r.MutationState, r.RefreshState = job.Committed, job.RefreshDone
		r.Result = job.Result{Code: job.NativeOK, Reason: job.ReasonNone, Message: "ok"}
	}
	return r
}

// writeBenchSnapshot writes the fixture and returns its job count.
func writeBenchSnapshot(w io.Writer, retained int) int {
	sw := newSnapshotWriter(w)
	extra := benchPending + benchRunning + benchRefresh
	total := int64(retained + extra)
	must := func(err error) {
		if err != nil {
			panic(err)
		}
	}
	must(sw.frame(&journal.TSnapshotHeader{FormatVersion: SnapshotFormatVersion, LastJobID: total,
		LastCatalogID: benchCatalogs, LastBackendID: benchBackends,
		JobCount: thrift.Int64Ptr(total), CatalogCount: thrift.Int64Ptr(benchCatalogs), BackendCount: thrift.Int64Ptr(benchBackends),
		AppliedIndex: thrift.Int64Ptr(0)}))
	for c := int64(1); c <= benchCatalogs; c++ {
		cat := &Catalog{ID: c, Name: "c" + strconv.FormatInt(c, 10), Provider: job.ProviderDirectory,
			RootURI: "s3://bucket/c" + strconv.FormatInt(c, 10), RefreshKind: RefreshNone}
		must(sw.frame(&journal.TSnapshotItem{Catalog: CatalogToThrift(cat)}))
	}
	for b := int64(1); b <= benchBackends; b++ {
		must(sw.frame(&journal.TSnapshotItem{Backend: BackendToThrift(&Backend{ID: b, Address: "be" + strconv.FormatInt(b, 10) + ":9060"})}))
	}
	var jw jobcodec.Wire
	item := &journal.TSnapshotItem{}
	for id := int64(1); id <= total; id++ {
		r := benchRecord(id)
		switch n := id - int64(retained); {
		case n <= 0:
		case n <= benchPending:
			// Unresolved jobs get a table of their own so no fence is shared.
			r = newJob(r.CatalogID, "s3://bucket/c"+strconv.FormatInt(r.CatalogID, 10), "db", "open"+strconv.FormatInt(id, 10), "idx", job.Create)
			r.JobID, r.CreateTimeMs, r.UpdateTimeMs = id, benchNowMs, benchNowMs
			r.MutationState, r.RefreshState, r.TerminationProof = job.Pending, job.RefreshNotRequired, job.ProofNone
		case n <= benchPending+benchRunning:
			r.Table = "open" + strconv.FormatInt(id, 10)
			r.Locator, _ = job.DatasetLocator("s3://bucket/c"+strconv.FormatInt(r.CatalogID, 10), r.DB, r.Table)
			r.MutationState, r.RefreshState, r.Result = job.Running, job.RefreshNotRequired, job.Result{}
			r.ForceReleased, r.ForceActor, r.ForceNote, r.ForceWarning, r.ForceTimeMs = false, "", "", "", 0
			r.PossibleLiveOwned, r.TerminationProof = true, job.ProofNone
			r.BackendID = n%benchBackends + 1
			r.DeadlineMs = benchNowMs + (n-benchPending)*10_000 - 1_000_000 // some already past
		default:
			r.Table = "open" + strconv.FormatInt(id, 10)
			r.Locator, _ = job.DatasetLocator("s3://bucket/c"+strconv.FormatInt(r.CatalogID, 10), r.DB, r.Table)
			r.MutationState, r.RefreshState = job.Committed, job.RefreshRequired
			r.ForceReleased, r.ForceActor, r.ForceNote, r.ForceWarning, r.ForceTimeMs = false, "", "", "", 0
		}
		item.Job = jw.Load(r)
		must(sw.frame(item))
	}
	must(sw.frame(&journal.TSnapshotItem{Last: thrift.BoolPtr(true)}))
	must(sw.flush())
	return int(total)
}

func BenchmarkPendingInIDOrder(b *testing.B) {
	f, _ := benchFixture(b)
	s := f.State()
	for _, limit := range []int{16, benchPending} {
		b.Run("limit="+strconv.Itoa(limit), func(b *testing.B) {
			for b.Loop() {
				if len(s.PendingInIDOrder(limit)) != limit {
					b.Fatal("wrong count")
				}
			}
		})
	}
}

func BenchmarkRunningByDeadline(b *testing.B) {
	f, _ := benchFixture(b)
	s := f.State()
	for b.Loop() {
		if n := len(s.RunningByDeadline(benchNowMs, 0)); n == 0 || n == benchRunning {
			b.Fatalf("%d past their deadline", n)
		}
	}
}

func BenchmarkSlotHolders(b *testing.B) {
	f, _ := benchFixture(b)
	s := f.State()
	for b.Loop() {
		if len(s.SlotHolders(7)) != benchRunning/benchBackends || s.HeldSlots(7) != benchRunning/benchBackends {
			b.Fatal("wrong holders")
		}
	}
}

func BenchmarkRefreshDue(b *testing.B) {
	f, _ := benchFixture(b)
	s := f.State()
	for b.Loop() {
		if len(s.RefreshDue(16)) != 16 {
			b.Fatal("wrong count")
		}
	}
}

func BenchmarkGCEligible(b *testing.B) {
	f, _ := benchFixture(b)
	s := f.State()
	for b.Loop() {
		if len(s.GCEligible(benchNowMs-benchRetention, MaxGCBatch)) != MaxGCBatch {
			b.Fatal("wrong count")
		}
	}
}

// BenchmarkApplyMarkRunning: one M1 batch of 16 against the big state,
// including the copy-on-write of the books.
func BenchmarkApplyMarkRunning(b *testing.B) {
	f, _ := benchFixture(b)
	s := f.State()
	pending := s.PendingInIDOrder(16)
	items := make([]*journal.TMarkRunning, len(pending))
	for i, r := range pending {
		items[i] = markCmd(r, int64(i%benchBackends+1))
	}
	entry, err := Encode(CmdMarkRunningBatch, &journal.TMarkRunningBatch{NowMs: benchNowMs, Jobs: items})
	if err != nil {
		b.Fatal(err)
	}
	// Apply on a private FSM from the same view: the view is persistent, so
	// each iteration copies what it changes and the fixture stays as it is.
	priv := &FSM{logger: f.logger, OnFatal: func(err error) { panic(err) }, strs: jobcodec.NewStrPool()}
	for b.Loop() {
		priv.state.Store(s)
		if resp := priv.Apply(&raft.Log{Index: 1, Data: entry}).(*journal.TApplyResponse); resp.Items[0].Code != journal.TApplyCode_OK {
			b.Fatalf("M1: %v", resp.Items[0].GetMessage())
		}
	}
}

func BenchmarkSnapshotPersist(b *testing.B) {
	f, data := benchFixture(b)
	want := len(data) + 2 // the state's header carries an empty option list
	b.SetBytes(int64(want))
	for b.Loop() {
		snap, _ := f.Snapshot()
		sink := &countSink{}
		if err := snap.Persist(sink); err != nil || sink.n != want {
			b.Fatalf("persist: %v, %d bytes, want %d", err, sink.n, want)
		}
	}
	b.ReportMetric(float64(bench.jobs), "jobs")
}

func BenchmarkSnapshotRestore(b *testing.B) {
	data := benchData(b)
	dropFixture()
	b.SetBytes(int64(len(data)))
	var perJob float64
	for b.Loop() {
		b.StopTimer()
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		f := New(nil)
		b.StartTimer()
		if err := f.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		perJob = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(bench.jobs)
		runtime.KeepAlive(f)
		b.StartTimer()
	}
	b.ReportMetric(perJob, "heapB/job")
	b.ReportMetric(float64(bench.jobs), "jobs")
}

type countSink struct{ n int }

func (s *countSink) Write(p []byte) (int, error) { s.n += len(p); return len(p), nil }
func (s *countSink) Close() error                { return nil }
func (s *countSink) Cancel() error               { return nil }
func (s *countSink) ID() string                  { return "count" }
