// The journal: every record and command the replicated FSM stores, encoded
// with Thrift's compact protocol so that field ids make rolling upgrades safe
// (a newer master adds fields with new ids; an older one skips them).
//
// Never renumber or reuse an id. Enum values start at 1; a missing optional
// enum reads as the documented default (DESIGN.md §2).
namespace go journal
namespace py lancemaster.journal
namespace java io.lancemaster.journal

enum TMutationType {
  CREATE = 1,
  REPLACE = 2,
  DROP = 3,
  OPTIMIZE = 4,   // §14: dataset-scoped; its fence is the dataset (index name "__lance_optimize")
}

// A missing mutation_state reads as UNKNOWN (DESIGN.md §2).
enum TMutationState {
  PENDING = 1,
  RUNNING = 2,
  COMMITTED = 3,
  NOT_COMMITTED = 4,
  UNKNOWN = 5,
  CANCELLED = 6,
  RESOLVING = 7,   // §13.3: the worker is provably gone without a trusted result; the outcome is read from the dataset
}

// A missing refresh_state reads as REQUIRED (DESIGN.md §2).
enum TRefreshState {
  NOT_REQUIRED = 1,
  REQUIRED = 2,
  RUNNING = 3,
  DONE = 4,
  FAILED = 5,
}

// The termination proof that released a possible-live slot (DESIGN.md §4.3).
enum TTerminationProof {
  NONE = 1,
  CHILD_REAPED = 2,
  NEVER_LAUNCHED = 3,
  PROCESS_EPOCH_GONE = 4,
  NOT_ENQUEUED = 5,
}

// Result codes as DESIGN.md §6; NO_TRUSTED_RESULT is master-only.
enum TResultCode {
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
  NO_TRUSTED_RESULT = 100,
}

enum TCompletionReason {
  NONE = 1,
  IF_CONDITION_NOOP = 2,
  RESOLVED_FROM_DATASET = 3,   // §13.4: the outcome was proven from the dataset's retained versions
}

// What a build cost (the backend's supervisor measured it; backend clock).
struct TResources {
  1: optional i64 start_time_ms,
  2: optional i64 finish_time_ms,
  3: optional i64 wall_ms,
  4: optional i64 peak_memory_bytes,
  5: optional string peak_memory_source,  // cgroup | rusage
}

struct TIndexCountsRecord {
  1: optional string index_uuid,
  2: optional i64 indexed_rows,
  3: optional i64 unindexed_rows,
  4: optional i32 segments,
}

// OPTIMIZE: one index before and after (§14).
struct TOptimizedIndexRecord {
  1: required string name,
  2: optional TIndexCountsRecord before,
  3: optional TIndexCountsRecord after,
}

struct TJobResult {
  1: optional TResultCode code,
  2: optional TCompletionReason reason,
  3: optional string message,
  4: optional bool external_metadata_advanced,
}

