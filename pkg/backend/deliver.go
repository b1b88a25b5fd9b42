package backend

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/backend/outbox"
	"github.com/lancemaster/lancemaster/pkg/certs"
	"github.com/lancemaster/lancemaster/pkg/rpc"
)

// maxParallelDeliveries bounds the report calls in flight at once.
const maxParallelDeliveries = 8

// deliverer delivers outbox entries to the masters (docs/reports.md), one
// goroutine per entry (a report, or the latest progress report of an
// invocation), until a master accepts it (OK), the masters agree that it
// can never be accepted, or the entry expires:
//
//   - a round tries every report target once, starting with the master that
//     last answered OK; a transport failure or NOT_LEADER moves on to the
//     next (a report's NOT_LEADER names no leader: any master forwards to
//     the leader it knows, so the next one is as good a guess as any);
//     NOT_LEADER is never a refusal;
//   - OK → acknowledged (removed from the outbox); a delivered report also
//     drops its invocation's progress entry (the report says more);
//   - UNAUTHENTICATED, STALE_REPORT → a refusal: recorded, and the round
//     moves on to the next master. The entry is dropped (Warn) only once it
//     has collected minRefusals refusals AND they came from two masters, or
//     under two leader terms (from heartbeats), or span RefusalWindow: one
//     master's stale view never discards a durable result;
//   - INVALID_ARGUMENT → given up (removed, Warn): the report itself is
//     malformed, whoever reads it;
//   - SERVICE_UNAVAILABLE, INTERNAL_ERROR or any other status, or a round in
//     which no master answered → retried after a jittered exponential
//     backoff (BackoffMin doubling to BackoffMax, each wait drawn from
//     [d/2, d]);
//   - a progress report answered UNKNOWN_METHOD (a master of an older
//     version) is dropped;
//   - past its deadline + OutboxGrace the entry is dropped (Warn).
//
// A report with a result code goes by reportLanceIndexJobResult (its proof
// inside); one with only a proof by reportLanceIndexJobTermination, with
// the cause and the announced uuid; a progress entry by
// reportLanceIndexJobProgress. Applying twice is harmless on the master, so
// a retry after an ambiguous failure is safe.
//
// Locks: pmu (progress Puts against their acks) before mu; mu is never held
// across an outbox write, and the deliverer never takes Agent.mu while
// holding mu (the heartbeat calls setTargets and outboxDelivered under
// Agent.mu).
type deliverer struct {
	a   *Agent
	log *zap.Logger
	ob  *outbox.Outbox
	sem chan struct{}
	// conns are the report connections, one per master address, shared by
	// the deliveries to it (rpc.MuxPool: a report's own timeout abandons
	// that report's call only; a broken connection fails the reports on it,
	// which are retried like any undelivered report).
	conns *rpc.MuxPool

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	pmu sync.Mutex

	mu        sync.Mutex
	targets   []string
	preferred string
	loops     map[entryKey]*delivery // entries with a delivery goroutine
	stopped   bool
	startLeft map[entryKey]bool // entries found at start, not yet delivered or dropped
	startDone bool              // startLeft emptied (and the outbox was readable)
}

// entryKey names an outbox entry.
type entryKey struct {
	kind outbox.Kind
	id   string
}

func keyOf(e outbox.Entry) entryKey { return entryKey{e.Kind, e.ID} }

// delivery is one entry's delivery goroutine. Guarded by deliverer.mu.
type delivery struct {
	entry   outbox.Entry // the latest version (a newer progress replaces it)
	seq     uint64       // bumped by each newer version
	dropped bool         // removed from outside (a progress entry whose report was delivered)
	done    chan struct{}
}

func newDeliverer(a *Agent) *deliverer {
	ctx, cancel := context.WithCancel(context.Background())
	return &deliverer{
		a: a, log: a.log.Named("deliver"), ob: a.outbox, sem: make(chan struct{}, maxParallelDeliveries),
		conns: rpc.NewMuxPool(a.cfg.RPC, certs.RoleMaster),
		ctx:   ctx, cancel: cancel, targets: append([]string(nil), a.cfg.Masters...), loops: map[entryKey]*delivery{},
	}
}

