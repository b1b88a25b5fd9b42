package report

import (
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/job"
)

// What a report says about its build beside the outcome (docs/cli.md, jobs
// show): the worker's resources as the backend's supervisor measured them,
// the tail of its redacted stderr, and the index directory a build that
// did not commit left behind. It is evidence for the operator, never read
// to decide an outcome: a malformed part is dropped (the rest of the report
// applies) and the answer says so.

// buildInfo is the parsed part; zero fields are absent.
type buildInfo struct {
	resources *journal.TResources
	logTail   *string
	leftover  string
}

// parseBuildInfo checks the parts; dropped names those that were malformed.
func parseBuildInfo(res *wire.TBuildResources, logTail *string, leftover *string) (b buildInfo, dropped []string) {
	if res != nil {
		if r, ok := parseResources(res); ok {
			b.resources = r
		} else {
			dropped = append(dropped, "the resources")
		}
	}
	if logTail != nil {
		if len(*logTail) <= job.MaxLogTailBytes && utf8.ValidString(*logTail) {
			b.logTail = logTail
		} else {
			dropped = append(dropped, "the log tail")
		}
	}
	if u, ok := indexUUID(leftover); ok {
		b.leftover = u
	} else {
		dropped = append(dropped, "the leftover index uuid")
	}
	return b, dropped
}

// parseResources: no negative figure, a known peak memory source, and the
// finish not before the start.
func parseResources(r *wire.TBuildResources) (*journal.TResources, bool) {
	for _, v := range []*int64{r.StartTimeMs, r.FinishTimeMs, r.WallMs, r.PeakMemoryBytes} {
		if v != nil && *v < 0 {
			return nil, false
		}
	}
	if r.IsSetStartTimeMs() && r.IsSetFinishTimeMs() && r.GetFinishTimeMs() < r.GetStartTimeMs() {
		return nil, false
	}
	switch r.GetPeakMemorySource() {
	case "", job.PeakFromCgroup, job.PeakFromRusage:
	default:
		return nil, false
	}
	return &journal.TResources{StartTimeMs: r.StartTimeMs, FinishTimeMs: r.FinishTimeMs, WallMs: r.WallMs,
		PeakMemoryBytes: r.PeakMemoryBytes, PeakMemorySource: r.PeakMemorySource}, true
}

// onCompletion and onProof put the parsed parts into an M2 or P item.
func (b buildInfo) onCompletion(c *journal.TCompletion) {
	c.Resources, c.LogTail = b.resources, b.logTail
	if b.leftover != "" {
		u := b.leftover
		c.LeftoverIndexUUID = &u
	}
}

func (b buildInfo) onProof(p *journal.TProof) { p.Resources, p.LogTail = b.resources, b.logTail }

// redactTail removes the job's catalog credentials from a log tail
// (Deps.Credentials); nil when there is no tail, or its credentials cannot
// be read (fail closed: the tail is dropped, the report applies).
func (h *Handler) redactTail(rec *job.Record, tail *string) *string {
	if tail == nil || h.d.Credentials == nil {
		return tail
	}
	var opts map[string]string
	if c, ok := h.d.Reader.State().CatalogByID(rec.CatalogID); ok && c.CredentialsRef != "" {
		var err error
		if opts, err = h.d.Credentials.Resolve(c.CredentialsRef); err != nil {
			// The error names the reference, never the content.
			h.log.Warn("report: the catalog's credentials cannot be read to redact the log tail; the tail is dropped",
				zap.Int64("job_id", rec.JobID), zap.Error(err))
			return nil
		}
	}
	t := job.RedactLog(*tail, opts, job.MaxLogTailBytes)
	return &t
}
