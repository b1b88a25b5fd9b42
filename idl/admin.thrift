// The master's service: the reports backends send (DESIGN.md §9, §10), the
// admin API behind the CLI, and the masters' internal forwarding.
//
// Field ids and enum values are pinned by idl/pin_test.go.
include "wire.thrift"

namespace go adminapi
namespace py lancemaster.adminapi
namespace java io.lancemaster.adminapi

// Stable error codes. A CLI or script may switch on them; never renumber.
enum TErrorCode {
  NOT_FOUND = 1,
  INVALID = 2,
  FENCE_CONFLICT = 3,
  QUOTA_EXCEEDED = 4,
  MUTATION_DISABLED = 5,
  CATALOG_IN_USE = 6,
  NOT_LEADER = 7,
  ALREADY_EXISTS = 8,
  CONFLICT = 9,             // a concurrent change won (CAS); retry
  UNAVAILABLE = 10,         // no leader, or no live backend to inspect the dataset
  INTERNAL = 11,
  ADMISSION_BLOCKED = 12,   // a corrupt unresolved record blocks admission
  BACKEND_IN_USE = 13,
  TIMEOUT = 14,
  INSPECT_FAILED = 15,      // the backend could not read the dataset
  AMBIGUOUS = 16,           // index names equal after lowercasing
  DEFINITION_MISMATCH = 17, // IF NOT EXISTS, but the existing index differs
  PERMISSION_DENIED = 18,   // mTLS: the caller's certificate role may not call this method (docs/rpc.md)
  OUTCOME_UNKNOWN = 19,     // the write may or may not have been applied (leadership lost after the
                            // append, a forward that failed after sending): check before retrying
}

exception TAdminError {
  1: required TErrorCode code,
  2: required string message,
  3: optional string leader_address,  // NOT_LEADER: where to retry
  4: optional i64 job_id,             // FENCE_CONFLICT: the smallest fencing job id
}

struct TProperty {
  1: required string key,
  2: required string value,
}

struct TCreateIndexRequest {
  1: required string catalog,
  2: required string db,
  3: required string table,
  4: required string index_name,
  5: required string column,
  6: required string index_type,
  7: optional list<TProperty> properties,  // a list, so duplicates can be rejected
  8: optional bool replace,                // CREATE OR REPLACE
  9: optional bool if_not_exists,
  10: optional string creator,             // --as; defaults to the client identity
}

struct TDropIndexRequest {
  1: required string catalog,
  2: required string db,
  3: required string table,
  4: required string index_name,
  5: optional bool if_exists,
  6: optional string creator,
}

// OPTIMIZE (§14): compact the dataset and bring every index up to date.
struct TOptimizeRequest {
  1: required string catalog,
  2: required string db,
  3: required string table,
  4: optional string creator,
}

struct TAdmitResponse {
  1: optional i64 job_id,     // unset when noop
  2: required bool noop,      // IF NOT EXISTS / IF EXISTS: nothing to do, no job
  3: optional string message,
}

// What an operator sees of a job: never the locator or the invocation secret.
struct TJobView {
  1: required i64 job_id,
  2: optional string creator,
  3: optional i64 rev,
  4: optional i64 create_time_ms,
  5: optional i64 update_time_ms,
  6: optional i64 catalog_id,
  7: optional string catalog,
  8: optional string db,
  9: optional string table,
  10: optional string index_name,
  11: optional string mutation_type,
  12: optional bool if_not_exists,
  13: optional bool if_exists,
  14: optional string index_type,
  15: optional string column,
  16: optional string properties_json,
  17: optional i64 admitted_dataset_version,
  18: optional string mutation_state,
  19: optional string refresh_state,
  20: optional string result_code,
  21: optional string completion_reason,
  22: optional string result_message,
  23: optional bool external_metadata_advanced,
  24: optional i64 backend_id,
  25: optional i64 process_epoch,
  26: optional i64 dispatch_revision,
  27: optional string invocation_id,
  28: optional i64 deadline_ms,
  29: optional i64 leader_term,
  30: optional bool holds_slot,
  31: optional string termination_proof,
  32: optional bool force_released,
  33: optional string force_actor,
  34: optional i64 force_time_ms,
  35: optional string force_note,
  36: optional string force_warning,
  37: optional i64 refresh_failure_time_ms,
  38: optional bool unresolved,
  39: optional string provider,
  40: optional string cancel_actor,
  41: optional i32 dispatch_attempts,      // dispatches proven never enqueued that returned the job to PENDING
  42: optional string index_uuid,          // the uuid this dispatch built (announced or verified)
  43: optional string admitted_index_uuid, // the uuid of the index at admission
  44: optional string termination_message, // why the worker ended, from the backend
  45: optional string build_phase,
  46: optional i64 resolve_after_ms,       // RESOLVING: the outcome is not read from the dataset before this time
  47: optional string leftover_index_uuid, // not committed: the index directory the build left behind
  48: optional i64 dispatch_time_ms,
  49: optional i64 start_time_ms,          // the worker's (backend clock)
  50: optional i64 finish_time_ms,
  51: optional i64 wall_ms,
  52: optional i64 peak_memory_bytes,
  53: optional string peak_memory_source,
  54: optional i64 build_elapsed_ms,
  55: optional i64 progress_time_ms,
  56: optional list<wire.TOptimizedIndex> optimized_indexes,
  57: optional i64 result_dataset_version,
  58: optional string stale_warning,      // showJob: as TListJobsResponse.stale_warning
  59: optional string claimed_creator,    // the name the client claimed (--as); creator is then its certificate's identity
  60: optional bool restore_hold,         // held by a snapshot restore: never dispatched again (set only when true)
}