// setTargets replaces the report targets (from a heartbeat).
func (d *deliverer) setTargets(addrs []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !equalStrings(d.targets, addrs) {
		d.log.Info("report targets updated", zap.Strings("masters", addrs))
		d.targets = append([]string(nil), addrs...)
	}
}

// order returns the targets, the preferred one first.
func (d *deliverer) order() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]string, 0, len(d.targets))
	for _, t := range d.targets {
		if t == d.preferred {
			out = append([]string{t}, out...)
		} else {
			out = append(out, t)
		}
	}
	return out
}

// outboxDelivered reports whether every entry found in the outbox at start
// has been delivered or dropped (false until resume has read the outbox,
// and for good if it could not).
func (d *deliverer) outboxDelivered() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.startDone
}

// resume starts delivering what the outbox holds (from earlier runs of this
// backend: their reports carry the old process epoch, which is the identity
// the master journaled for those dispatches, so they are accepted as is).
func (d *deliverer) resume() {
	pending, expired, err := d.ob.Pending()
	if err != nil {
		d.log.Error("outbox unreadable; stored reports are not delivered", zap.Error(err))
		return
	}
	for _, id := range expired {
		d.log.Warn("outbox entry expired undelivered", zap.String("invocation_id", clipForLog(id)))
	}
	if len(pending) > 0 {
		d.log.Info("delivering reports stored by an earlier run", zap.Int("count", len(pending)))
	}
	d.mu.Lock()
	d.startLeft = make(map[entryKey]bool, len(pending))
	for _, e := range pending {
		d.startLeft[keyOf(e)] = true
	}
	d.startDone = len(pending) == 0
	d.mu.Unlock()
	for _, e := range pending {
		d.deliver(e)
	}
}

// deliver starts delivering e, or hands a newer version of an entry being
// delivered to its goroutine.
func (d *deliverer) deliver(e outbox.Entry) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		return
	}
	k := keyOf(e)
	if l := d.loops[k]; l != nil {
		l.entry, l.seq = e, l.seq+1
		return
	}
	l := &delivery{entry: e, done: make(chan struct{})}
	d.loops[k] = l
	d.wg.Add(1)
	go d.loop(k, l)
}

// putProgress stores a progress entry (replacing the invocation's previous
// one) and delivers it. Under pmu, so that a delivery goroutine acking an
// older version cannot remove this one (settle compares versions under pmu).
func (d *deliverer) putProgress(e outbox.Entry) {
	d.pmu.Lock()
	defer d.pmu.Unlock()
	if err := d.ob.Put(e); err != nil {
		d.log.Error("outbox write failed; the progress report is delivered from memory only", zap.Int64("job_id", e.Progress.JobID),
			zap.String("invocation_id", clipForLog(e.ID)), zap.Error(err))
	}
	d.deliver(e)
}

// dropProgress removes the progress entry of id (its report was delivered).
func (d *deliverer) dropProgress(id string) {
	k := entryKey{outbox.KindProgress, id}
	d.pmu.Lock()
	defer d.pmu.Unlock()
	d.mu.Lock()
	if l := d.loops[k]; l != nil {
		delete(d.loops, k)
		l.dropped = true
		close(l.done)
	}
	d.mu.Unlock()
	d.remove(k)
}

// settle removes the entry that goroutine l delivered (or dropped) at
// version seq; false when a newer version arrived meanwhile (deliver that).
func (d *deliverer) settle(k entryKey, l *delivery, seq uint64) bool {
	if k.kind == outbox.KindProgress {
		d.pmu.Lock()
		defer d.pmu.Unlock()
	}
	d.mu.Lock()
	if l.dropped {
		d.mu.Unlock()
		return true
	}
	if l.seq != seq {
		d.mu.Unlock()
		return false
	}
	delete(d.loops, k)
	d.mu.Unlock()
	d.remove(k)
	return true
}