struct TJobRecord {
  1: required i64 job_id,
  2: optional string creator,
  3: optional i64 rev,
  4: optional i64 create_time_ms,
  5: optional i64 update_time_ms,
  6: optional i64 catalog_id,
  7: optional string db,
  8: optional string table,
  9: optional string provider,
  10: optional string locator,
  11: optional string display_index_name,
  12: optional string normalized_index_name,
  13: optional TMutationType mutation_type,
  14: optional bool if_not_exists,
  15: optional bool if_exists,
  16: optional string index_type,
  17: optional string column,
  18: optional string properties_json,
  19: optional i64 admitted_dataset_version,
  20: optional string schema_contract,
  21: optional TMutationState mutation_state,
  22: optional TRefreshState refresh_state,
  23: optional TJobResult result,
  24: optional i64 backend_id,
  25: optional i64 process_epoch,
  26: optional i64 dispatch_revision,
  27: optional string invocation_id,
  28: optional string invocation_secret,
  29: optional i64 deadline_ms,
  30: optional i64 leader_term,
  31: optional bool possible_live_owned,
  32: optional TTerminationProof termination_proof,
  33: optional bool force_released,
  34: optional string force_actor,
  35: optional i64 force_time_ms,
  36: optional string force_note,
  37: optional string force_warning,
  38: optional i64 refresh_failure_time_ms,
  39: optional string cancel_actor,
  40: optional i32 dispatch_attempts,      // M2'' returns to PENDING (§13.2)
  41: optional string index_uuid,          // the uuid this dispatch built: announced early, or verified with NATIVE_OK
  42: optional string admitted_index_uuid, // the uuid of the index named at admission, if it existed (§13.7)
  43: optional string termination_message, // why the worker ended, from the backend (§13.3)
  44: optional string build_phase,         // the worker's last announced phase
  45: optional i64 resolve_after_ms,       // RESOLVING: not read from the dataset before (object stores: a PUT may still land)
  46: optional string leftover_index_uuid, // not committed: the index directory the build left behind
  47: optional TResources resources,       // the last dispatch's worker
  48: optional string log_tail,            // the last part of that worker's redacted stderr (<= 4 KiB)
  49: optional i64 dispatch_time_ms,       // M1 of the current dispatch (master clock)
  50: optional i64 build_elapsed_ms,       // the worker's elapsed time at its last progress report
  51: optional i64 progress_time_ms,       // when that report was applied (master clock)
  52: optional list<TOptimizedIndexRecord> optimized_indexes, // OPTIMIZE's result
  53: optional i64 result_dataset_version, // NATIVE_OK: the version the builder verified
  54: optional string claimed_creator,     // the name the client claimed (--as) when creator is its verified certificate identity
  55: optional list<TJobTransition> timeline, // the transitions after admission, appended by Apply (<= 32; absent: none yet)
  56: optional i64 admit_index,            // the journal index of the admission entry (the timeline's ADMITTED)
  57: optional bool restore_hold,          // back from an operator snapshot restore whose dispatch history nothing vouches for: never dispatched again (docs/operations.md)
}

// One kind of job transition (the timeline; pkg/job's TransitionKind).
enum TJobTransitionKind {
  ADMITTED = 1,            // derived from the record, never stored
  DISPATCHED = 2,          // M1 (detail: backend and attempt)
  ACCEPTED = 3,            // the worker announced the index it builds (detail: uuid)
  PHASE = 4,               // detail: the phase
  REPORTED = 5,            // a result (detail: its code)
  RETURNED_TO_PENDING = 6, // M2'': never enqueued, back to PENDING
  RESOLVING = 7,
  RESOLVED = 8,            // detail: the outcome
  UNKNOWN = 9,
  CANCELLED = 10,
  FORCE_RELEASED = 11,     // detail: the operator's note
  REFRESH_REQUIRED = 12,
  REFRESH_RUNNING = 13,
  REFRESH_DONE = 14,
  REFRESH_FAILED = 15,
  DONE = 16,               // the job released its fence and quota
  SLOT_RELEASED = 17,      // the worker is provably gone (detail: the proof)
  HELD = 18,               // held by an operator snapshot restore: never dispatched again (detail: why)
}

// One entry of a job's timeline.
struct TJobTransition {
  1: required TJobTransitionKind kind,
  2: optional i64 time_ms,   // the command's master clock
  3: optional i64 index,     // the journal index of the entry that made it
  4: optional string actor,  // who asked for it, when someone did
  5: optional string detail,
}

struct TCatalogRecord {
  1: required i64 catalog_id,
  2: required string name,
  3: optional string provider,
  4: optional string root_uri,
  5: optional string credentials_ref,   // a name under the secrets dir, never the secret
  6: optional string refresh_kind,      // none | webhook | mysql
  7: optional string refresh_url,
  8: optional i64 create_time_ms,
  9: optional i64 update_time_ms,
  10: optional string refresh_address,          // mysql: host:port of a MySQL-protocol endpoint (a Doris FE's query port)
  11: optional string refresh_statement,        // mysql: the statement template ("" = REFRESH TABLE {catalog}.{db}.{table})
  12: optional string refresh_credentials_ref,  // mysql: a name under the secrets dir (user, password), never the secret
  13: optional i64 optimize_unindexed_rows,     // OPTIMIZE policy: admit when an index has more unindexed rows (0 = off)
  14: optional i64 optimize_min_interval_second, // OPTIMIZE policy: at most one per dataset per interval
}

