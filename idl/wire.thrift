// The wire contract between masters and backends (DESIGN.md §10).
//
// Field ids and enum values are part of the contract: they are pinned by
// idl/pin_test.go. Additions get new ids; ids are never reused.
// Doris's numbering is kept for the shared structs; fields marked "ours" are
// lancemaster additions.
namespace go wire
namespace py lancemaster.wire
namespace java io.lancemaster.wire

// TStatusCode keeps Apache Doris's values (Status.thrift) for the codes it
// shares with Doris; lancemaster's own codes start at 200, clear of Doris's.
enum TStatusCode {
  OK = 0,
  CANCELLED = 1,
  ANALYSIS_ERROR = 2,
  NOT_IMPLEMENTED_ERROR = 3,
  RUNTIME_ERROR = 4,
  MEM_LIMIT_EXCEEDED = 5,
  INTERNAL_ERROR = 6,
  THRIFT_RPC_ERROR = 7,
  TIMEOUT = 8,
  NOT_FOUND = 31,
  INVALID_ARGUMENT = 33,    // payload bounds or a malformed request
  ILLEGAL_STATE = 37,
  NOT_AUTHORIZED = 38,
  SERVICE_UNAVAILABLE = 41,
  // ours
  NOT_READY = 200,          // no master heartbeat yet, or isolation not verified
  STALE_EPOCH = 201,        // the dispatch names another process epoch
  STALE_LEADER_TERM = 202,  // a higher leader term has been seen
  QUEUE_FULL = 203,
  SHUTTING_DOWN = 204,
  NOT_LEADER = 205,         // a master that cannot forward the request
  UNAUTHENTICATED = 206,    // missing or wrong invocation secret
  STALE_REPORT = 207,       // identity does not match the journal
  OTHER_CLUSTER = 208,      // the request names another cluster id than the one this backend serves
}

struct TStatus {
  1: required TStatusCode status_code,
  2: optional list<string> error_msgs,
}

enum TLanceIndexMutationType {
  CREATE = 1,
  REPLACE = 2,
  DROP = 3,
  OPTIMIZE = 4,   // ours (§14): dataset-scoped; index_name, column_name and index_type are ""
}

enum TLanceIndexJobResultCode {
  PRE_INVOCATION_STALE_ADMISSION = 1,
  PRE_INVOCATION_UNSUPPORTED_SCHEMA_CONTRACT = 2,
  PRE_INVOCATION_CREDENTIAL_EXPIRED = 3,
  PRE_INVOCATION_RESOURCE_REJECTED = 4,
  NATIVE_OK = 5,
  NATIVE_COMMIT_CONFLICT = 6,
  NATIVE_NOT_FOUND = 7,
  NATIVE_INVALID_ARGUMENT = 8,
  NATIVE_NOT_SUPPORTED = 9,
  NATIVE_INDEX = 10,
  NATIVE_IO = 11,
  NATIVE_INTERNAL = 12,
}

enum TLanceIndexCompletionReason {
  NONE = 1,
  IF_CONDITION_NOOP = 2,
}

enum TLanceIndexTerminationProof {
  NONE = 1,
  CHILD_REAPED = 2,
  NEVER_LAUNCHED = 3,
}

struct TLanceIndexJobDispatch {
  1: required i64 job_id,
  2: required i64 dispatch_revision,
  3: required string invocation_id,
  4: required i64 be_process_epoch,
  5: required i64 deadline_ms,
  6: required TLanceIndexMutationType mutation_type,
  7: required string index_name,
  8: required string column_name,     // "" for DROP
  9: required string index_type,      // "" for DROP
  10: optional string properties_json,
  11: optional bool if_not_exists,
  12: optional bool if_exists,
  13: required string dataset_uri,
  14: required i64 admitted_dataset_version,
  15: required string schema_contract_json,
  16: optional map<string, string> storage_options, // never journaled
  17: optional string invocation_secret,            // always set by the master
  18: optional i32 max_num_partitions,
  19: optional i32 max_num_sub_vectors,
  20: optional i64 leader_term,                     // ours: fencing token (§7)
  21: optional string cluster_id,                   // ours: the term fence is kept per cluster id
}

// ours: what a build cost, as the backend's supervisor measured it. Times
// are the backend's clock (ms since the epoch).
struct TBuildResources {
  1: optional i64 start_time_ms,        // the worker was started
  2: optional i64 finish_time_ms,       // the worker was reaped
  3: optional i64 wall_ms,
  4: optional i64 peak_memory_bytes,
  5: optional string peak_memory_source, // "cgroup" (memory.peak) or "rusage" (the worker's max RSS)
}

// ours: one index of an OPTIMIZE job's dataset, as listIndices() gave it.
struct TIndexCounts {
  1: optional string index_uuid,
  2: optional i64 indexed_rows,
  3: optional i64 unindexed_rows,
  4: optional i32 segments,
}