// remove deletes an entry from the outbox and records that it left.
func (d *deliverer) remove(k entryKey) {
	if err := d.ob.Remove(k.kind, k.id); err != nil && !errors.Is(err, outbox.ErrClosed) {
		d.log.Error("outbox ack failed", zap.String("invocation_id", clipForLog(k.id)), zap.Stringer("kind", k.kind), zap.Error(err))
	}
	d.mu.Lock()
	if d.startLeft[k] {
		delete(d.startLeft, k)
		if len(d.startLeft) == 0 {
			d.startDone = true
		}
	}
	d.mu.Unlock()
	if k.kind == outbox.KindReport {
		d.a.mu.Lock()
		d.a.table.settled(k.id)
		d.a.mu.Unlock()
	}
}

// stop lets deliveries run for up to flush, then cancels them and waits.
// What is not delivered stays in the outbox.
func (d *deliverer) stop(flush time.Duration) {
	d.mu.Lock()
	d.stopped = true
	d.mu.Unlock()
	if !waitTimeout(&d.wg, flush) {
		d.cancel()
		d.wg.Wait()
	}
	d.cancel()
	d.conns.Close()
}

type verdict int

const (
	verdictRetry verdict = iota
	verdictDelivered
	verdictGiveUp
)

func (d *deliverer) loop(k entryKey, l *delivery) {
	defer d.wg.Done()
	defer func() {
		d.mu.Lock()
		if d.loops[k] == l {
			delete(d.loops, k)
		}
		d.mu.Unlock()
	}()
	var jobID int64
	d.mu.Lock()
	if r := l.entry.Report; r != nil {
		jobID = r.JobID
	} else if p := l.entry.Progress; p != nil {
		jobID = p.JobID
	}
	d.mu.Unlock()
	log := d.log.With(zap.Int64("job_id", jobID), zap.String("invocation_id", clipForLog(k.id)), zap.Stringer("kind", k.kind))
	backoff := d.a.cfg.BackoffMin
	var ref refusals
	for attempt := 1; ; attempt++ {
		d.mu.Lock()
		e, seq, dropped := l.entry, l.seq, l.dropped
		d.mu.Unlock()
		if dropped {
			return
		}
		if expires := d.ob.ExpiresAt(e); d.a.cfg.Clock().After(expires) {
			log.Warn("report expired undelivered; dropped from the outbox", zap.Time("expired_at", expires))
			d.a.metrics.reportDone(reportExpired)
			d.settle(k, l, seq)
			return
		}
		v, code := d.round(log, e, &ref)
		switch v {
		case verdictDelivered:
			if !d.settle(k, l, seq) {
				continue // a newer progress report arrived meanwhile
			}
			log.Info("report delivered", zap.Int("attempt", attempt))
			d.a.metrics.reportDone(reportDelivered)
			if k.kind == outbox.KindReport {
				d.dropProgress(k.id)
			}
			return
		case verdictGiveUp:
			if !d.settle(k, l, seq) {
				ref = refusals{}
				continue
			}
			log.Warn("the masters refused the report for good; dropped from the outbox", zap.Stringer("status", code),
				zap.Int("refusals", ref.n))
			d.a.metrics.reportDone(reportRefused)
			return
		}
		d.a.metrics.reportRetry()
		if attempt >= 4 && attempt&(attempt-1) == 0 {
			log.Warn("report still undelivered; retrying", zap.Int("attempts", attempt), zap.Int("refusals", ref.n))
		}
		wait := backoff/2 + rand.N(backoff/2+1)
		backoff = min(backoff*2, d.a.cfg.BackoffMax)
		t := time.NewTimer(wait)
		select {
		case <-d.ctx.Done():
			t.Stop()
			return // stays in the outbox for the next start
		case <-l.done:
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// reportTerm is the leader term of the bound cluster, as heartbeats (and
// fenced requests) raised it.
func (d *deliverer) reportTerm() int64 {
	d.a.mu.Lock()
	defer d.a.mu.Unlock()
	return d.a.cl.term()
}

// round tries every target once.
func (d *deliverer) round(log *zap.Logger, e outbox.Entry, ref *refusals) (verdict, wire.TStatusCode) {
	targets := d.order()
	if len(targets) == 0 {
		log.Debug("no report target known yet (no masters configured, no heartbeat)")
		return verdictRetry, 0
	}
	for _, addr := range targets {
		select {
		case d.sem <- struct{}{}:
		case <-d.ctx.Done():
			return verdictRetry, 0
		}
		st, err := d.send(addr, e)
		<-d.sem
		if err != nil {
			if e.Kind == outbox.KindProgress && rpc.IsUnknownMethod(err) {
				log.Info("a master does not take progress reports (an older version); progress dropped", zap.String("master", addr))
				return verdictGiveUp, 0
			}
			log.Debug("report not delivered: master unreachable", zap.String("master", addr), zap.Error(err))
			continue
		}
		switch st.StatusCode {
		case wire.TStatusCode_OK:
			d.mu.Lock()
			d.preferred = addr
			d.mu.Unlock()
			return verdictDelivered, st.StatusCode
		case wire.TStatusCode_INVALID_ARGUMENT:
			return verdictGiveUp, st.StatusCode
		case wire.TStatusCode_UNAUTHENTICATED, wire.TStatusCode_STALE_REPORT:
			now := d.a.cfg.Clock()
			ref.add(addr, d.reportTerm(), now)
			if ref.final(now, d.a.cfg.RefusalWindow) {
				return verdictGiveUp, st.StatusCode
			}
			log.Info("a master refused the report; kept until other masters or a later term confirm it", zap.String("master", addr),
				zap.Stringer("status", st.StatusCode), zap.Int("refusals", ref.n))
			continue
		case wire.TStatusCode_NOT_LEADER:
			log.Debug("master cannot take the report now; trying the next", zap.String("master", addr))
			continue
		default:
			log.Debug("master asked to retry the report later", zap.String("master", addr), zap.Stringer("status", st.StatusCode))
			return verdictRetry, st.StatusCode
		}
	}
	return verdictRetry, 0
}

// send makes one report call to addr.
func (d *deliverer) send(addr string, e outbox.Entry) (*wire.TStatus, error) {
	ctx, cancel := context.WithTimeout(d.ctx, d.a.cfg.ReportTimeout)
	defer cancel()
	conn, _, err := d.conns.Get(ctx, addr)
	if err != nil {
		return nil, err
	}
	c := adminapi.NewLanceMasterServiceClient(conn)
	var st *wire.TStatus
	switch r := e.Report; {
	case e.Kind == outbox.KindProgress:
		st, err = c.ReportLanceIndexJobProgress(ctx, e.Progress)
	case r.ResultCode != nil:
		st, err = c.ReportLanceIndexJobResult_(ctx, r)
	default:
		st, err = c.ReportLanceIndexJobTermination(ctx, terminationReport(r, e.IndexUUID))
	}
	if err == nil && st == nil {
		err = errors.New("the master answered no status")
	}
	return st, err
}

// terminationReport is the proof-only form of a report without a result:
// the proof, the cause (sanitized_message), no_result (no result report
// follows: the master ends the job now, DESIGN.md §13.3) and the uuid the
// worker announced, if any.
func terminationReport(r *wire.TLanceIndexJobReport, announcedUUID string) *wire.TLanceIndexJobTerminationReport {
	t := &wire.TLanceIndexJobTerminationReport{
		JobID: r.JobID, DispatchRevision: r.DispatchRevision, InvocationID: r.InvocationID,
		BeProcessEpoch: r.BeProcessEpoch, Proof: r.GetTerminationProof(), InvocationSecret: r.InvocationSecret,
		SanitizedMessage: r.SanitizedMessage, Resources: r.Resources, LogTail: r.LogTail,
	}
	if r.ResultCode == nil {
		noResult := true
		t.NoResult_ = &noResult
	}
	if announcedUUID != "" {
		t.IndexUUID = &announcedUUID
	}
	return t
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
