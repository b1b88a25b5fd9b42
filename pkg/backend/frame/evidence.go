package frame

import (
	"encoding/json"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/job"
)

// LanceLogEnv is the LANCEDB_LOG value the supervisor sets in every build
// worker's environment: errors only, except that Lance's vector-index module
// logs at debug level, which includes the line
//
//	[<time> DEBUG lance::index::vector] build_vector_index; column="…" name="…" uuid=<uuid> params=…
//
// at the start of a vector build. That uuid is the indexUuid the build
// commits (verified with IVF_PQ and IVF_HNSW_SQ, Lance 8). The level also
// lets through Lance's INFO lines of lance::index::vector::{ivf,builder,
// utils} (a dozen per build), which ParseProgressLine reads as phases, and
// Lance's file audit at info level, whose
//
//	[<time> INFO  lance::file_audit] mode="create" type="manifest" path="…"
//
// line marks the commit of a new dataset version (one per commit; the
// other audit lines name data and index files and are not phases).
const LanceLogEnv = "error,lance::index::vector=debug,lance::file_audit=info"

// ProgressPrefix starts the builder's own announcement line on stderr:
//
//	lancemaster-progress {"index_uuid":"<uuid>"}
//	lancemaster-progress {"phase":"building"}
//
// one JSON object on one line, with index_uuid and/or phase (≤ 64 bytes).
const ProgressPrefix = "lancemaster-progress "

// MaxPhaseBytes bounds a phase (TProgress.phase).
const MaxPhaseBytes = 64

// IsUUID reports whether s is a lowercase canonical uuid, the form Lance
// writes index uuids in.
func IsUUID(s string) bool {
	u, ok := job.CanonicalUUID(s)
	return ok && u == s
}

// announcedUUID is s lowercased if it is a canonical uuid in any case.
func announcedUUID(s string) (string, bool) { return job.CanonicalUUID(s) }

// Lance's INFO lines that mark a phase of a vector build (message prefix →
// phase). Matched only on a line whose log target is lance::index::vector….
var lancePhases = []struct{ prefix, phase string }{
	{"Start to train IVF model", "ivf_training"},
	{"Start to train quantizer", "quantizer_training"},
	{"shuffle column ", "shuffling"},
	{"merging ", "merging"},
}

// ParseProgressLine recognizes one line of a worker's stderr (surrounding
// white space, such as the trailing newline, is ignored) that announces
// progress:
//
//   - the builder's own line (ProgressPrefix + JSON): its index_uuid and
//     phase; the line is refused whole (ok false) if its uuid is not a uuid
//     or its phase is empty, above MaxPhaseBytes, not UTF-8 or holds a
//     control character;
//   - in both kinds of line a uuid in upper case is accepted and returned
//     in lower case (Lance's form);
//   - Lance's build_vector_index debug line (see LanceLogEnv): its uuid,
//     with phase "building"; the key=value fields are tokenized (quoted
//     values with their escapes), so an index or column name cannot forge a
//     uuid;
//   - Lance's INFO lines of lance::index::vector… that start a phase: the
//     phase only ("ivf_training", "quantizer_training", "shuffling",
//     "merging");
//   - Lance's file audit line of a new manifest: "committing".
//
// Anything else answers ok false. A line that starts with neither prefix
// is refused after a prefix check, so the agent may run it on every stderr
// line.
func ParseProgressLine(line string) (uuid, phase string, ok bool) {
	line = strings.TrimSpace(line)
	if rest, found := strings.CutPrefix(line, ProgressPrefix); found {
		return parseOwnLine(rest)
	}
	target, msg, found := lanceLogLine(line)
	if found && target == "lance::file_audit" {
		// mode and type come first; the path, which may hold anything, after.
		if strings.HasPrefix(msg, `mode="create" type="manifest" `) {
			return "", "committing", true
		}
		return "", "", false
	}
	if !found || !strings.HasPrefix(target, "lance::index::vector") {
		return "", "", false
	}
	if rest, found := strings.CutPrefix(msg, "build_vector_index; "); found && target == "lance::index::vector" {
		u, good := tokenUUID(rest)
		if !good {
			return "", "", false
		}
		return u, "building", true
	}
	for _, p := range lancePhases {
		if strings.HasPrefix(msg, p.prefix) && !strings.HasSuffix(msg, " done") {
			return "", p.phase, true
		}
	}
	return "", "", false
}

func parseOwnLine(rest string) (uuid, phase string, ok bool) {
	var v struct {
		IndexUUID *string `json:"index_uuid"`
		Phase     *string `json:"phase"`
	}
	if err := json.Unmarshal([]byte(rest), &v); err != nil {
		return "", "", false
	}
	if v.IndexUUID != nil {
		u, good := announcedUUID(*v.IndexUUID)
		if !good {
			return "", "", false
		}
		uuid = u
	}
	if v.Phase != nil {
		if !validPhase(*v.Phase) {
			return "", "", false
		}
		phase = *v.Phase
	}
	return uuid, phase, uuid != "" || phase != ""
}

func validPhase(p string) bool {
	if p == "" || len(p) > MaxPhaseBytes || !utf8.ValidString(p) {
		return false
	}
	return strings.IndexFunc(p, unicode.IsControl) < 0
}