struct TOptimizedIndex {
  1: required string name,
  2: optional TIndexCounts before,      // at the version the worker opened
  3: optional TIndexCounts after,       // at the version optimize() committed (unset: the index is gone)
}

struct TLanceIndexJobReport {
  1: required i64 job_id,
  2: required i64 dispatch_revision,
  3: required string invocation_id,
  4: required i64 be_process_epoch,
  5: optional TLanceIndexJobResultCode result_code,  // missing or unknown drops the result
  6: optional TLanceIndexCompletionReason completion_reason,
  7: optional string sanitized_message,
  8: optional bool external_metadata_advanced,
  9: optional TLanceIndexTerminationProof termination_proof,
  10: optional string invocation_secret,  // required by the master
  11: optional bool forwarded,            // ours: set by a master forwarding to the leader (one hop only)
  12: optional string index_uuid,         // ours: NATIVE_OK on CREATE/REPLACE: the uuid of the verified index
  13: optional i64 dataset_version,       // ours: NATIVE_OK: the dataset version the builder verified
  14: optional TBuildResources resources, // ours: measured by the backend's supervisor
  15: optional string log_tail,           // ours: the last part of the worker's redacted stderr, <= 4 KiB
  16: optional string leftover_index_uuid, // ours: not committed: the uuid of the index directory the build left behind
  17: optional list<TOptimizedIndex> optimized_indexes, // ours: OPTIMIZE: every index, before and after
}

struct TLanceIndexJobTerminationReport {
  1: required i64 job_id,
  2: required i64 dispatch_revision,
  3: required string invocation_id,
  4: required i64 be_process_epoch,
  5: required TLanceIndexTerminationProof proof,
  6: optional string invocation_secret,  // ours: termination reports are authenticated too
  7: optional bool forwarded,            // ours: set by a master forwarding to the leader (one hop only)
  8: optional string sanitized_message,  // ours: why the worker ended (e.g. killed by the memory limit), <= 1024 B
  9: optional bool no_result,            // ours: the worker ended without a result frame; no result report follows
  10: optional string index_uuid,        // ours: the uuid the worker announced it was building, if any
  11: optional TBuildResources resources, // ours: measured by the backend's supervisor
  12: optional string log_tail,           // ours: the last part of the worker's redacted stderr, <= 4 KiB
}

// ours: what a running worker announced (§13.4): the uuid of the index it is
// building, as early as it is known, and its phase. Authenticated like a
// result; the master journals it so that the outcome can later be proven
// from the dataset even if the backend loses its memory.
struct TLanceIndexJobProgressReport {
  1: required i64 job_id,
  2: required i64 dispatch_revision,
  3: required string invocation_id,
  4: required i64 be_process_epoch,
  5: optional string invocation_secret,
  6: optional string index_uuid,
  7: optional string phase,              // <= 64 B
  8: optional bool forwarded,            // set by a master forwarding to the leader (one hop only)
  9: optional i64 elapsed_ms,            // since the worker started (the backend's clock)
}

// ---- ours: heartbeat, inspect, query ------------------------------------

struct THeartbeatRequest {
  1: required string master_id,
  2: optional i64 leader_term,
  3: optional list<string> master_addresses, // where to deliver reports
  4: optional string cluster_id,             // the cluster the leader belongs to
}

struct THeartbeatResponse {
  1: required TStatus status,
  2: required i64 be_process_epoch,
  3: optional i32 capacity,            // workers it can run at once
  4: optional i32 queued,
  5: optional i32 running,
  6: optional string version,
  7: optional bool accepting,            // dispatches would be accepted now (isolation verified, queue room,
                                         // not shutting down, this cluster id)
  8: optional string not_accepting_reason,
  9: optional string cluster_id,         // the cluster id this backend serves ("" before the first heartbeat)
  10: optional bool outbox_delivered,    // every report this process found in its outbox at start is delivered or dropped
}

struct TInspectDatasetRequest {
  1: required string dataset_uri,
  2: optional map<string, string> storage_options, // never journaled
  3: optional i64 timeout_ms,
}

struct TLanceField {
  1: required i32 field_id,
  2: required string name,
  3: required string data_type,          // canonical type: int32, utf8, fixed_size_list (dimension and
                                         // element type in the fields below), ...
  4: required bool nullable,
  5: optional i32 list_dimension,        // fixed-size-list dimension
  6: optional string element_type,       // vector element type
  7: optional bool element_nullable,
}

struct TLanceIndexInfo {
  1: required string name,
  2: required string index_type,         // IVF_PQ, BTREE, BITMAP, ...
  3: required list<string> columns,
  4: optional string properties_json,    // canonical parameters where known
  5: optional string index_uuid,         // ours (§13.7)
  6: optional i64 created_at_ms,
  7: optional i64 indexed_rows,
  8: optional i64 unindexed_rows,
  9: optional i32 segments,
  10: optional i64 size_bytes,
}

