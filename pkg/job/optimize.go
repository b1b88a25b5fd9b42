package job

import (
	"encoding/json"
	"strings"
)

// OPTIMIZE (DESIGN.md §14) is a dataset-scoped job: compaction, then every
// index of the dataset brought up to date. Its fence is the dataset, so it is
// exclusive with every index job on that dataset, and they with it (the FSM's
// admission check). It carries no index name, column, type or properties.

// Bounds of an OPTIMIZE's per-index result.
const (
	// MaxOptimizedIndexes bounds the indexes one OPTIMIZE result lists.
	MaxOptimizedIndexes = 64
	// MaxOptimizedBytes bounds the list's canonical form on a record.
	MaxOptimizedBytes = 16 << 10
)

// IndexCounts is one index at one version, as listIndices() gave it.
type IndexCounts struct {
	IndexUUID     string `json:"u,omitempty"`
	IndexedRows   int64  `json:"i,omitempty"`
	UnindexedRows int64  `json:"n,omitempty"`
	Segments      int32  `json:"s,omitempty"`
}

// OptimizedIndex is one index of an OPTIMIZE's dataset: Before at the
// version the worker opened, After at the version optimize() committed
// (nil: not reported, or the index is gone).
type OptimizedIndex struct {
	Name   string       `json:"name"`
	Before *IndexCounts `json:"b,omitempty"`
	After  *IndexCounts `json:"a,omitempty"`
}

// IsOptimize reports whether the record is an OPTIMIZE job.
func (r *Record) IsOptimize() bool { return r.MutationType == Optimize }

// OptimizeReturnsToPending is the leader's choice for an OPTIMIZE whose
// worker is provably dead without a trusted result: a crashed OPTIMIZE is
// safe to run again, so it returns to PENDING (attempts + 1) while
// attempts+1 < maxAttempts (lance_index_job_max_dispatch_attempts), the bound
// M2″ uses; after that it ends UNKNOWN with NO_TRUSTED_RESULT (not
// NOT_COMMITTED: a crashed optimize may have committed).
func OptimizeReturnsToPending(r *Record, maxAttempts int64) bool {
	return r.IsOptimize() && int64(r.DispatchAttempts)+1 < maxAttempts
}

// EncodeOptimized is the canonical form of an OPTIMIZE's per-index result
// as a record keeps it: a string, so that a Record stays free of reference
// types (a shallow copy is a deep copy, and records compare with ==). ""
// for an empty list. It checks the bounds: at most MaxOptimizedIndexes
// entries, names of at most MaxNameBytes, uuids of at most
// MaxIndexUUIDBytes, valid UTF-8, no negative count, and MaxOptimizedBytes
// in all.
func EncodeOptimized(ixs []OptimizedIndex) (string, error) {
	if len(ixs) == 0 {
		return "", nil
	}
	if len(ixs) > MaxOptimizedIndexes {
		return "", Errorf(CodeInvalid, "%d optimized indexes listed; at most %d are allowed", len(ixs), MaxOptimizedIndexes)
	}
	for _, ix := range ixs {
		if ix.Name == "" {
			return "", Errorf(CodeInvalid, "an optimized index has no name")
		}
		if err := CheckBytes("optimized index name", ix.Name, MaxNameBytes); err != nil {
			return "", err
		}
		for _, c := range []*IndexCounts{ix.Before, ix.After} {
			if c == nil {
				continue
			}
			if err := CheckBytes("optimized index uuid", c.IndexUUID, MaxIndexUUIDBytes); err != nil {
				return "", err
			}
			if c.IndexedRows < 0 || c.UnindexedRows < 0 || c.Segments < 0 {
				return "", Errorf(CodeInvalid, "optimized index %q has a negative count", ix.Name)
			}
		}
	}
	b, err := json.Marshal(ixs)
	if err != nil {
		return "", Errorf(CodeInvalid, "optimized indexes cannot be encoded: %v", err)
	}
	if len(b) > MaxOptimizedBytes {
		return "", Errorf(CodeInvalid, "optimized indexes take %d bytes; at most %d are allowed", len(b), MaxOptimizedBytes)
	}
	return string(b), nil
}

// DecodeOptimized reads what EncodeOptimized wrote. A value that does not
// decode (a hand-edited snapshot) reads as no list.
func DecodeOptimized(s string) []OptimizedIndex {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	var out []OptimizedIndex
	if json.Unmarshal([]byte(s), &out) != nil {
		return nil
	}
	return out
}

// NewOptimize is the record a leader admits for OPTIMIZE of db.table of a
// catalog whose dataset is at locator: no index name (its fence name is
// OptimizeFenceName), column, type or properties. The admitted dataset
// version is the caller's to set from its snapshot.
func NewOptimize(catalogID int64, db, table, locator, creator string) *Record {
	return &Record{Creator: creator, CatalogID: catalogID, DB: db, Table: table, Provider: ProviderDirectory,
		Locator: locator, NormalizedIndexName: OptimizeFenceName, MutationType: Optimize}
}
