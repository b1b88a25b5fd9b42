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
// goroutine per entry, until a master accepts the report (OK), a master
// says it can never be accepted, or the entry expires:
//
//   - a round tries every report target once, starting with the master that
//     last answered OK; a transport failure or NOT_LEADER moves on to the
//     next (a report's NOT_LEADER names no leader: any master forwards to
//     the leader it knows, so the next one is as good a guess as any);
//   - OK → acknowledged (removed from the outbox);
//   - UNAUTHENTICATED, STALE_REPORT, INVALID_ARGUMENT → given up (removed,
//     logged at Warn): retrying cannot change the answer;
//   - SERVICE_UNAVAILABLE, INTERNAL_ERROR or any other status, or a round in
//     which no master answered → retried after a jittered exponential
//     backoff (BackoffMin doubling to BackoffMax, each wait drawn from
//     [d/2, d]);
//   - past its deadline + OutboxGrace the entry is dropped (Warn).
//
// A report with a result code goes by reportLanceIndexJobResult (its proof
// inside); one with only a proof by reportLanceIndexJobTermination. Applying
// twice is harmless on the master, so a retry after an ambiguous failure is
// safe.
type deliverer struct {
	a   *Agent
	log *zap.Logger
	ob  *outbox.Outbox
	sem chan struct{}

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu        sync.Mutex
	targets   []string
	preferred string
	inflight  map[string]bool // entries with a delivery goroutine
	stopped   bool
}

func newDeliverer(a *Agent) *deliverer {
	ctx, cancel := context.WithCancel(context.Background())
	return &deliverer{
		a: a, log: a.log.Named("deliver"), ob: a.outbox, sem: make(chan struct{}, maxParallelDeliveries),
		ctx: ctx, cancel: cancel, targets: append([]string(nil), a.cfg.Masters...), inflight: map[string]bool{},
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
	for _, e := range pending {
		d.deliver(e)
	}
}

// deliver starts delivering e unless it is already being delivered.
func (d *deliverer) deliver(e outbox.Entry) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped || d.inflight[e.ID] {
		return
	}
	d.inflight[e.ID] = true
	d.wg.Add(1)
	go d.loop(e)
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
}

type verdict int

const (
	verdictRetry verdict = iota
	verdictDelivered
	verdictGiveUp
)

func (d *deliverer) loop(e outbox.Entry) {
	defer d.wg.Done()
	defer func() {
		d.mu.Lock()
		delete(d.inflight, e.ID)
		d.mu.Unlock()
	}()
	log := d.log.With(zap.Int64("job_id", e.Report.JobID), zap.String("invocation_id", clipForLog(e.ID)))
	expires := d.ob.ExpiresAt(e)
	backoff := d.a.cfg.BackoffMin
	for attempt := 1; ; attempt++ {
		if d.a.cfg.Clock().After(expires) {
			log.Warn("report expired undelivered; dropped from the outbox", zap.Time("expired_at", expires))
			d.a.metrics.reportDone(reportExpired)
			d.ack(log, e.ID)
			return
		}
		v, code := d.round(log, e)
		switch v {
		case verdictDelivered:
			log.Info("report delivered", zap.Int("attempt", attempt))
			d.a.metrics.reportDone(reportDelivered)
			d.ack(log, e.ID)
			return
		case verdictGiveUp:
			log.Warn("a master refused the report for good; dropped from the outbox", zap.Stringer("status", code))
			d.a.metrics.reportDone(reportRefused)
			d.ack(log, e.ID)
			return
		}
		d.a.metrics.reportRetry()
		if attempt >= 4 && attempt&(attempt-1) == 0 {
			log.Warn("report still undelivered; retrying", zap.Int("attempts", attempt))
		}
		wait := backoff/2 + rand.N(backoff/2+1)
		backoff = min(backoff*2, d.a.cfg.BackoffMax)
		t := time.NewTimer(wait)
		select {
		case <-d.ctx.Done():
			t.Stop()
			return // stays in the outbox for the next start
		case <-t.C:
		}
	}
}

func (d *deliverer) ack(log *zap.Logger, id string) {
	if err := d.ob.Ack(id); err != nil && !errors.Is(err, outbox.ErrClosed) {
		log.Error("outbox ack failed", zap.Error(err))
	}
}

// round tries every target once.
func (d *deliverer) round(log *zap.Logger, e outbox.Entry) (verdict, wire.TStatusCode) {
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
		st, err := d.send(addr, e.Report)
		<-d.sem
		if err != nil {
			log.Debug("report not delivered: master unreachable", zap.String("master", addr), zap.Error(err))
			continue
		}
		switch st.StatusCode {
		case wire.TStatusCode_OK:
			d.mu.Lock()
			d.preferred = addr
			d.mu.Unlock()
			return verdictDelivered, st.StatusCode
		case wire.TStatusCode_UNAUTHENTICATED, wire.TStatusCode_STALE_REPORT, wire.TStatusCode_INVALID_ARGUMENT:
			return verdictGiveUp, st.StatusCode
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
func (d *deliverer) send(addr string, r *wire.TLanceIndexJobReport) (*wire.TStatus, error) {
	ctx, cancel := context.WithTimeout(d.ctx, d.a.cfg.ReportTimeout)
	defer cancel()
	conn, err := rpc.DialRole(ctx, addr, d.a.cfg.RPC, certs.RoleMaster)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	c := adminapi.NewLanceMasterServiceClient(conn.Client())
	var st *wire.TStatus
	if r.ResultCode != nil {
		st, err = c.ReportLanceIndexJobResult_(ctx, r)
	} else {
		st, err = c.ReportLanceIndexJobTermination(ctx, terminationReport(r))
	}
	if err == nil && st == nil {
		err = errors.New("the master answered no status")
	}
	return st, err
}

// terminationReport is the proof-only form of a report without a result.
func terminationReport(r *wire.TLanceIndexJobReport) *wire.TLanceIndexJobTerminationReport {
	return &wire.TLanceIndexJobTerminationReport{
		JobID: r.JobID, DispatchRevision: r.DispatchRevision, InvocationID: r.InvocationID,
		BeProcessEpoch: r.BeProcessEpoch, Proof: r.GetTerminationProof(), InvocationSecret: r.InvocationSecret,
	}
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
