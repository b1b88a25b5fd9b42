// Package frame is the worker protocol between the backend agent and its
// one-shot builder process (docs/builder.md): the agent writes ONE
// request frame to the worker's stdin and reads ONE result frame from its
// stdout. A frame is a 4-byte big-endian length followed by that many bytes
// of UTF-8 JSON. Storage credentials travel only here, on stdin: never in
// argv, the environment or a log.
package frame

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Protocol is the version both sides put in every frame.
const Protocol = 1

// Size bounds. A frame above its bound is a protocol failure: a request is
// never written, a result is not trusted.
const (
	MaxRequestBytes = 1 << 20   // a dispatch with ≤ 64 storage options of ≤ 4 KiB fits easily
	MaxResultBytes  = 256 << 10 // a result or an inspect answer
)

// Modes.
const (
	ModeBuild   = "build"
	ModeInspect = "inspect"
	// ModeResolve reads a job's outcome from its dataset, read-only
	// (DESIGN.md §13.4; docs/builder.md "Resolve mode").
	ModeResolve = "resolve"
)

// Resolve outcomes (Result.Outcome): the names of wire.TLanceResolveOutcome.
const (
	OutcomeCommitted    = "COMMITTED"
	OutcomeNotCommitted = "NOT_COMMITTED"
	OutcomeUnknown      = "UNKNOWN"
)

// Request is what a worker receives on stdin.
type Request struct {
	Protocol       int               `json:"protocol"`
	Mode           string            `json:"mode"`
	DatasetURI     string            `json:"dataset_uri"`
	StorageOptions map[string]string `json:"storage_options,omitempty"`

	// Build and resolve modes (resolve: MutationType, IndexName,
	// AdmittedDatasetVersion and the three resolve fields below).
	JobID                  int64  `json:"job_id,omitempty"`
	InvocationID           string `json:"invocation_id,omitempty"`
	MutationType           string `json:"mutation_type,omitempty"` // CREATE | REPLACE | DROP | OPTIMIZE (build only; no index name, column or type)
	IndexName              string `json:"index_name,omitempty"`
	ColumnName             string `json:"column_name,omitempty"`
	IndexType              string `json:"index_type,omitempty"`      // IVF_PQ | IVF_FLAT | IVF_RQ | IVF_HNSW_SQ | IVF_HNSW_PQ | BTREE | BITMAP | LABEL_LIST | FTS | FM ("" for DROP, OPTIMIZE)
	PropertiesJSON         string `json:"properties_json,omitempty"` // canonical, e.g. {"metric":"l2","num_partitions":64}
	IfNotExists            bool   `json:"if_not_exists,omitempty"`
	IfExists               bool   `json:"if_exists,omitempty"`
	AdmittedDatasetVersion int64  `json:"admitted_dataset_version,omitempty"`
	SchemaContractJSON     string `json:"schema_contract_json,omitempty"`
	DeadlineMs             int64  `json:"deadline_ms,omitempty"`

	// Resolve mode only. IndexUUID is the uuid this invocation built (as
	// its worker announced it; "" if unknown), AdmittedIndexUUID the uuid
	// of the index at admission ("" if none or unknown).
	IndexUUID            string `json:"index_uuid,omitempty"`
	AdmittedIndexUUID    string `json:"admitted_index_uuid,omitempty"`
	TrustExclusiveWriter bool   `json:"trust_exclusive_writer,omitempty"`
}

// Field is one schema field as inspect reports it (the canonical types of
// pkg/job: int32, utf8, fixed_size_list with list_dimension and element_type…;
// list and large_list with element_type and element_nullable, no list_dimension).
type Field struct {
	FieldID         int32  `json:"field_id"`
	Name            string `json:"name"`
	DataType        string `json:"data_type"`
	Nullable        bool   `json:"nullable"`
	ListDimension   int32  `json:"list_dimension,omitempty"`
	ElementType     string `json:"element_type,omitempty"`
	ElementNullable bool   `json:"element_nullable,omitempty"`
}

// Index is one existing index as inspect reports it.
type Index struct {
	Name           string   `json:"name"`
	IndexType      string   `json:"index_type"` // the build types of Request.IndexType | other Lance names (IVF_SQ, NGRAM, …)
	Columns        []string `json:"columns"`
	PropertiesJSON string   `json:"properties_json,omitempty"`
}

// IndexStats is what inspect reports of an index beyond its definition
// (DESIGN.md §13.7), matched to Result.Indexes by exact name. A nil field
// (or an empty uuid) is one LanceDB did not report.
type IndexStats struct {
	Name          string `json:"name"`
	IndexUUID     string `json:"index_uuid,omitempty"`
	CreatedAtMs   *int64 `json:"created_at_ms,omitempty"`
	IndexedRows   *int64 `json:"indexed_rows,omitempty"`
	UnindexedRows *int64 `json:"unindexed_rows,omitempty"`
	Segments      *int32 `json:"segments,omitempty"`
	SizeBytes     *int64 `json:"size_bytes,omitempty"`
}

