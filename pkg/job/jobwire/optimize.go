package jobwire

import (
	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/job"
)

// OptimizedFromWire converts an OPTIMIZE's per-index before/after as a
// backend reports it (TLanceIndexJobReport.optimized_indexes). Nil elements
// are skipped; bounds are job.EncodeOptimized's to check.
func OptimizedFromWire(l []*wire.TOptimizedIndex) []job.OptimizedIndex {
	if len(l) == 0 {
		return nil
	}
	out := make([]job.OptimizedIndex, 0, len(l))
	for _, w := range l {
		if w == nil {
			continue
		}
		out = append(out, job.OptimizedIndex{Name: w.Name, Before: countsFromWire(w.Before), After: countsFromWire(w.After)})
	}
	return out
}

func countsFromWire(w *wire.TIndexCounts) *job.IndexCounts {
	if w == nil {
		return nil
	}
	return &job.IndexCounts{IndexUUID: w.GetIndexUUID(), IndexedRows: w.GetIndexedRows(),
		UnindexedRows: w.GetUnindexedRows(), Segments: w.GetSegments()}
}

// OptimizedToWire is the per-index list as the admin API shows it
// (TJobView.optimized_indexes). Every count is set, zero included.
func OptimizedToWire(l []job.OptimizedIndex) []*wire.TOptimizedIndex {
	if len(l) == 0 {
		return nil
	}
	out := make([]*wire.TOptimizedIndex, len(l))
	for i, ix := range l {
		out[i] = &wire.TOptimizedIndex{Name: ix.Name, Before: countsToWire(ix.Before), After: countsToWire(ix.After)}
	}
	return out
}

func countsToWire(c *job.IndexCounts) *wire.TIndexCounts {
	if c == nil {
		return nil
	}
	cp := *c
	w := &wire.TIndexCounts{IndexedRows: &cp.IndexedRows, UnindexedRows: &cp.UnindexedRows, Segments: &cp.Segments}
	if cp.IndexUUID != "" {
		w.IndexUUID = &cp.IndexUUID
	}
	return w
}