struct TBackendRecord {
  1: required i64 backend_id,
  2: required string address,
  3: optional i64 add_time_ms,
  4: optional bool drained,          // no new dispatches go to it; its running ones finish (TDrainBackendCommand)
  5: optional i64 drain_time_ms,     // when it was last drained or undrained (master clock)
  6: optional string drain_actor,    // who did it (the verified caller, the claim in parentheses)
}

// ---- the audit trail (pkg/raftfsm/audit.go) ---------------------------------

// Who made an admin change: the verified caller (the certificate identity
// under mutual TLS), else the name the client claimed; the claim is kept
// apart when it says something else. An entry without one (an older
// leader's) records no audit event.
struct TAuditActor {
  1: required string actor,
  2: optional string claimed,    // the claimed name (--as) when it differs from actor
  3: optional bool verified,     // actor is a verified certificate identity
}

// One audited admin change, recorded by the entry (index) that made it.
struct TAuditEvent {
  1: required i64 seq,           // allocated in order by Apply; never reused
  2: required i64 index,         // the journal index of the entry that made it
  3: required i64 time_ms,       // master clock (the command's now_ms)
  4: required string kind,       // catalog.create, backend.drain, option.set, raft.add-voter, ...
  5: required string subject,    // catalog name, backend id and address, option key, job id, member id
  6: optional TAuditActor actor,
  7: optional string summary,    // what changed: "field: old -> new", ...
}

// An audit event for a change that is not itself an FSM command (raft
// membership, snapshot restore), proposed by the leader after the change
// succeeded. Command type 20 with the ignorable bit (148): an older master
// skips it and only lacks the event.
struct TAuditCommand {
  1: required i64 now_ms,
  2: required string kind,
  3: required string subject,
  4: optional TAuditActor actor,
  5: optional string summary,
}

// ---- commands ------------------------------------------------------------
// A log entry is one type byte (bit 7 = ignorable by older masters) followed
// by the compact encoding of the command struct of that type.

// M0. The leader has run admission (DESIGN.md §5 steps 1-7); the FSM checks
// the catalog, fence and quotas and allocates the job id.
struct TAdmitCommand {
  1: required i64 now_ms,
  2: required TJobRecord job,   // job_id, rev, states are set by the FSM
  3: optional i32 admit_rules,  // 2: Apply also re-checks the mutation gate and the option bounds (§13.8)
}

// M0, batched (group commit): concurrent admissions in one entry with one
// clock. Each job is applied in order exactly as one TAdmitCommand would be
// (catalog, fence and quota guards, the id allocated in order), with an item
// result per job: a refused job changes nothing and does not stop the others.
struct TAdmitBatch {
  1: required i64 now_ms,
  2: required list<TJobRecord> jobs,   // as TAdmitCommand.job
  3: optional i32 admit_rules,         // as TAdmitCommand.admit_rules
}

struct TMarkRunning {
  1: required i64 job_id,
  2: required i64 expected_rev,
  3: required i64 backend_id,
  4: required i64 process_epoch,
  5: required string invocation_id,
  6: required string invocation_secret,
  7: required i64 deadline_ms,
  8: required i64 leader_term,
}

// M1, batched: every PENDING -> RUNNING of one dispatch round; a CAS result per job.
struct TMarkRunningBatch {
  1: required i64 now_ms,
  2: required list<TMarkRunning> jobs,
}

struct TCompletion {
  1: required i64 job_id,
  2: required i64 dispatch_revision,
  3: required string invocation_id,
  4: required i64 process_epoch,
  5: required TJobResult result,
  6: optional bool never_enqueued,  // M2': also release the slot with NOT_ENQUEUED
  7: optional bool return_to_pending, // M2'' (with never_enqueued): back to PENDING, attempts + 1 (§13.2)
  8: optional string index_uuid,      // NATIVE_OK: the uuid of the verified index
  9: optional TResources resources,
  10: optional string log_tail,
  11: optional string leftover_index_uuid,
  12: optional list<TOptimizedIndexRecord> optimized_indexes,
  13: optional i64 dataset_version,   // NATIVE_OK: the version the builder verified
}