// lanceLogLine splits env_logger's default format,
// "[<time> <LEVEL> <target>] <message>", into target and message.
func lanceLogLine(line string) (target, msg string, ok bool) {
	if !strings.HasPrefix(line, "[") {
		return "", "", false
	}
	head, msg, found := strings.Cut(line[1:], "] ")
	if !found {
		return "", "", false
	}
	f := strings.Fields(head)
	if len(f) != 3 {
		return "", "", false
	}
	return f[2], msg, true
}

// tokenUUID reads the key=value fields of build_vector_index's message up to
// params= and returns the one uuid field.
func tokenUUID(s string) (string, bool) {
	var uuid string
	seen := 0
	for s != "" {
		s = strings.TrimLeft(s, " ")
		key, rest, found := strings.Cut(s, "=")
		if !found || key == "" || strings.ContainsAny(key, " \"") {
			break
		}
		if key == "params" {
			break // a struct's Debug form follows; uuid comes before it
		}
		var val string
		if strings.HasPrefix(rest, `"`) {
			end := closingQuote(rest)
			if end < 0 {
				return "", false
			}
			val, s = rest[1:end], rest[end+1:]
		} else {
			val, s, _ = strings.Cut(rest, " ")
		}
		if key == "uuid" {
			uuid = val
			seen++
		}
	}
	if seen != 1 {
		return "", false
	}
	return announcedUUID(uuid)
}

// closingQuote is the index of the quote ending the quoted value at s[0],
// honoring backslash escapes; -1 if there is none.
func closingQuote(s string) int {
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return -1
}

// ApplyIndexStats copies what inspect reported of each index beyond its
// definition (r.IndexStats, §13.7) into the wire answer's indexes, matched by
// exact name; what LanceDB did not report stays unset. The inspect path
// calls it on the answer jobwire.InspectResponse built from r.
func ApplyIndexStats(indexes []*wire.TLanceIndexInfo, stats []IndexStats) {
	byName := make(map[string]*IndexStats, len(stats))
	for i := range stats {
		byName[stats[i].Name] = &stats[i]
	}
	for _, ix := range indexes {
		if ix == nil {
			continue
		}
		st := byName[ix.Name]
		if st == nil {
			continue
		}
		if IsUUID(st.IndexUUID) {
			u := st.IndexUUID
			ix.IndexUUID = &u
		}
		ix.CreatedAtMs = nonNegative(st.CreatedAtMs)
		ix.IndexedRows = nonNegative(st.IndexedRows)
		ix.UnindexedRows = nonNegative(st.UnindexedRows)
		ix.SizeBytes = nonNegative(st.SizeBytes)
		if st.Segments != nil && *st.Segments >= 0 {
			n := *st.Segments
			ix.Segments = &n
		}
	}
}

func nonNegative(p *int64) *int64 {
	if p == nil || *p < 0 {
		return nil
	}
	n := *p
	return &n
}

// ApplyVerifiedCommit copies a verified NATIVE_OK's index uuid and dataset
// version (§13.7) into the report: TLanceIndexJobReport.index_uuid (12) and
// dataset_version (13). It does nothing for any other result; a uuid that is
// not a uuid or a version that is not positive is left out. The build path
// calls it where it sets the report's result code from r.
func ApplyVerifiedCommit(rep *wire.TLanceIndexJobReport, r *Result) {
	if rep == nil || r == nil || r.Mode != ModeBuild || r.ResultCode != "NATIVE_OK" {
		return
	}
	if IsUUID(r.IndexUUID) {
		u := r.IndexUUID
		rep.IndexUUID = &u
	}
	if r.DatasetVersion > 0 {
		v := r.DatasetVersion
		rep.DatasetVersion = &v
	}
}

// ApplyOptimized copies an OPTIMIZE's verified per-index before/after into
// its report (field 17): only on a NATIVE_OK of mode build, at most 64
// indexes, names within the name bound, uuids only when uuid-shaped, counts
// only when not negative. What does not fit is left out, not guessed.
func ApplyOptimized(rep *wire.TLanceIndexJobReport, r *Result) {
	if rep == nil || r == nil || r.Mode != ModeBuild || r.ResultCode != "NATIVE_OK" || len(r.OptimizedIndexes) == 0 {
		return
	}
	out := make([]*wire.TOptimizedIndex, 0, min(len(r.OptimizedIndexes), job.MaxOptimizedIndexes))
	for _, ix := range r.OptimizedIndexes {
		if len(out) == job.MaxOptimizedIndexes {
			break
		}
		if ix.Name == "" || len(ix.Name) > job.MaxNameBytes {
			continue
		}
		out = append(out, &wire.TOptimizedIndex{Name: ix.Name, Before: countsToWire(ix.Before), After: countsToWire(ix.After)})
	}
	rep.OptimizedIndexes = out
}

func countsToWire(c *IndexCounts) *wire.TIndexCounts {
	if c == nil {
		return nil
	}
	w := &wire.TIndexCounts{}
	if IsUUID(c.IndexUUID) {
		u := c.IndexUUID
		w.IndexUUID = &u
	}
	if c.IndexedRows != nil && *c.IndexedRows >= 0 {
		w.IndexedRows = thriftInt64(*c.IndexedRows)
	}
	if c.UnindexedRows != nil && *c.UnindexedRows >= 0 {
		w.UnindexedRows = thriftInt64(*c.UnindexedRows)
	}
	if c.Segments != nil && *c.Segments >= 0 {
		s := *c.Segments
		w.Segments = &s
	}
	return w
}

func thriftInt64(v int64) *int64 { return &v }