struct TInspectDatasetResponse {
  1: required TStatus status,
  2: optional i64 dataset_version,
  3: optional list<TLanceField> fields,
  4: optional list<TLanceIndexInfo> indexes,
}

enum TLanceInvocationState {
  UNKNOWN_INVOCATION = 1,  // never accepted by this process (asked after the term fence)
  QUEUED = 2,
  RUNNING = 3,
  FINISHED = 4,
  FORGOTTEN = 5,           // accepted by this process once, its entry since dropped: proves nothing
}

struct TQueryInvocationsRequest {
  1: required i64 leader_term,
  2: required i64 be_process_epoch,
  3: required list<string> invocation_ids,
  4: optional string cluster_id,
}

struct TInvocationStatus {
  1: required string invocation_id,
  2: required TLanceInvocationState state,
  3: optional TLanceIndexJobReport result,             // set when FINISHED
  4: optional TLanceIndexTerminationProof termination_proof,
  5: optional string index_uuid,         // the uuid the worker announced it was building, if any
  6: optional bool no_result,            // FINISHED without a result frame (crash, OOM, killed)
  7: optional string sanitized_message,  // FINISHED without a result: why the worker ended
}

struct TQueryInvocationsResponse {
  1: required TStatus status,
  2: optional list<TInvocationStatus> invocations,
}

// ---- ours: the outcome of a job from the dataset (§13.4) ------------------
// Asked once the job's worker is provably gone without a trusted result.
// The backend runs its builder read-only over the retained versions after
// the admitted one; nothing is written.

enum TLanceResolveOutcome {
  COMMITTED = 1,
  NOT_COMMITTED = 2,
  UNKNOWN = 3,
}

struct TResolveJobRequest {
  1: required i64 job_id,                          // for logs only
  2: required string dataset_uri,
  3: optional map<string, string> storage_options, // never journaled
  4: optional i64 timeout_ms,
  5: required TLanceIndexMutationType mutation_type,
  6: required string index_name,
  7: required i64 admitted_dataset_version,
  8: optional string index_uuid,                   // the uuid this invocation built (announced by its worker)
  9: optional string admitted_index_uuid,          // REPLACE/DROP: the uuid of the index at admission
  10: optional bool trust_exclusive_writer,        // lance_index_job_trust_exclusive_writer
  11: optional string cluster_id,
}

struct TResolveJobResponse {
  1: required TStatus status,
  2: optional TLanceResolveOutcome outcome,
  3: optional string evidence,                     // what was read and what it proves, <= 1024 B
  4: optional i64 head_version,                    // the newest version read
  5: optional string index_uuid,                   // COMMITTED: the uuid found
}

// ---- ours: a build's log (§ jobs logs) -----------------------------------
// The worker's stderr ring, redacted as every line the backend keeps. Asked
// by the leader for `jobs logs`; answers while the backend still has the
// invocation (a finished one until it is dropped with its entry).

struct TJobLogRequest {
  1: required string invocation_id,
  2: optional string cluster_id,
  3: optional i64 leader_term,
  4: optional i32 max_bytes,            // the newest bytes; default and bound 256 KiB
}

struct TJobLogResponse {
  1: required TStatus status,
  2: optional TLanceInvocationState state,
  3: optional string log,
  4: optional bool truncated,           // older lines were dropped (the ring's bound or max_bytes)
  5: optional string phase,             // RUNNING: the last phase seen
  6: optional i64 elapsed_ms,           // RUNNING: since the worker started
}

// ---- ours: does an object store honour conditional PUT (§ object storage) --
// Lance commits a version with a PUT of the next manifest under
// If-None-Match: * (or a no-replace rename). A store that ignores the
// precondition loses concurrent commits silently, so a backend refuses it.

struct TProbeStoreRequest {
  1: required string root_uri,                     // s3://bucket/prefix
  2: optional map<string, string> storage_options, // never journaled
  3: optional string cluster_id,
  4: optional i64 timeout_ms,
}

struct TProbeStoreResponse {
  1: required TStatus status,             // OK: probed (see conditional_put); else the probe could not run
  2: optional bool conditional_put,       // the store refused the second If-None-Match PUT with 412
  3: optional string detail,              // what was done and seen, <= 1024 B, never a credential
}

service LanceBackendService {
  TStatus submit_lance_index_job(1: TLanceIndexJobDispatch dispatch),
  THeartbeatResponse heartbeat(1: THeartbeatRequest request),
  TInspectDatasetResponse inspect_lance_dataset(1: TInspectDatasetRequest request),
  TQueryInvocationsResponse query_lance_index_invocations(1: TQueryInvocationsRequest request),
  TResolveJobResponse resolve_lance_index_job(1: TResolveJobRequest request),
  TJobLogResponse get_lance_index_job_log(1: TJobLogRequest request),
  TProbeStoreResponse probe_object_store(1: TProbeStoreRequest request),
}
