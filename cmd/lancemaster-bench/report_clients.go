package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lancemaster/lancemaster/gen-go/wire"
)

// The benchmark's report senders: the backend's side of report delivery
// (reportLanceIndexJobResult over loopback Thrift), as the outbox does it.

// okReport is the report a backend sends for a dispatch that finished:
// NATIVE_OK, child reaped, authenticated by the dispatch's secret.
func okReport(d *wire.TLanceIndexJobDispatch) *wire.TLanceIndexJobReport {
	code, proof := wire.TLanceIndexJobResultCode_NATIVE_OK, wire.TLanceIndexTerminationProof_CHILD_REAPED
	return &wire.TLanceIndexJobReport{JobID: d.JobID, DispatchRevision: d.DispatchRevision, InvocationID: d.InvocationID,
		BeProcessEpoch: d.BeProcessEpoch, ResultCode: &code, TerminationProof: &proof, InvocationSecret: d.InvocationSecret}
}

// deliverResult is one deliverReports run.
type deliverResult struct {
	Elapsed  time.Duration
	Lats     []time.Duration // sorted; one per report answered OK
	Retries  int64           // answers asking to retry (or transport errors)
	Refused  int64           // reports refused for good
	FirstErr string
}

// deliverRetries bounds the attempts of one report.
const deliverRetries = 20

// deliverReports sends every report to addr with conc clients sharing
// benchConns connections, retrying what the master asks to retry, as a
// backend's outbox does. Latency is per report call that was answered OK.
func deliverReports(addr string, reps []*wire.TLanceIndexJobReport, conc int) deliverResult {
	var (
		next  atomic.Int64
		stats senderStats
		wg    sync.WaitGroup
	)
	lats := make([][]time.Duration, conc)
	conns := newSharedConns(addr)
	defer conns.close()
	t0 := time.Now()
	for g := 0; g < conc; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := &reportSender{conns: conns, g: g, stats: &stats}
			for {
				k := next.Add(1) - 1
				if k >= int64(len(reps)) {
					return
				}
				if d, ok := s.send(reps[k]); ok {
					lats[g] = append(lats[g], d)
				}
			}
		}()
	}
	wg.Wait()
	res := deliverResult{Elapsed: time.Since(t0), Retries: stats.retries.Load(), Refused: stats.refused.Load()}
	for _, l := range lats {
		res.Lats = append(res.Lats, l...)
	}
	slices.Sort(res.Lats)
	if p := stats.firstErr.Load(); p != nil {
		res.FirstErr = *p
	}
	return res
}

// senderStats are the counts shared by the reportSenders of one run.
type senderStats struct {
	retries, refused atomic.Int64
	firstErr         atomic.Pointer[string]
}

func (st *senderStats) note(s string) { st.firstErr.CompareAndSwap(nil, &s) }

// reportSender delivers reports over one of the shared connections (one
// goroutine uses a sender), retrying what the master asks to retry, as a
// backend's outbox does.
type reportSender struct {
	conns *sharedConns
	g     int
	stats *senderStats
}

// send delivers rep, at most deliverRetries attempts; ok with the latency
// of the call that was answered OK.
func (s *reportSender) send(rep *wire.TLanceIndexJobReport) (time.Duration, bool) {
	for try := 0; try < deliverRetries; try++ {
		ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
		client, err := s.conns.client(ctx, s.g)
		if err != nil {
			cancel()
			s.stats.retries.Add(1)
			s.stats.note(err.Error())
			time.Sleep(errorBackoff)
			continue
		}
		t := time.Now()
		st, err := client.ReportLanceIndexJobResult_(ctx, rep)
		d := time.Since(t)
		cancel()
		switch {
		case err != nil:
			s.stats.retries.Add(1)
			s.stats.note(err.Error())
			time.Sleep(errorBackoff)
			continue
		case st.GetStatusCode() == wire.TStatusCode_OK:
			return d, true
		case st.GetStatusCode() == wire.TStatusCode_SERVICE_UNAVAILABLE || st.GetStatusCode() == wire.TStatusCode_NOT_LEADER:
			s.stats.retries.Add(1)
			s.stats.note(fmt.Sprintf("job %d: %s %v", rep.JobID, st.GetStatusCode(), st.GetErrorMsgs()))
			time.Sleep(errorBackoff)
			continue
		}
		s.stats.refused.Add(1)
		s.stats.note(fmt.Sprintf("job %d: %s %v", rep.JobID, st.GetStatusCode(), st.GetErrorMsgs()))
		return 0, false
	}
	s.stats.refused.Add(1)
	s.stats.note(fmt.Sprintf("job %d: gave up after %d tries", rep.JobID, deliverRetries))
	return 0, false
}
