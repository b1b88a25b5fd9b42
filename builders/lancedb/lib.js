// lib.js: the pure parts of the builder (no I/O, no LanceDB): frame bounds,
// dataset URI splitting, canonical Arrow types, the schema contract, index
// type/properties normalization, error classification and message
// sanitizing. builder.js does the I/O; test/lib.test.js tests these directly.
// docs/builder.md documents every rule here.
"use strict";

const path = require("node:path");
const { fileURLToPath } = require("node:url");

const PROTOCOL = 1;
const MAX_REQUEST_BYTES = 1 << 20; // frame.MaxRequestBytes
const MAX_RESULT_BYTES = 256 << 10; // frame.MaxResultBytes
const MAX_MESSAGE_BYTES = 1024; // the agent cuts messages to this; so do we
const SCHEMA_CONTRACT_VERSION = 1;
const MIN_REDACT_LEN = 4; // shorter storage option values are not searched for in messages

// Result codes: idl/wire.thrift TLanceIndexJobResultCode names.
const RC = Object.freeze({
  STALE: "PRE_INVOCATION_STALE_ADMISSION",
  UNSUPPORTED_CONTRACT: "PRE_INVOCATION_UNSUPPORTED_SCHEMA_CONTRACT",
  CREDENTIAL_EXPIRED: "PRE_INVOCATION_CREDENTIAL_EXPIRED",
  RESOURCE_REJECTED: "PRE_INVOCATION_RESOURCE_REJECTED",
  OK: "NATIVE_OK",
  COMMIT_CONFLICT: "NATIVE_COMMIT_CONFLICT",
  NOT_FOUND: "NATIVE_NOT_FOUND",
  INVALID_ARGUMENT: "NATIVE_INVALID_ARGUMENT",
  NOT_SUPPORTED: "NATIVE_NOT_SUPPORTED",
  INDEX: "NATIVE_INDEX",
  IO: "NATIVE_IO",
  INTERNAL: "NATIVE_INTERNAL",
});

// Mutation types (idl/wire.thrift TLanceIndexMutationType names).
const MUTATIONS = new Set(["CREATE", "REPLACE", "DROP"]);

// Inspect error codes.
const IE = Object.freeze({ NOT_FOUND: "NOT_FOUND", INVALID_ARGUMENT: "INVALID_ARGUMENT", IO: "IO", INTERNAL: "INTERNAL" });

// A typed failure raised by the builder itself (not by Lance).
class Failure extends Error {
  constructor(kind, message) {
    super(message);
    this.kind = kind; // one of KIND
  }
}

// Error kinds, what classify() tells. Build and inspect map them to codes.
const KIND = Object.freeze({
  RESOURCE: "resource",
  // Lance's (DataFusion's) memory pool refused a reservation: the build ran
  // out of its configured memory, not the machine.
  MEMORY_POOL: "memory_pool",
  CREDENTIAL: "credential",
  COMMIT_CONFLICT: "commit_conflict",
  ALREADY_EXISTS: "already_exists",
  INVALID: "invalid",
  NOT_SUPPORTED: "not_supported",
  NOT_FOUND: "not_found",
  INDEX: "index",
  IO: "io",
  INTERNAL: "internal",
});

// ---- dataset URI ----------------------------------------------------------

const OBJECT_STORE_SCHEMES = new Set(["s3", "gs", "az"]);
// LanceDB's table-name rule (openTable refuses anything else; "" panics).
const TABLE_NAME = /^[A-Za-z0-9_.-]+$/;