// jobs logs: the worker's redacted stderr, from the backend while it has
// the invocation, else the tail kept in the journal.
struct TJobLogs {
  1: required string log,
  2: required string source,       // backend | journal | none
  3: optional bool truncated,
  4: optional string phase,
  5: optional i64 elapsed_ms,
  6: optional string note,         // why the backend's copy was not used, if it was not
}

struct TListJobsRequest {
  1: optional string catalog,
  2: optional string db,
  3: optional string table,
  4: optional string state,         // a mutation or refresh state name
  5: optional i64 after_job_id,     // paging: jobs with a larger id
  6: optional i32 limit,            // default 100, at most 1000 (a page fits one frame)
  7: optional bool consistent,      // read through the leader
  8: optional bool unresolved,      // only jobs that still hold their fence or need an operator
  9: optional bool oldest_first,    // true: id order (smallest first); false: newest (largest id) first; unset: id order, as before this field (older clients)
  10: optional i64 since_ms,        // only jobs created at or after this time (master clock, ms)
  11: optional i64 before_job_id,   // paging, newest first: jobs with a smaller id
  12: optional string mutation_type, // CREATE, CREATE_OR_REPLACE, DROP or OPTIMIZE
  13: optional string index_type,    // IVF_PQ, BTREE, ...
  14: optional bool held,            // only jobs a snapshot restore held (restore_hold): never dispatched again
}

struct TListJobsResponse {
  1: required list<TJobView> jobs,
  2: optional i64 next_after_job_id,  // set when more jobs match
  3: optional string stale_warning,   // a follower's answer that may be stale: why (no known leader, no recent contact)
  4: optional i64 next_before_job_id, // newest first: set when more jobs match (pass as before_job_id)
}

struct TResolveRequest {
  1: required i64 job_id,
  2: required bool force_release,
  3: required string comment,
  4: optional string actor,
}

struct TResolveResponse {
  1: required TJobView job,
  2: required bool already_released,  // retried: no new entry was written
}

struct TCancelRequest {
  1: required i64 job_id,
  2: optional string actor,
}

struct TCatalog {
  1: optional i64 catalog_id,
  2: required string name,
  3: optional string provider,         // DIRECTORY
  4: optional string root_uri,
  5: optional string credentials_ref,
  6: optional string refresh_kind,     // none | webhook | mysql
  7: optional string refresh_url,
  8: optional i64 create_time_ms,
  9: optional i64 update_time_ms,
  10: optional i32 unresolved_jobs,
  11: optional string refresh_address,
  12: optional string refresh_statement,
  13: optional string refresh_credentials_ref,
  14: optional i64 optimize_unindexed_rows,
  15: optional i64 optimize_min_interval_second,
}

struct TUpdateCatalogRequest {
  1: required string name,
  2: optional string root_uri,
  3: optional string credentials_ref,
  4: optional string refresh_kind,
  5: optional string refresh_url,
  6: optional string refresh_address,
  7: optional string refresh_statement,
  8: optional string refresh_credentials_ref,
  9: optional i64 optimize_unindexed_rows,
  10: optional i64 optimize_min_interval_second,
  11: optional string actor,           // the claimed name (--as)
}

