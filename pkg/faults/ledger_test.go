package faults

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/lancemaster/lancemaster/gen-go/wire"
)

// invocation is what the harness saw of one invocation id: who accepted it
// and what its worker ended with. Times are the world clock's milliseconds.
type invocation struct {
	id      string
	name    string // the index name: the job's identity across snapshot restores
	jobID   int64
	backend int   // backend slot
	epoch   int64 // the process epoch that accepted it
	dir     int   // the outbox directory of that process

	acceptedBy []string // evidence of acceptance: "submit OK", "run", "query RUNNING", ...
	queued     bool     // a submit OK or query saw it
	runStartMs int64    // 0: never started a worker
	runEndMs   int64    // 0: still running (or never started)
	code       string   // the worker's result code ("" = no trusted result)
	proof      string   // the runner's proof (CHILD_REAPED, NEVER_LAUNCHED, NONE)
	crashed    bool     // ended by a backend crash: no report exists
	committed  bool     // the build committed its index to the dataset
	// takenMs is when a master first answered OK to the invocation's
	// report (0: never): the backend then removes it from its outbox, so
	// from then on only the process that ran it still holds the result.
	takenMs int64
}

func (v *invocation) accepted() bool { return len(v.acceptedBy) > 0 }

func (v *invocation) String() string {
	return fmt.Sprintf("inv %.8s… job %d %q backend b%d epoch %d accepted by [%s] run %d..%d code %q proof %s crashed %v committed %v report taken %d",
		v.id, v.jobID, v.name, v.backend, v.epoch, strings.Join(v.acceptedBy, ", "), v.runStartMs, v.runEndMs, v.code, v.proof, v.crashed, v.committed, v.takenMs)
}

// ledger records every invocation the backends accepted, from three
// independent sources: the masters' submit answers (a seam around their
// BackendClient), the masters' query answers, and the fake Runner. A job
// may be dispatched several times (every refusal is fine), but at most one
// of its invocations may ever be accepted. Safe for concurrent use.
type ledger struct {
	mu    sync.Mutex
	byID  map[string]*invocation
	order []string
	// submits counts dispatches per index name and their answers.
	submits map[string][]string
	// resolves lists the dataset answers given per index name.
	resolves map[string][]string
}

func newLedger() *ledger {
	return &ledger{byID: map[string]*invocation{}, submits: map[string][]string{}, resolves: map[string][]string{}}
}

func (l *ledger) get(id, name string, jobID int64, backend int, epoch int64) *invocation {
	v, ok := l.byID[id]
	if !ok {
		v = &invocation{id: id, name: name, jobID: jobID, backend: backend, epoch: epoch, dir: -1}
		l.byID[id] = v
		l.order = append(l.order, id)
	}
	if v.name == "" {
		v.name = name
	}
	if v.jobID == 0 {
		v.jobID = jobID
	}
	if v.backend < 0 {
		v.backend = backend
	}
	if v.epoch == 0 {
		v.epoch = epoch
	}
	return v
}

func addOnce(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}

// submitted records one submit's answer (a master's send).
func (l *ledger) submitted(backend int, d *wire.TLanceIndexJobDispatch, st *wire.TStatus, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ans := "error"
	switch {
	case err != nil:
		ans = "error"
	case st != nil:
		ans = st.StatusCode.String()
	}
	l.submits[d.IndexName] = append(l.submits[d.IndexName], fmt.Sprintf("b%d:%s", backend, ans))
	if err == nil && st != nil && st.StatusCode == wire.TStatusCode_OK {
		v := l.get(d.InvocationID, d.IndexName, d.JobID, backend, d.BeProcessEpoch)
		v.acceptedBy = addOnce(v.acceptedBy, "submit OK")
		v.queued = true
	}
}

// queried records what a query answered: QUEUED, RUNNING and FINISHED
// prove the invocation was accepted.
func (l *ledger) queried(backend int, epoch int64, resp *wire.TQueryInvocationsResponse) {
	if resp == nil || resp.Status == nil || resp.Status.StatusCode != wire.TStatusCode_OK {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range resp.Invocations {
		switch s.State {
		case wire.TLanceInvocationState_QUEUED, wire.TLanceInvocationState_RUNNING, wire.TLanceInvocationState_FINISHED:
			var jobID int64
			if s.Result_ != nil {
				jobID = s.Result_.JobID
			}
			v := l.get(s.InvocationID, "", jobID, backend, epoch)
			v.acceptedBy = addOnce(v.acceptedBy, "query "+s.State.String())
		}
	}
}

// runStarted records a worker start (the agent accepted the invocation).
func (l *ledger) runStarted(backend int, epoch int64, dir int, id, name string, jobID int64, nowMs int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	v := l.get(id, name, jobID, backend, epoch)
	v.acceptedBy = addOnce(v.acceptedBy, "run")
	v.dir, v.runStartMs = dir, nowMs
}

// runEnded records what the worker ended with.
func (l *ledger) runEnded(id string, nowMs int64, code, proof string, crashed bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	v := l.byID[id]
	if v == nil {
		return
	}
	v.runEndMs, v.code, v.proof, v.crashed = nowMs, code, proof, crashed
}

// committed records that an invocation's build committed its index.
func (l *ledger) committed(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if v := l.byID[id]; v != nil {
		v.committed = true
	}
}

// reportTaken records that a master answered OK to a report of
// invocation id, which the backend received: it then drops the report
// from its outbox. The first answer counts.
func (l *ledger) reportTaken(id string, nowMs int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if v := l.byID[id]; v != nil && v.takenMs == 0 {
		v.takenMs = nowMs
	}
}

// resolved records a resolve-mode answer.
func (l *ledger) resolved(name, outcome string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.resolves[name] = append(l.resolves[name], outcome)
}

// snapshot returns copies, by index name, in first-seen order.
func (l *ledger) byName() map[string][]invocation {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string][]invocation{}
	for _, id := range l.order {
		v := *l.byID[id]
		v.acceptedBy = append([]string(nil), v.acceptedBy...)
		out[v.name] = append(out[v.name], v)
	}
	return out
}

func (l *ledger) lookup(id string) (invocation, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	v, ok := l.byID[id]
	if !ok {
		return invocation{}, false
	}
	c := *v
	c.acceptedBy = append([]string(nil), v.acceptedBy...)
	return c, true
}

func (l *ledger) submitHistory(name string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.submits[name], " ")
}

// names lists the index names the ledger knows, sorted.
func (l *ledger) names() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	seen := map[string]bool{}
	for _, v := range l.byID {
		seen[v.name] = true
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