// M2 / M2', batched.
struct TCompleteBatch {
  1: required i64 now_ms,
  2: required list<TCompletion> completions,
}

struct TProof {
  1: required i64 job_id,
  2: required i64 dispatch_revision,
  3: required string invocation_id,
  4: required i64 process_epoch,
  5: required i64 backend_id,
  6: required TTerminationProof proof,
  7: optional bool finished_without_result, // §13.3: a RUNNING job moves to RESOLVING in this entry
  8: optional string message,               // why the worker ended (<= 1024 B)
  9: optional string index_uuid,            // the uuid the worker announced, if not journaled yet
  10: optional i64 resolve_after_ms,        // RESOLVING: the earliest time to read the dataset
  11: optional TResources resources,
  12: optional string log_tail,
  13: optional bool return_to_pending,      // §14: an OPTIMIZE whose worker is provably dead goes back to PENDING (attempts + 1)
}

// A worker's announcement (§13.4): the uuid it is building and its phase.
// Guarded by the dispatch identity and state RUNNING; the uuid is written
// once.
struct TProgress {
  1: required i64 job_id,
  2: required i64 dispatch_revision,
  3: required string invocation_id,
  4: required i64 process_epoch,
  5: optional string index_uuid,
  6: optional string phase,
  7: optional i64 elapsed_ms,
}

// P, batched.
struct TRecordProofBatch {
  1: required i64 now_ms,
  2: required list<TProof> proofs,
}

// One authenticated report (DESIGN.md §9): its termination proof through P
// and its result through M2, in that order, each guarded on its own (a
// refused proof does not stop the result, nor the reverse). At least one is
// set; when both are, they name the same job.
struct TReportItem {
  1: optional TProof proof,
  2: optional TCompletion completion,
  3: optional TProgress progress,   // alone in its item
}

// Reports, batched (group commit): one entry per batch instead of one for
// the proofs and one for the results.
struct TReportBatch {
  1: required i64 now_ms,
  2: required list<TReportItem> reports,
}

struct TRefreshTransition {
  1: required i64 job_id,
  2: required i64 expected_rev,
  3: required TRefreshState to_state,
}

// R1 (REQUIRED|FAILED -> RUNNING), R2 (RUNNING -> DONE), R3 (RUNNING -> FAILED),
// R4 (RUNNING -> REQUIRED, a new leader), batched.
struct TRefreshBatch {
  1: required i64 now_ms,
  2: required list<TRefreshTransition> transitions,
}

struct TCancelCommand {
  1: required i64 now_ms,
  2: required i64 job_id,
  3: required string actor,
  4: optional TAuditActor audit,   // who (audit.go): an audit event is recorded in the same entry
}

struct TForceReleaseCommand {
  1: required i64 now_ms,
  2: required i64 job_id,
  3: required string actor,
  4: required string note,
  5: required string warning,
  6: optional TAuditActor audit,
}

// Retention GC: the FSM re-checks eligibility against cutoff_ms.
struct TGCCommand {
  1: required i64 now_ms,
  2: required i64 cutoff_ms,
  3: required list<i64> job_ids,
}

struct TCatalogCommand {
  1: required i64 now_ms,
  2: required TCatalogRecord catalog,   // create: catalog_id is allocated by the FSM
  3: optional TAuditActor audit,
}

struct TRemoveCatalogCommand {
  1: required i64 now_ms,
  2: required string name,
  3: optional TAuditActor audit,
}

struct TBackendCommand {
  1: required i64 now_ms,
  2: required string address,
  3: optional TAuditActor audit,
}

struct TRemoveBackendCommand {
  1: required i64 now_ms,
  2: required i64 backend_id,
  3: optional TAuditActor audit,
}

// Drain (drained = true) or undrain a backend: the leader's dispatcher
// picks no drained backend for a new dispatch; its running jobs finish,
// report and reconcile as before, and heartbeats go on. Command type 19
// with the ignorable bit (147): an older master skips it and would
// dispatch there as before; nothing else it applies depends on it.
struct TDrainBackendCommand {
  1: required i64 now_ms,
  2: required i64 backend_id,
  3: required bool drained,
  4: optional string actor,
  5: optional TAuditActor audit,
}

