package master_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/pkg/master"
	"github.com/lancemaster/lancemaster/pkg/master/mastertest"

	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/dispatch"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/options"
	"github.com/lancemaster/lancemaster/pkg/rpc"
)

// worker plays a backend on top of the fake: every dispatch it accepts
// "finishes" at once (NATIVE_OK, child reaped): Query answers FINISHED with
// the result, and the report is delivered to the masters unless suppressed.
type worker struct {
	c        *mastertest.Cluster
	mu       sync.Mutex
	accepted map[string]bool
	suppress bool
	finished map[int64]bool // job ids the backend finished
	logTail  string         // when set, every report carries it as its log tail
	// code, when set, chooses each dispatch's result code (else NATIVE_OK).
	code func(*wire.TLanceIndexJobDispatch) wire.TLanceIndexJobResultCode
	wg   sync.WaitGroup
	stop chan struct{}
}

func newWorker(c *mastertest.Cluster) *worker {
	w := &worker{c: c, accepted: map[string]bool{}, finished: map[int64]bool{}, stop: make(chan struct{})}
	c.Backend.SetSubmitHook(w.submit)
	c.T.Cleanup(func() { close(w.stop); w.wg.Wait() })
	return w
}

func (w *worker) submit(_ context.Context, d *wire.TLanceIndexJobDispatch) (*wire.TStatus, error) {
	ok := &wire.TStatus{StatusCode: wire.TStatusCode_OK}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.accepted[d.InvocationID] {
		return ok, nil // a redelivered invocation id answers OK
	}
	w.accepted[d.InvocationID] = true
	w.finished[d.JobID] = true
	code, proof := wire.TLanceIndexJobResultCode_NATIVE_OK, wire.TLanceIndexTerminationProof_CHILD_REAPED
	if w.code != nil {
		code = w.code(d)
	}
	rep := &wire.TLanceIndexJobReport{JobID: d.JobID, DispatchRevision: d.DispatchRevision, InvocationID: d.InvocationID,
		BeProcessEpoch: d.BeProcessEpoch, ResultCode: &code, TerminationProof: &proof, InvocationSecret: d.InvocationSecret}
	if w.logTail != "" {
		tail := w.logTail
		rep.LogTail = &tail
	}
	w.c.Backend.SetInvocation(&wire.TInvocationStatus{InvocationID: d.InvocationID,
		State: wire.TLanceInvocationState_FINISHED, Result_: rep, TerminationProof: &proof})
	if !w.suppress {
		w.wg.Add(1)
		go w.deliver(rep)
	}
	return ok, nil
}