// IndexCounts is one index as listIndices() gave it, for OPTIMIZE's
// before/after (DESIGN.md §14). A nil count is one LanceDB did not report.
type IndexCounts struct {
	IndexUUID     string `json:"index_uuid,omitempty"`
	IndexedRows   *int64 `json:"indexed_rows,omitempty"`
	UnindexedRows *int64 `json:"unindexed_rows,omitempty"`
	Segments      *int32 `json:"segments,omitempty"`
}

// OptimizedIndex is one index of an OPTIMIZE job's dataset: Before at the
// version the worker opened, After at the version it verified (nil: the
// index is gone there).
type OptimizedIndex struct {
	Name   string       `json:"name"`
	Before *IndexCounts `json:"before,omitempty"`
	After  *IndexCounts `json:"after,omitempty"`
}

// Result is what a worker answers on stdout.
//
// Build mode: ResultCode is one of the wire's TLanceIndexJobResultCode names
// (PRE_INVOCATION_STALE_ADMISSION … NATIVE_INTERNAL); Message is sanitized
// (never a credential) and is cut to 1024 bytes by the agent. A NATIVE_OK
// was verified on a fresh connection (§13.7): DatasetVersion is the version
// verified (= NewDatasetVersion) and IndexUUID the uuid of the index there
// (CREATE, REPLACE; "" for DROP). OPTIMIZE: a NATIVE_OK means the version
// advanced and no index that existed before has unindexed rows at the
// verified version; OptimizedIndexes lists every index, before and after.
// A build that did not commit names in LeftoverIndexUUID the uuid of the
// index directory it left behind, if it knows one.
// Inspect mode: OK with DatasetVersion, Fields, Indexes and IndexStats, or
// !OK with ErrorCode (NOT_FOUND | INVALID_ARGUMENT | IO | INTERNAL) and
// Message.
// Resolve mode: OK with Outcome (COMMITTED | NOT_COMMITTED | UNKNOWN),
// Evidence (≤ 1024 B, sanitized), HeadVersion and, for COMMITTED by uuid,
// IndexUUID; or !OK with ErrorCode and Message as inspect.
type Result struct {
	Protocol int    `json:"protocol"`
	Mode     string `json:"mode"`

	ResultCode               string `json:"result_code,omitempty"`
	Message                  string `json:"message,omitempty"`
	ExternalMetadataAdvanced bool   `json:"external_metadata_advanced,omitempty"`
	NewDatasetVersion        int64  `json:"new_dataset_version,omitempty"`

	OK             bool    `json:"ok,omitempty"`
	ErrorCode      string  `json:"error_code,omitempty"`
	DatasetVersion int64   `json:"dataset_version,omitempty"`
	Fields         []Field `json:"fields,omitempty"`
	Indexes        []Index `json:"indexes,omitempty"`

	IndexStats []IndexStats `json:"index_stats,omitempty"`
	IndexUUID  string       `json:"index_uuid,omitempty"`

	OptimizedIndexes  []OptimizedIndex `json:"optimized_indexes,omitempty"`
	LeftoverIndexUUID string           `json:"leftover_index_uuid,omitempty"`

	Outcome     string `json:"outcome,omitempty"`
	Evidence    string `json:"evidence,omitempty"`
	HeadVersion int64  `json:"head_version,omitempty"`
}

// ErrTooLarge: a frame above its bound.
var ErrTooLarge = errors.New("frame: too large")

// Write writes v as one frame of at most max bytes.
func Write(w io.Writer, v any, max int) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("frame: encode: %w", err)
	}
	if len(b) > max {
		return fmt.Errorf("%w: %d bytes, at most %d", ErrTooLarge, len(b), max)
	}
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(b)))
	if _, err := w.Write(append(n[:], b...)); err != nil {
		return fmt.Errorf("frame: write: %w", err)
	}
	return nil
}

// Read reads one frame of at most max bytes into v. It never allocates more
// than max+4 bytes whatever the length prefix claims. Trailing bytes after
// the frame are the caller's concern (a worker must write exactly one frame).
func Read(r io.Reader, v any, max int) error {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return fmt.Errorf("frame: read length: %w", err)
	}
	size := binary.BigEndian.Uint32(n[:])
	if int64(size) > int64(max) {
		return fmt.Errorf("%w: length prefix %d, at most %d", ErrTooLarge, size, max)
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(r, b); err != nil {
		return fmt.Errorf("frame: read body: %w", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("frame: decode: %w", err)
	}
	return nil
}