struct TBackend {
  1: required i64 backend_id,
  2: required string address,
  3: optional i64 add_time_ms,
  4: optional bool alive,             // leader-local view; unset when unknown
  5: optional i64 process_epoch,      // latest heartbeat, leader-local
  6: optional i32 held_slots,
  7: optional i64 last_heard_ms,      // leader-local: the latest OK heartbeat's answer (unset: not heard this term)
  8: optional string warning,         // backends add: the address did not answer the probe (registered anyway)
  9: optional string version,         // leader-local: what its latest OK heartbeat said it runs
  10: optional bool drained,          // journaled: no new dispatches go to it (backends drain)
  11: optional i64 drain_time_ms,
  12: optional string drain_actor,
  13: optional bool accepting,        // leader-local: its latest answered heartbeat said it accepts work
  14: optional string not_accepting_reason,
  15: optional i32 capacity,          // leader-local: the workers it says it runs at once
  16: optional list<TBackendInvocation> invocations,  // backends show: the jobs holding its slots
  17: optional bool dispatchable,     // leader-local: new work may go to it now (alive, accepting, not drained)
}

// A job holding one of a backend's possible-live slots (backends show).
struct TBackendInvocation {
  1: required i64 job_id,
  2: optional string mutation_state,
  3: optional string invocation_id,
  4: optional i64 process_epoch,
  5: optional string target,          // CATALOG.DB.TABLE
  6: optional string index_name,
  7: optional string mutation_type,
  8: optional i64 dispatch_time_ms,
  9: optional string build_phase,
}

struct TDrainBackendRequest {
  1: required string backend,         // id or HOST:PORT
  2: required bool drained,           // false: undrain
  3: optional string actor,           // the claimed name (--as)
}

struct TDrainBackendResponse {
  1: required TBackend backend,
  2: optional bool unchanged,         // it already was (un)drained: nothing changed
}

// What an operator sees of a dataset: its version, schema and indexes, as a
// backend inspected it just now. Never the locator or the credentials.
struct TDatasetView {
  1: required i64 dataset_version,
  2: required list<wire.TLanceField> fields,
  3: required list<wire.TLanceIndexInfo> indexes,
  4: optional i64 backend_id,        // the backend that inspected it
}

struct TOption {
  1: required string key,
  2: required string value,
  3: required string default_value,
  4: required bool is_default,
  5: optional string description,
  6: optional string changed_by,        // who set it last: the verified caller, else the claimed name
  7: optional string changed_by_claimed, // the name that caller claimed (--as) when it differs
  8: optional i64 changed_time_ms,       // when (master clock)
}

// The audit trail (docs/operations.md#audit-trail): who changed what, when.
struct TAuditEvent {
  1: required i64 seq,             // the cursor: newer events have larger ones
  2: required i64 index,           // the journal index of the entry that recorded it
  3: required i64 time_ms,         // master clock
  4: required string kind,         // catalog.create, backend.drain, option.set, raft.add-voter, ...
  5: required string subject,
  6: optional string actor,        // the verified caller (certificate identity), else the claimed name
  7: optional string claimed,      // the name the caller claimed (--as) when it differs from actor
  8: optional bool verified,       // actor is a verified certificate identity
  9: optional string summary,      // what changed
}

struct TListEventsRequest {
  1: optional string kind,         // exact kind, or a prefix ending in '.' (backend.)
  2: optional string subject,      // substring, case-insensitive
  3: optional string actor,        // exact actor or claimed name, case-insensitive
  4: optional i64 since_ms,        // only events at or after this time (master clock, ms)
  5: optional i32 limit,           // default 100, at most 1000
  6: optional i64 before_seq,      // paging, newest first: events with a smaller seq
  7: optional bool consistent,     // read through the leader
}

struct TListEventsResponse {
  1: required list<TAuditEvent> events,   // newest first
  2: optional i64 next_before_seq,        // set when more events match (pass as before_seq)
  3: optional string stale_warning,       // a follower's answer that may be stale: why
}

struct TRaftPeer {
  1: required string id,
  2: required string raft_address,
  3: optional string rpc_address,
  4: optional string suffrage,
  5: optional bool is_leader,
  6: optional string health,          // healthy | unreachable | unknown: the answering leader's contact with it
  7: optional i64 last_contact_ms,    // the answering leader's latest answered AppendEntries to it
  8: optional string last_error,      // unreachable: the latest failure
}

struct TRaftPeersResponse {
  1: required list<TRaftPeer> peers,
  2: optional string leader_id,
  3: optional i64 term,
  4: optional i64 commit_index,
  5: optional i64 applied_index,
  6: optional string answered_by,     // the node id of the master that answered (its view, its footer)
}

// ---- operator snapshots and membership (docs/operations.md) ---------------