// deliver retries the report against the live masters until one accepts it,
// as the backend's outbox does.
func (w *worker) deliver(rep *wire.TLanceIndexJobReport) {
	defer w.wg.Done()
	for attempt := 0; attempt < 200; attempt++ {
		var addrs []string
		for i, m := range w.c.LiveMasters() {
			if m != nil {
				addrs = append(addrs, w.c.Nodes[i].RPCAdvertise)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		var st *wire.TStatus
		err := rpc.NewMasterClient(addrs, rpc.DefaultConfig(), zap.NewNop()).Call(ctx, func(ctx context.Context, c *adminapi.LanceMasterServiceClient) (err error) {
			st, err = c.ReportLanceIndexJobResult_(ctx, rep)
			return err
		})
		cancel()
		if err == nil && st != nil && st.StatusCode == wire.TStatusCode_OK {
			return
		}
		if err == nil && st != nil && st.StatusCode != wire.TStatusCode_NOT_LEADER && st.StatusCode != wire.TStatusCode_SERVICE_UNAVAILABLE {
			return // refused for good (stale): the journal already decided
		}
		select {
		case <-w.stop:
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (w *worker) setSuppress(v bool) { w.mu.Lock(); w.suppress = v; w.mu.Unlock() }

func (w *worker) finishedJobs() map[int64]bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[int64]bool{}
	for k := range w.finished {
		out[k] = true
	}
	return out
}

// Three masters, a fake Thrift backend that records every invocation it
// receives, 200 jobs: the leader is killed between journal and send, after
// the send before the report, and during a refresh. No invocation reaches the
// backend twice, every job ends terminal, books agree on all three masters,
// and jobs the backend finished are COMMITTED (through reconcile where the
// report never came).
func TestLifecycleSurvivesLeaderKills(t *testing.T) {
	var (
		holdMu      sync.Mutex
		holdJobs    = map[int64]bool{} // journaled, and that dispatch never sent
		aborted     = map[int64]bool{} // held jobs whose first send was aborted
		armJournal  atomic.Bool
		journaledCh = make(chan int, 1) // the master whose M1 was committed
	)
	c := mastertest.NewWith(t, nil, func(i int) master.Options {
		return master.Options{Knobs: &master.Knobs{HeartbeatInterval: 50 * time.Millisecond, DispatchHooks: dispatch.Hooks{
			AfterJournal: func(ids []int64) {
				if armJournal.CompareAndSwap(true, false) {
					holdMu.Lock()
					for _, id := range ids {
						holdJobs[id] = true
					}
					holdMu.Unlock()
					journaledCh <- i
				}
			},
			BeforeSend: func(id int64) error {
				holdMu.Lock()
				defer holdMu.Unlock()
				if holdJobs[id] && !aborted[id] {
					aborted[id] = true
					return fmt.Errorf("test: the leader dies before sending job %d", id)
				}
				return nil
			},
		}}}
	})
	w := newWorker(c)
	l := c.Leader()
	c.Setup(l)
	for _, tbl := range []string{"a", "b", "c", "d"} {
		c.Backend.SetDataset("/data/lake/db/"+tbl+".lance", job.Snapshot{Version: 1, Fields: []job.Field{{ID: 0, Name: "id", Type: "int32"}}})
		c.Backend.SetDataset("/data/hooked/db/"+tbl+".lance", job.Snapshot{Version: 1, Fields: []job.Field{{ID: 0, Name: "id", Type: "int32"}}})
	}
	c.SetOptions(l, map[string]string{
		options.OptMaxInflightPerBackend: "1000", options.OptMaxDispatchPerRound: "64", options.OptDispatchIntervalSecond: "1",
		options.OptEnableLocalFileMutation: "true",
	})
	var all []int64

	// A. Kill the leader between journal and send.
	armJournal.Store(true)
	ids := c.AdmitIDs(l, "lake", "a", "a", 50)
	all = append(all, ids...)
	var victim int
	select {
	case victim = <-journaledCh:
	case <-time.After(20 * time.Second):
		t.Fatal("no dispatch round journaled")
	}
	c.Kill(victim)
	l = c.Leader()
	c.WaitSettled(l, ids)
	c.Start(victim)

	// B. Kill the leader after the send, before any report.
	w.setSuppress(true)
	l = c.Leader()
	ids = c.AdmitIDs(l, "lake", "b", "b", 50)
	all = append(all, ids...)
	eventually(t, 20*time.Second, "phase B dispatched", func() bool { return c.DispatchedAll(ids) })
	c.Kill(l)
	w.setSuppress(false)
	old := l
	l = c.Leader()
	c.WaitSettled(l, ids)
	c.Start(old)

	// C. Kill the leader during a refresh.
	var hookCalls atomic.Int64
	release := make(chan struct{})
	hook := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if hookCalls.Add(1) <= 3 {
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		}
		rw.WriteHeader(http.StatusOK)
	}))
	defer hook.Close()
	l = c.Leader()
	c.CreateCatalog(l, "hooked", "/data/hooked", hook.URL)
	ids = c.AdmitIDs(l, "hooked", "c", "c", 50)
	all = append(all, ids...)
	eventually(t, 20*time.Second, "a refresh in flight", func() bool { return hookCalls.Load() > 0 })
	c.Kill(l)
	close(release)
	old = l
	l = c.Leader()
	c.WaitSettled(l, ids)
	c.Start(old)

	// D. Undisturbed.
	l = c.Leader()
	ids = c.AdmitIDs(l, "lake", "d", "d", 50)
	all = append(all, ids...)
	c.WaitSettled(l, ids)

	// Afterwards: no invocation twice, no job dispatched twice.
	for inv, n := range c.Backend.InvocationCounts() {
		if n != 1 {
			t.Errorf("invocation %s received %d times", inv, n)
		}
	}
	perJob := map[int64]int{}
	for _, d := range c.Backend.Dispatches() {
		perJob[d.JobID]++
	}
	for id, n := range perJob {
		if n != 1 {
			t.Errorf("job %d dispatched %d times", id, n)
		}
	}
	// Every job terminal (all were dispatchable), the finished ones COMMITTED.
	finished := w.finishedJobs()
	st := c.Masters[l].FSM().State()
	for _, id := range all {
		r, _ := st.Job(id)
		if !r.Terminal() {
			t.Errorf("job %d is %s", id, r.MutationState)
		}
		if finished[id] && r.MutationState != job.Committed {
			t.Errorf("job %d was finished by the backend but is %s", id, r.MutationState)
		}
		if r.MutationState == job.Unknown {
			t.Errorf("job %d ended UNKNOWN", id)
		}
	}
	holdMu.Lock()
	// A dispatch journaled but never sent is proven never enqueued by the
	// next leader's reconcile: the job returns to PENDING (M2″, DESIGN.md
	// §13.2) and its second dispatch commits.
	for id := range holdJobs {
		if r, _ := st.Job(id); r.MutationState != job.Committed || r.DispatchAttempts != 1 {
			t.Errorf("held job %d: %s after %d returns; want COMMITTED after 1", id, r.MutationState, r.DispatchAttempts)
		}
	}
	held := len(holdJobs)
	holdMu.Unlock()
	if held == 0 {
		t.Error("phase A held no job back")
	}
	// Books agree on all three masters once they have applied everything.
	want := fmt.Sprint(st.Books())
	for i, m := range c.Masters {
		eventually(t, 10*time.Second, fmt.Sprintf("m%d books agree", i+1), func() bool {
			return m.FSM().State().AppliedIndex() >= st.AppliedIndex() && fmt.Sprint(m.FSM().State().Books()) == want
		})
	}
	if len(st.Books().Slots) != 0 {
		t.Errorf("slots still held: %v", st.Books().Slots)
	}
}
