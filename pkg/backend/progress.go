package backend

import (
	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/backend/frame"
	"github.com/lancemaster/lancemaster/pkg/backend/outbox"
)

// The worker's announcements (DESIGN.md §13.4): as early as the uuid of the
// index it builds is known, the worker says so on stderr (Lance's
// build_vector_index debug line, which frame.LanceLogEnv turns on, or the
// builder's own lancemaster-progress line; frame.ParseProgressLine reads
// both), and the agent stores it durably (an outbox progress entry) and
// reports it to the masters (reportLanceIndexJobProgress), so that the
// outcome can later be proven from the dataset even if this process dies.

// maxAnnouncements bounds the progress updates stored per invocation (a
// worker printing phases in a loop must not hammer the outbox).
const maxAnnouncements = 32

// announce records what a worker announced; it reports whether anything
// changed that must be stored and reported. The first uuid is kept: a
// different one later is refused (the master writes the uuid once).
func (t *table) announce(inv *invocation, uuid, phase string) (changed, conflict bool) {
	if inv.state == wire.TLanceInvocationState_FINISHED || inv.announcements >= maxAnnouncements {
		return false, false
	}
	switch {
	case uuid == "" || uuid == inv.indexUUID:
	case inv.indexUUID == "":
		inv.indexUUID, changed = uuid, true
	default:
		conflict = true
	}
	if phase != "" && phase != inv.phase {
		inv.phase, changed = phase, true
	}
	if changed {
		inv.announcements++
	}
	return changed, conflict
}

// onWorkerLine is the stderr line observer of one build (called from the
// supervisor's stderr reader, in order). An announcement that changes what
// is known is stored in the outbox, fsynced, and delivered; an outbox write
// failure is logged and the report goes from memory.
//
// Every line also goes to the invocation's log (jobs logs), redacted. A
// report is made only when what is known changes (the uuid, or the phase:
// the builder's own phases and Lance's stage lines, frame.ParseProgressLine),
// never per line; it carries the time since the worker started.
func (a *Agent) onWorkerLine(inv *invocation, d *wire.TLanceIndexJobDispatch, line []byte) {
	inv.log.add(line) // set at accept, never replaced: no agent lock needed
	uuid, phase, ok := frame.ParseProgressLine(string(line))
	if !ok {
		return
	}
	a.mu.Lock()
	changed, conflict := a.table.announce(inv, uuid, phase)
	uuid, phase = inv.indexUUID, inv.phase
	elapsed := a.cfg.Clock().Sub(inv.startedAt).Milliseconds()
	a.mu.Unlock()
	log := a.log.With(zap.Int64("job_id", d.JobID), zap.String("invocation_id", clipForLog(inv.id)))
	if conflict {
		log.Warn("the worker announced a second index uuid; the first is kept", zap.String("index_uuid", uuid))
	}
	if !changed {
		return
	}
	log.Info("the worker announced its index", zap.String("index_uuid", uuid), zap.String("phase", phase))
	p := progressReport(d, a.epoch, uuid, phase)
	p.ElapsedMs = &elapsed
	a.dlv.putProgress(outbox.Entry{ID: inv.id, Kind: outbox.KindProgress, Progress: p, Deadline: inv.deadline})
}

// progressReport is the progress report of an invocation.
func progressReport(d *wire.TLanceIndexJobDispatch, epoch int64, uuid, phase string) *wire.TLanceIndexJobProgressReport {
	secret := d.GetInvocationSecret()
	p := &wire.TLanceIndexJobProgressReport{JobID: d.JobID, DispatchRevision: d.DispatchRevision, InvocationID: d.InvocationID,
		BeProcessEpoch: epoch, InvocationSecret: &secret}
	if uuid != "" {
		p.IndexUUID = &uuid
	}
	if phase != "" {
		p.Phase = &phase
	}
	return p
}