struct TSetOptionCommand {
  1: required i64 now_ms,
  2: required string key,
  3: required string value,   // validated before proposing and again by Apply
  4: optional TAuditActor audit,
}

// The cluster's address book: a master's RPC address, journaled by the
// leader when add-voter is given one (and forgotten on remove-peer), so that
// every master can name and forward to a member its own peers list lacks.
// Command type 17 with the ignorable bit: an older master may skip it.
struct TMemberAddressCommand {
  1: required i64 now_ms,
  2: required string node_id,
  3: required string rpc_address,   // empty: forget the member's address
}

// The cluster id (§13.1): a random id the first leader journals when the
// journal has none. It names this Raft history (its term sequence): Raft
// snapshots keep it, and an operator restore keeps the running cluster's id
// (the leader journals it again right after the restore). Backends keep
// their leader-term fence per cluster id. Type 18 with the ignorable bit.
struct TClusterIDCommand {
  1: required i64 now_ms,
  2: required string cluster_id,
  3: optional bool replace,   // restore: set it even if one is set (the restored file's is replaced)
}

struct TMemberAddress {
  1: required string node_id,
  2: required string rpc_address,
}

// ---- Apply responses ------------------------------------------------------

enum TApplyCode {
  OK = 1,
  CAS_FAILED = 2,          // a guard failed; nothing changed
  NOT_FOUND = 3,
  FENCE_CONFLICT = 4,
  QUOTA_EXCEEDED = 5,
  ADMISSION_BLOCKED = 6,   // a corrupt unresolved record blocks admission (fail-closed)
  CATALOG_IN_USE = 7,
  ALREADY_EXISTS = 8,
  INVALID = 9,
  BACKEND_IN_USE = 10,
  NOOP = 11,               // already in the requested state; no change
  MUTATION_DISABLED = 12,  // admit: enable_lance_index_mutation is off in the replicated options (§13.8)
}

struct TItemResult {
  1: required i64 job_id,
  2: required TApplyCode code,
  3: optional string message,
  4: optional i64 id,                   // admit batch: the allocated job id
  5: optional i64 conflict_job_id,      // admit batch, FENCE_CONFLICT: the smallest fencing job id
  6: optional TApplyCode proof_code,    // report batch, an item with a proof: P's answer (code is M2's when the item has a result)
  7: optional string proof_message,
}

struct TApplyResponse {
  1: required TApplyCode code,
  2: optional string message,
  3: optional i64 id,                   // allocated job, catalog or backend id
  4: optional list<TItemResult> items,  // one per job of a batch, in order
  5: optional i64 conflict_job_id,      // FENCE_CONFLICT: the smallest fencing job id
  6: optional i64 index,                // the log index the command was applied at (set by the cluster, not the FSM)
}

// ---- snapshot --------------------------------------------------------------
// A snapshot is: magic "LMSNAP", a 4-byte big-endian length and this header,
// then length-prefixed TSnapshotItem values in a fixed order (catalogs,
// backends, jobs, each by id), then an item with last = true.

struct TOptionValue {
  1: required string key,
  2: required string value,
  3: optional TAuditActor changed_by,   // who set it last (audit.go)
  4: optional i64 changed_time_ms,     // when (master clock)
}

struct TSnapshotHeader {
  1: required i32 format_version,
  2: required i64 last_job_id,
  3: required i64 last_catalog_id,
  4: required i64 last_backend_id,
  5: optional list<TOptionValue> options,   // sorted by key: snapshots are byte-identical
  6: optional i64 job_count,
  7: optional i64 catalog_count,
  8: optional i64 backend_count,
  9: optional i64 applied_index,   // the log index the snapshot was taken at
  10: optional list<TMemberAddress> member_addresses,   // sorted by node id
  11: optional string cluster_id,
  12: optional i64 last_audit_seq,      // the last audit event sequence number allocated
}

struct TSnapshotItem {
  1: optional TCatalogRecord catalog,
  2: optional TBackendRecord backend,
  3: optional TJobRecord job,
  4: optional bool last,
  5: optional TAuditEvent audit_event,  // after the jobs, by seq
}