// A snapshot transfer moves one snapshot file (the format is documented in
// docs/operations.md and pkg/cluster/snapfile.go) between the leader and the
// CLI in chunks of at most 256 KiB, half the 512 KiB frame bound. A transfer
// lives on the master that began it; offsets are checked, so a lost or
// repeated chunk fails the transfer instead of corrupting the file. A transfer
// left idle for idle_timeout_ms is dropped by the master.
struct TSnapshotTransfer {
  1: required string transfer_id,
  2: required i64 size,              // bytes of the whole file
  3: required i32 chunk_size,        // the largest chunk either side may send
  4: required i64 idle_timeout_ms,
  5: optional i64 index,             // save: the snapshot's raft index
  6: optional i64 term,              // save: the snapshot's raft term
  7: optional string node_id,        // the master holding the transfer (the leader)
}

struct TSnapshotChunk {
  1: required string transfer_id,
  2: required i64 offset,            // of data[0] within the file
  3: required binary data,           // at most chunk_size bytes
  4: optional bool eof,              // save: data ends the file
}

struct TSnapshotRestoreResponse {
  1: required i64 index,             // the raft index the restored state lives at
  2: required i64 snapshot_index,    // the file's raft index and term
  3: required i64 snapshot_term,
  4: optional i64 job_count,
  5: optional i64 catalog_count,
  6: optional i64 backend_count,
  7: optional string leader_id,      // the leader after the restore (it hands leadership over)
  8: optional i64 carried_forward,   // jobs whose newer record the current journal had: kept instead of the file's
  9: optional i64 held,              // jobs PENDING/RUNNING/RESOLVING in the file that nothing vouches for: held, never dispatched again
}

struct TAddVoterRequest {
  1: required string id,
  2: required string raft_address,
  3: optional string rpc_address,    // remembered by the leader that adds it (docs/operations.md)
  4: optional bool non_voter,        // add as a non-voter (raft AddNonvoter): replicated to, not counted
                                     // in the quorum, until `promote`
  5: optional string actor,          // the claimed name (--as)
}

struct TPromoteRequest {
  1: required string id,             // a non-voter; refused unless it is caught up (docs/operations.md)
  2: optional string actor,          // the claimed name (--as)
}

// What one master says about itself (raftMemberStatus): another master asks
// it to build the cluster's health view.
struct TRaftMemberStatus {
  1: required string node_id,
  2: optional string state,               // raft's: Leader | Follower | Candidate | Shutdown
  3: optional i64 term,
  4: optional string leader_id,           // the leader it knows ("" none)
  5: optional i64 last_contact_age_ms,    // since it last heard the leader (unset: never; the leader: 0)
  6: optional i64 commit_index,
  7: optional i64 applied_index,
  8: optional i64 last_log_index,
  9: optional string version,             // pkg/version Short()
  10: optional bool hears_leader,         // it leads, or heard the leader within the contact window
}

// One member in the health view (raftHealth).
struct TRaftMemberHealth {
  1: required string id,
  2: optional string raft_address,
  3: optional string rpc_address,
  4: optional string suffrage,            // Voter | Nonvoter | Staging
  5: required bool reachable,             // it answered raftMemberStatus just now
  6: optional TRaftMemberStatus status,   // its answer (unset: unreachable)
  7: optional string error,               // unreachable: why
  8: optional string leader_contact,      // healthy | unreachable | unknown: the leader's AppendEntries view
  9: optional i64 lag,                    // the leader's commit index - its applied index
  10: optional bool healthy,              // reachable, same term as the leader, hears it, lag <= max_lag,
                                          // and the leader does not see it unreachable
  11: optional bool is_leader,
}

struct TRaftHealthResponse {
  1: required list<TRaftMemberHealth> members,
  2: optional string leader_id,
  3: optional string answered_by,
  4: optional i64 leader_commit_index,
  5: optional i32 voters,
  6: optional i32 quorum,                 // floor(voters/2)+1
  7: optional i32 healthy_voters,
  8: optional i32 failure_tolerance,      // healthy_voters - quorum, never below 0
  9: optional bool healthy,               // healthy_voters >= quorum
  10: optional i64 max_lag,               // the lag bound of healthy (and of promote)
}

struct TRemovePeerRequest {
  1: required string id,
  2: optional bool force,            // allow the leader to remove itself
  3: optional string actor,          // the claimed name (--as)
}

