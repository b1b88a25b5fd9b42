package backend

import (
	"encoding/json"
	"strings"
	"unicode"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/backend/outbox"
)

// The worker's announcements (DESIGN.md §13.4): as early as the uuid of the
// index it builds is known, the worker says so on stderr, and the agent
// stores it durably (an outbox progress entry) and reports it to the masters
// (reportLanceIndexJobProgress), so that the outcome can later be proven
// from the dataset even if this process dies.

const (
	// lanceLogEnv is the workers' LANCEDB_LOG: errors, plus the debug line
	// of lance::index::vector that names the uuid of the index being built.
	// (The builder's frame.LanceLogEnv, when it lands, is the same value.)
	lanceLogEnv = "error,lance::index::vector=debug"
	// progressPrefix starts the builder's own announcement line:
	//   lancemaster-progress {"index_uuid":"…","phase":"…"}
	progressPrefix = "lancemaster-progress "
	// lanceBuildMarker is in Lance's debug line of a vector index build:
	//   … build_vector_index; … uuid=<uuid> …
	lanceBuildMarker = "build_vector_index"
	maxPhaseBytes    = 64
	// maxAnnouncements bounds the progress updates stored per invocation (a
	// worker printing phases in a loop must not hammer the outbox).
	maxAnnouncements = 32
)

// parseProgressLine recognizes an announcement on one stderr line: Lance's
// `build_vector_index; … uuid=<uuid>` debug line, or the builder's
// `lancemaster-progress {"index_uuid":"…","phase":"…"}`. ok is false for any
// other line, or a malformed one (a uuid that is not 8-4-4-4-12 hex, a phase
// over 64 bytes or not printable UTF-8).
func parseProgressLine(line string) (uuid, phase string, ok bool) {
	line = strings.TrimSpace(line)
	if rest, found := strings.CutPrefix(line, progressPrefix); found {
		var p struct {
			IndexUUID string `json:"index_uuid"`
			Phase     string `json:"phase"`
		}
		if json.Unmarshal([]byte(rest), &p) != nil || (p.IndexUUID == "" && p.Phase == "") ||
			(p.IndexUUID != "" && !isUUID(p.IndexUUID)) || !isPhase(p.Phase) {
			return "", "", false
		}
		return strings.ToLower(p.IndexUUID), p.Phase, true
	}
	i := strings.Index(line, lanceBuildMarker)
	if i < 0 {
		return "", "", false
	}
	rest := line[i+len(lanceBuildMarker):]
	for {
		j := strings.Index(rest, "uuid=")
		if j < 0 {
			return "", "", false
		}
		if j == 0 || !isWordByte(rest[j-1]) { // not e.g. dataset_uuid=
			v := strings.Trim(rest[j+len("uuid="):min(len(rest), j+len("uuid=")+38)], `"`)
			if len(v) >= 36 && isUUID(v[:36]) && (len(v) == 36 || !isWordByte(v[36])) {
				return strings.ToLower(v[:36]), "", true
			}
		}
		rest = rest[j+len("uuid="):]
	}
}

func isWordByte(b byte) bool {
	return b == '_' || b == '-' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
}

// isUUID: 8-4-4-4-12 hex digits.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
				return false
			}
		}
	}
	return true
}

func isPhase(s string) bool {
	if len(s) > maxPhaseBytes || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

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
func (a *Agent) onWorkerLine(inv *invocation, d *wire.TLanceIndexJobDispatch, line []byte) {
	uuid, phase, ok := parseProgressLine(string(line))
	if !ok {
		return
	}
	a.mu.Lock()
	changed, conflict := a.table.announce(inv, uuid, phase)
	uuid, phase = inv.indexUUID, inv.phase
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