// splitDatasetURI turns <parent>/<name>.lance into {parent, name} for
// connect(parent) + openTable(name). Throws Failure(INVALID) otherwise. The
// messages never echo the URI.
function splitDatasetURI(uri) {
  if (typeof uri !== "string" || uri.trim() === "") throw new Failure(KIND.INVALID, "dataset_uri is empty");
  if (/[\u0000-\u001f\u007f]/.test(uri)) throw new Failure(KIND.INVALID, "dataset_uri contains a control character");
  const u = uri.trim();
  const m = /^([A-Za-z][A-Za-z0-9+.-]*):\/\/(.*)$/s.exec(u);
  let parent;
  let base;
  if (!m) {
    if (!u.startsWith("/")) throw new Failure(KIND.INVALID, "a dataset path without a scheme must be absolute");
    const p = path.posix.normalize(u).replace(/\/+$/, "");
    parent = path.posix.dirname(p);
    base = path.posix.basename(p);
  } else {
    const scheme = m[1].toLowerCase();
    if (/[?#]/.test(m[2])) throw new Failure(KIND.INVALID, "dataset_uri may not carry a query string or fragment");
    if (scheme === "file") {
      let p;
      try {
        p = fileURLToPath("file://" + m[2]);
      } catch (e) {
        throw new Failure(KIND.INVALID, "dataset_uri is not a valid local file:// URI");
      }
      p = path.posix.normalize(p).replace(/\/+$/, "");
      parent = path.posix.dirname(p);
      base = path.posix.basename(p);
    } else if (OBJECT_STORE_SCHEMES.has(scheme)) {
      const rest = m[2].replace(/\/+$/, "");
      const slash = rest.indexOf("/");
      if (slash <= 0) throw new Failure(KIND.INVALID, `a ${scheme}:// dataset_uri needs a bucket and a path ending in <name>.lance`);
      const authority = rest.slice(0, slash);
      if (authority.includes("@")) throw new Failure(KIND.INVALID, "dataset_uri may not carry user information");
      const last = rest.lastIndexOf("/");
      parent = `${scheme}://${rest.slice(0, last)}`;
      base = rest.slice(last + 1);
    } else {
      throw new Failure(KIND.INVALID, `dataset_uri scheme "${scheme.slice(0, 16)}" is not supported (want an absolute path, file://, s3://, gs:// or az://)`);
    }
  }
  if (!base.endsWith(".lance")) throw new Failure(KIND.INVALID, "dataset_uri must end in <name>.lance");
  const name = base.slice(0, -".lance".length);
  if (!TABLE_NAME.test(name)) {
    throw new Failure(KIND.INVALID, "the dataset directory name (before .lance) may hold only letters, digits, '_', '-' and '.' (LanceDB's table-name rule)");
  }
  return { parent, name };
}

// localDatasetDir is the directory of a local dataset URI, or null for an
// object store (the scalar-build uuid watch of docs/builder.md).
function localDatasetDir(uri) {
  const { parent, name } = splitDatasetURI(uri);
  if (/^[A-Za-z][A-Za-z0-9+.-]*:\/\//.test(parent)) return null;
  return path.posix.join(parent, `${name}.lance`);
}

// ---- canonical Arrow types ------------------------------------------------

// Arrow JS Type ids (apache-arrow 18): the base ids schema fields carry.
const T = { Null: 1, Int: 2, Float: 3, Binary: 4, Utf8: 5, Bool: 6, Decimal: 7, Date: 8, Time: 9, Timestamp: 10,
  Interval: 11, List: 12, Struct: 13, Union: 14, FixedSizeBinary: 15, FixedSizeList: 16, Map: 17, Duration: 18,
  LargeBinary: 19, LargeUtf8: 20, Dictionary: -1,
  // Not in Arrow JS 18's enum; schema.js decodes them from the flatbuffer
  // schema with the flatbuffer's own type ids.
  LargeList: 21, RunEndEncoded: 22, BinaryView: 23, Utf8View: 24, ListView: 25, LargeListView: 26 };
const OTHER_NAMES = { [T.Null]: "null", [T.Interval]: "interval", [T.Union]: "union", [T.FixedSizeBinary]: "fixed_size_binary",
  [T.Map]: "map", [T.Duration]: "duration", [T.Dictionary]: "dictionary", [T.RunEndEncoded]: "run_end_encoded",
  [T.BinaryView]: "binary_view", [T.Utf8View]: "utf8_view", [T.ListView]: "list_view", [T.LargeListView]: "large_list_view" };

// canonicalType names an Arrow JS DataType the way pkg/job does.
function canonicalType(type) {
  const id = type.typeId;
  switch (id) {
    case T.Int:
      return `${type.isSigned ? "int" : "uint"}${type.bitWidth}`;
    case T.Float:
      return ["float16", "float32", "float64"][type.precision] || "float";
    case T.Bool: return "bool";
    case T.Utf8: return "utf8";
    case T.LargeUtf8: return "large_utf8";
    case T.Binary: return "binary";
    case T.LargeBinary: return "large_binary";
    case T.Date: return type.unit === 0 ? "date32" : "date64";
    case T.Timestamp: return "timestamp";
    case T.FixedSizeList: return "fixed_size_list";
    case T.List: return "list";
    case T.LargeList: return "large_list";
    case T.Struct: return "struct";
    case T.Decimal: return `decimal${type.bitWidth || 128}`;
    case T.Time: return `time${type.bitWidth || 32}`;
    default:
      if (OTHER_NAMES[id]) return OTHER_NAMES[id];
      return String(type).toLowerCase().replace(/[^a-z0-9_]+/g, "_").replace(/^_+|_+$/g, "") || "unknown";
  }
}

// canonicalField converts the Arrow field at top-level position pos into the
// frame.Field shape. The field id is the position (docs/builder.md). A
// fixed_size_list carries its dimension and element; a list or large_list
// its element (no dimension), so LABEL_LIST can be checked at admission.
function canonicalField(field, pos) {
  const out = { field_id: pos, name: field.name, data_type: canonicalType(field.type), nullable: !!field.nullable };
  const id = field.type.typeId;
  if (id === T.FixedSizeList || id === T.List || id === T.LargeList) {
    const child = field.type.children[0];
    if (id === T.FixedSizeList) out.list_dimension = field.type.listSize;
    if (child && child.type) {
      out.element_type = canonicalType(child.type);
      out.element_nullable = !!child.nullable;
    }
  }
  return out;
}

// ---- the schema contract (pkg/job/schema.go SchemaContract) ----------------

// findColumn: the exact name, else the only case-insensitive match
// (pkg/job Snapshot.FindColumn). Returns {field, pos} or {error}.
function findColumn(fields, column) {
  const exact = fields.findIndex((f) => f.name === column);
  if (exact >= 0) return { field: fields[exact], pos: exact };
  const lc = String(column).toLowerCase();
  const folded = [];
  fields.forEach((f, i) => { if (f.name.toLowerCase() === lc) folded.push(i); });
  if (folded.length === 1) return { field: fields[folded[0]], pos: folded[0] };
  return { error: folded.length === 0 ? "does not exist" : `matches ${folded.length} columns that differ only in case` };
}

// contractOf computes contract v1 (as a plain object) of one canonical field.
function contractOf(cf) {
  return {
    v: SCHEMA_CONTRACT_VERSION,
    fields: [{
      id: cf.field_id, name: cf.name.toLowerCase(), type: cf.data_type, nullable: cf.nullable,
      dim: cf.list_dimension || 0, elem: cf.element_type || "", elem_nullable: !!cf.element_nullable,
    }],
  };
}

const CONTRACT_FIELD_KEYS = new Set(["id", "name", "type", "nullable", "dim", "elem", "elem_nullable"]);

// parseContract parses an admitted contract. Returns {contract} or
// {unsupported: reason} (an unknown version, shape or key).
function parseContract(json) {
  if (typeof json !== "string" || json === "") return { unsupported: "the dispatch carries no schema contract" };
  let c;
  try {
    c = JSON.parse(json);
  } catch (e) {
    return { unsupported: "the schema contract is not valid JSON" };
  }
  if (c === null || typeof c !== "object" || Array.isArray(c)) return { unsupported: "the schema contract is not a JSON object" };
  if (c.v !== SCHEMA_CONTRACT_VERSION) return { unsupported: `schema contract version ${JSON.stringify(c.v ?? null).slice(0, 20)} is not supported (want ${SCHEMA_CONTRACT_VERSION})` };
  for (const k of Object.keys(c)) if (k !== "v" && k !== "fields") return { unsupported: `schema contract v1 has no key ${JSON.stringify(k.slice(0, 32))}` };
  if (!Array.isArray(c.fields) || c.fields.length === 0) return { unsupported: "schema contract v1 needs a non-empty fields array" };
  const fields = [];
  for (const f of c.fields) {
    if (f === null || typeof f !== "object" || Array.isArray(f)) return { unsupported: "a schema contract field is not an object" };
    for (const k of Object.keys(f)) if (!CONTRACT_FIELD_KEYS.has(k)) return { unsupported: `schema contract v1 fields have no key ${JSON.stringify(k.slice(0, 32))}` };
    if (!Number.isInteger(f.id) || typeof f.name !== "string" || typeof f.type !== "string" || typeof f.nullable !== "boolean" ||
        (f.dim !== undefined && !Number.isInteger(f.dim)) || (f.elem !== undefined && typeof f.elem !== "string") ||
        (f.elem_nullable !== undefined && typeof f.elem_nullable !== "boolean")) {
      return { unsupported: "a schema contract field has a missing or mistyped value" };
    }
    fields.push({ id: f.id, name: f.name.toLowerCase(), type: f.type, nullable: f.nullable,
      dim: f.dim || 0, elem: f.elem || "", elem_nullable: !!f.elem_nullable });
  }
  return { contract: { v: c.v, fields } };
}

// compareContracts compares structurally; returns "" when equal, else what differs.
function compareContracts(admitted, current) {
  if (admitted.fields.length !== current.fields.length) {
    return `the contract names ${admitted.fields.length} fields, the column has ${current.fields.length}`;
  }
  for (let i = 0; i < admitted.fields.length; i++) {
    const a = admitted.fields[i];
    const c = current.fields[i];
    for (const k of ["id", "name", "type", "nullable", "dim", "elem", "elem_nullable"]) {
      if (a[k] !== c[k]) return `field ${k} was ${JSON.stringify(a[k])} at admission and is ${JSON.stringify(c[k])} now`;
    }
  }
  return "";
}

// ---- index types and properties ---------------------------------------------

const INDEX_TYPE_NAMES = {
  IvfPq: "IVF_PQ", IvfFlat: "IVF_FLAT", IvfSq: "IVF_SQ", IvfRq: "IVF_RQ", IvfHnswPq: "IVF_HNSW_PQ",
  IvfHnswSq: "IVF_HNSW_SQ", IvfHnswFlat: "IVF_HNSW_FLAT", BTree: "BTREE", Bitmap: "BITMAP",
  LabelList: "LABEL_LIST", NGram: "NGRAM", FTS: "FTS", Inverted: "INVERTED", Fm: "FM", FM: "FM",
  ZoneMap: "ZONEMAP", BloomFilter: "BLOOMFILTER",
};

function normalizeIndexType(t) {
  const s = String(t || "");
  return INDEX_TYPE_NAMES[s] || s.toUpperCase();
}

function isVectorIndexType(t) {
  return t.startsWith("IVF_");
}

// canonicalJSON renders a flat object with sorted keys ("" when empty).
// indexStatsOf is what inspect reports of one listIndices() entry beyond
// its definition (§13.7): the keys LanceDB did not give are left out.
function indexStatsOf(ix) {
  const o = { name: ix.name };
  if (typeof ix.indexUuid === "string" && ix.indexUuid) o.index_uuid = ix.indexUuid;
  const created = ix.createdAt instanceof Date ? ix.createdAt.getTime() : NaN;
  if (Number.isSafeInteger(created)) o.created_at_ms = created;
  for (const [from, to] of [["numIndexedRows", "indexed_rows"], ["numUnindexedRows", "unindexed_rows"],
    ["numSegments", "segments"], ["sizeBytes", "size_bytes"]]) {
    const n = typeof ix[from] === "bigint" ? Number(ix[from]) : ix[from];
    if (Number.isSafeInteger(n) && n >= 0) o[to] = n;
  }
  return o;
}

function canonicalJSON(obj) {
  const keys = Object.keys(obj).sort();
  if (keys.length === 0) return "";
  const sorted = {};
  for (const k of keys) sorted[k] = obj[k];
  return JSON.stringify(sorted);
}

// indexProperties reads what LanceDB tells reliably about an index:
// listIndices().indexDetails (metric_type, compression {type:"pq", num_bits,
// num_sub_vectors}) and, for a vector index without a metric there,
// indexStats().distanceType. num_partitions is not exposed by lancedb 0.31.
function indexProperties(details, stats) {
  const p = {};
  const d = details && typeof details === "object" ? details : {};
  if (typeof d.metric_type === "string" && d.metric_type) p.metric = d.metric_type.toLowerCase();
  else if (stats && typeof stats.distanceType === "string" && stats.distanceType) p.metric = stats.distanceType.toLowerCase();
  const c = d.compression;
  if (c && typeof c === "object" && String(c.type).toLowerCase() === "pq") {
    if (Number.isInteger(c.num_bits)) p.num_bits = c.num_bits;
    if (Number.isInteger(c.num_sub_vectors)) p.num_sub_vectors = c.num_sub_vectors;
  }
  return canonicalJSON(p);
}

// parseProperties parses properties_json ("" = none) into a flat object.
function parseProperties(json) {
  if (json === undefined || json === null || json === "") return {};
  if (typeof json !== "string") throw new Failure(KIND.INVALID, "properties_json must be a string");
  let p;
  try {
    p = JSON.parse(json);
  } catch (e) {
    throw new Failure(KIND.INVALID, "properties_json is not valid JSON");
  }
  if (p === null || typeof p !== "object" || Array.isArray(p)) throw new Failure(KIND.INVALID, "properties_json is not a JSON object");
  const out = {};
  for (const [k, v] of Object.entries(p)) {
    const lk = k.toLowerCase();
    if (Object.prototype.hasOwnProperty.call(out, lk)) throw new Failure(KIND.INVALID, `property ${JSON.stringify(lk.slice(0, 64))} is given twice`);
    out[lk] = v;
  }
  return out;
}

// ---- error classification ---------------------------------------------------

// Ordered: the first rule that matches wins. Tested against the whole
// message chain (every "Caused by:"), after redaction.
const RULES = [
  // Lance's memory pool (DataFusion's) refusing a reservation, e.g. an
  // external sort of a scalar or FTS build: "Resources exhausted: …",
  // "Not enough memory to continue external sort". The build answers
  // PRE_INVOCATION_RESOURCE_REJECTED only with the dataset seen unchanged.
  [KIND.MEMORY_POOL, /Resources exhausted|Not enough memory to continue external sort|Failed to allocate additional \d+.* for \S+ with \d+.* already allocated/i],
  // Thread-pool / process / memory exhaustion: rayon or tokio failing to
  // spawn a thread under pids.max answers EAGAIN (os error 11).
  [KIND.RESOURCE, /Resource temporarily unavailable|\bEAGAIN\b|os error 11\b|WouldBlock|Cannot allocate memory|os error 12\b|\bENOMEM\b|failed to spawn thread|ThreadPoolBuildError|memory allocation of \d+ bytes failed|Too many open files|os error 24\b|\bEMFILE\b/i],
  // Local permission problems are I/O, not credentials.
  [KIND.IO, /Permission denied \(os error 13\)|os error 13\b|\bEACCES\b|Read-only file system|os error 30\b/i],
  [KIND.CREDENTIAL, /ExpiredToken|TokenRefreshRequired|RequestExpired|InvalidAccessKeyId|SignatureDoesNotMatch|InvalidToken|InvalidClientTokenId|UnrecognizedClientException|AccessDenied|Access Denied|AuthenticationFailed|AuthorizationFailure|AuthorizationPermissionMismatch|InvalidAuthenticationInfo|\bUnauthenticated\b|PermissionDenied|Permission denied|invalid_grant|\b40[13] (?:Unauthorized|Forbidden)\b|status(?: code)?:? 40[13]\b|credentials? (?:ha(?:s|ve) )?expired|expired (?:credential|token)|No credential|Error (?:loading|retrieving) credential|credential provider|failed to (?:fetch|load|refresh) credential/i],
  [KIND.COMMIT_CONFLICT, /Retryable commit conflict|Commit conflict for version|Incompatible transaction|Too many concurrent writers|Version conflict error/i],
  [KIND.ALREADY_EXISTS, /Index name '.*' already exists|already exists with different fields/is],
  [KIND.INVALID, /Invalid user input|Invalid input|Schema Error|LanceError\(Schema\)|Unprocessable|Invalid table name|cannot be created on the field|Field path .* not found in schema|must divide vector dimension|Table names cannot be empty/is],
  [KIND.NOT_SUPPORTED, /Not supported|NotImplemented|not implemented|Unsupported/i],
  [KIND.NOT_FOUND, /Lance index not found|Index '.*' was not found|Table '.*' was not found|Dataset at path .* was not found|Not found:|Version not found|\bNoSuchKey\b|\bNoSuchBucket\b|404 Not Found|\bstatus: 404\b|No such file or directory|os error 2\b/is],
  [KIND.INDEX, /LanceError\(Index\)|KMeans|kmeans|\bcentroid|codebook|index build/i],
  [KIND.IO, /LanceError\(IO\)|object_store error|Generic \w+ error|\bos error \d+|I\/O error|\bio error|Timeout|timed out|Connection (?:refused|reset|closed)|connect error|dns error|error sending request|Encountered corrupt file|Http error|\b5\d\d (?:Internal Server Error|Bad Gateway|Service Unavailable|Gateway Timeout)\b|\bIO \{ source:|Generic \{ store:|\bstatus: 5\d\d\b/i],
];

// LanceDB 0.37 wraps an object-store failure of connect()'s namespace probe
// as "Invalid input, Failed to connect to namespace: IO { … }". The cause is
// the store (a 404, a 5xx, a refused connection, a credential), not the
// request, so the wrapper is dropped and the inner error classified.
const NAMESPACE_IO_WRAPPER = /Invalid input, Failed to connect to namespace: (?=IO \{)/g;

function classify(message) {
  const s = String(message || "").replace(NAMESPACE_IO_WRAPPER, "");
  for (const [kind, re] of RULES) if (re.test(s)) return kind;
  return KIND.INTERNAL;
}

// ---- thread/process limit evidence -------------------------------------------

// A Rust panic reaches JS only as "Panic in async function": the panic text
// (e.g. rayon's ThreadPoolBuildError ... "Resource temporarily unavailable")
// goes straight to fd 2. The typed evidence of a refused thread or process
// spawn is the pids controller's "max" event counter of our own cgroup.

// pidsEventsPaths lists the pids.events files of the cgroup /proc/self/cgroup names.
function pidsEventsPaths(procSelfCgroup, root = "/sys/fs/cgroup") {
  const out = [];
  for (const line of String(procSelfCgroup || "").split("\n")) {
    const m = /^(\d+):([^:]*):(.*)$/.exec(line.trim());
    if (!m) continue;
    const [, id, controllers, p] = m;
    const rel = p === "/" ? "" : p;
    if (controllers.split(",").includes("pids")) out.push(`${root}/pids${rel}/pids.events`); // v1
    else if (id === "0" && controllers === "") {
      out.push(`${root}${rel}/pids.events`); // v2 (pure)
      out.push(`${root}/unified${rel}/pids.events`); // v2 (hybrid)
    }
  }
  return out;
}

// parsePidsMax reads the "max N" counter of a pids.events file; null if absent.
function parsePidsMax(text) {
  const m = /^max\s+(\d+)\s*$/m.exec(String(text || ""));
  return m ? Number(m[1]) : null;
}

// ---- sanitizing --------------------------------------------------------------

function escapeRegExp(s) {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

// makeSanitizer returns a function that removes every storage option value
// (raw, URI-encoded and JSON-escaped forms; values of ≥ MIN_REDACT_LEN chars),
// URI user information and query strings, signed-request credentials and
// secret-bearing XML elements from a message.
function makeSanitizer(storageOptions) {
  const needles = new Set();
  if (storageOptions && typeof storageOptions === "object") {
    for (const v of Object.values(storageOptions)) {
      const s = typeof v === "string" ? v : JSON.stringify(v);
      if (typeof s !== "string") continue;
      for (const form of [s, encodeURIComponent(s), JSON.stringify(s).slice(1, -1), s.trim()]) {
        if (form.length >= MIN_REDACT_LEN) needles.add(form);
      }
    }
  }
  const sorted = [...needles].sort((a, b) => b.length - a.length);
  const secretRe = sorted.length ? new RegExp(sorted.map(escapeRegExp).join("|"), "g") : null;
  return function sanitize(msg) {
    let s = String(msg === undefined || msg === null ? "" : msg);
    // Structure first (user info, query strings, signed-request parts), so
    // the rules still see URL schemes; then every storage option value.
    s = s.replace(/\b([a-z][a-z0-9+.-]*:\/\/)[^\s/@'"<>]*@/gi, "$1***@"); // user info
    s = s.replace(/\b([a-z][a-z0-9+.-]*:\/\/[^\s?#'"<>]*)[?#][^\s'"<>]*/gi, "$1?***"); // query strings
    s = s.replace(/\b(Credential|Signature|X-Amz-Credential|X-Amz-Signature|X-Amz-Security-Token|sig|token)=[^\s,&"'<>]+/gi, "$1=***");
    s = s.replace(/<(\w*(?:AccessKey|Signature|StringToSign|CanonicalRequest|Token|Secret|Credential)\w*)>[^<]*<\/\1>/gi, "<$1>***</$1>");
    if (secretRe) s = s.replace(secretRe, "***");
    return s;
  };
}

// shortMessage keeps the first link of a Rust error chain, drops Rust source
// locations, collapses whitespace and cuts to MAX_MESSAGE_BYTES of UTF-8.
function shortMessage(s) {
  let m = String(s).split(/\s*Caused by:/)[0];
  m = m.replace(/,?\s*\/[^\s,]*\.rs:\d+:\d+/g, "");
  // lance-io 10 prints the location as a Debug struct: drop it too.
  m = m.replace(/,?\s*location: Location \{[^{}]*\}(?:,\s*backtrace: \w+)?/g, "");
  m = m.replace(/[\u0000-\u001f\u007f]+/g, " ").replace(/\s+/g, " ").trim();
  return cutBytes(m, MAX_MESSAGE_BYTES);
}

function cutBytes(s, max) {
  const b = Buffer.from(s, "utf8");
  if (b.length <= max) return s;
  let end = max - 3;
  while (end > 0 && (b[end] & 0xc0) === 0x80) end--; // do not split a UTF-8 sequence
  return b.subarray(0, end).toString("utf8") + "...";
}

module.exports = {
  PROTOCOL, MAX_REQUEST_BYTES, MAX_RESULT_BYTES, MAX_MESSAGE_BYTES, SCHEMA_CONTRACT_VERSION, MIN_REDACT_LEN,
  RC, IE, KIND, Failure, MUTATIONS,
  splitDatasetURI, localDatasetDir, canonicalType, canonicalField, findColumn, contractOf, parseContract, compareContracts,
  normalizeIndexType, isVectorIndexType, canonicalJSON, indexProperties, indexStatsOf, parseProperties,
  classify, makeSanitizer, shortMessage, cutBytes, pidsEventsPaths, parsePidsMax,
};