// Every admin change takes the name the client claims (--as) as `actor`: an
// argument of the scalar methods, a field of the request structs. The
// audit trail records it beside the verified certificate identity (or as
// the actor without one); empty, an older client: nothing is claimed.
service LanceMasterService {
  // reports (DESIGN.md §9); followers forward to the leader
  wire.TStatus reportLanceIndexJobResult(1: wire.TLanceIndexJobReport report),
  wire.TStatus reportLanceIndexJobTermination(1: wire.TLanceIndexJobTerminationReport report),
  wire.TStatus reportLanceIndexJobProgress(1: wire.TLanceIndexJobProgressReport report),

  // jobs
  TAdmitResponse createIndex(1: TCreateIndexRequest request) throws (1: TAdminError err),
  TAdmitResponse dropIndex(1: TDropIndexRequest request) throws (1: TAdminError err),
  TAdmitResponse optimizeDataset(1: TOptimizeRequest request) throws (1: TAdminError err),
  TJobLogs jobLogs(1: i64 job_id, 2: i32 max_bytes) throws (1: TAdminError err),
  TListJobsResponse listJobs(1: TListJobsRequest request) throws (1: TAdminError err),
  TJobView showJob(1: i64 job_id, 2: bool consistent) throws (1: TAdminError err),
  TResolveResponse resolveJob(1: TResolveRequest request) throws (1: TAdminError err),
  TJobView cancelJob(1: TCancelRequest request) throws (1: TAdminError err),

  // datasets: inspect through a live backend (nothing is journaled)
  TDatasetView inspectDataset(1: string catalog, 2: string db, 3: string table) throws (1: TAdminError err),

  // catalogs
  TCatalog createCatalog(1: TCatalog catalog, 2: string actor) throws (1: TAdminError err),
  list<TCatalog> listCatalogs() throws (1: TAdminError err),
  TCatalog updateCatalog(1: TUpdateCatalogRequest request) throws (1: TAdminError err),
  void removeCatalog(1: string name, 2: string actor) throws (1: TAdminError err),

  // backends
  TBackend addBackend(1: string address, 2: string actor) throws (1: TAdminError err),
  list<TBackend> listBackends() throws (1: TAdminError err),
  void removeBackend(1: string backend, 2: string actor) throws (1: TAdminError err),  // id or address
  TBackend showBackend(1: string backend) throws (1: TAdminError err),  // id or address; asked of the leader
  TDrainBackendResponse drainBackend(1: TDrainBackendRequest request) throws (1: TAdminError err),

  // cluster-wide options (DESIGN.md §11)
  TOption getOption(1: string key) throws (1: TAdminError err),
  TOption setOption(1: string key, 2: string value, 3: string actor) throws (1: TAdminError err),
  list<TOption> listOptions() throws (1: TAdminError err),

  // operator
  TRaftPeersResponse listPeers() throws (1: TAdminError err),
  string transferLeader(1: string target_id, 2: string actor) throws (1: TAdminError err),

  // internal: a follower forwards an encoded journal command to the leader,
  // which proposes it and answers the encoded TApplyResponse.
  binary forwardApply(1: binary command) throws (1: TAdminError err),

  // operator: snapshots, leader only (docs/operations.md)
  TSnapshotTransfer beginSnapshotSave() throws (1: TAdminError err),
  TSnapshotChunk readSnapshotChunk(1: string transfer_id, 2: i64 offset) throws (1: TAdminError err),
  TSnapshotTransfer beginSnapshotRestore(1: i64 size) throws (1: TAdminError err),
  void writeSnapshotChunk(1: TSnapshotChunk chunk) throws (1: TAdminError err),
  TSnapshotRestoreResponse finishSnapshotRestore(1: string transfer_id, 2: string actor) throws (1: TAdminError err),
  void abortSnapshotTransfer(1: string transfer_id) throws (1: TAdminError err),

  // operator: raft membership, leader only
  TRaftPeersResponse addVoter(1: TAddVoterRequest request) throws (1: TAdminError err),
  TRaftPeersResponse removePeer(1: TRemovePeerRequest request) throws (1: TAdminError err),

  // operator: the cluster's health (any master asks every member) and
  // promoting a caught-up non-voter (leader only)
  TRaftHealthResponse raftHealth() throws (1: TAdminError err),
  TRaftPeersResponse promote(1: TPromoteRequest request) throws (1: TAdminError err),
  // what this master says about itself; masters ask each other
  TRaftMemberStatus raftMemberStatus() throws (1: TAdminError err),

  // The audit trail, newest first.
  TListEventsResponse listEvents(1: TListEventsRequest request) throws (1: TAdminError err),
}
