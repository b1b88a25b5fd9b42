#!/usr/bin/env node
// builder.js: lancemaster's one-shot Lance index worker (docs/builder.md).
//
// The backend agent starts it once per invocation, writes ONE request frame
// to its stdin and reads ONE result frame from its stdout
// (pkg/backend/frame): a 4-byte big-endian length, then that many bytes of
// UTF-8 JSON. Diagnostics go to stderr only, and never carry a storage
// option value or the request.
//
// Exit codes:
//   0  a result frame was written (whatever it says, success or failure)
//   2  the request frame was unusable (bad or oversized length prefix,
//      truncated, not UTF-8 JSON, not an object, wrong protocol, unknown
//      mode): nothing is written to stdout
//   3  the result frame could not be written (encoding above the 256 KiB
//      bound, or stdout failed): stdout holds no complete frame
//   other (1, signals)  the builder crashed; stdout holds no complete frame
"use strict";

const fs = require("node:fs");
const util = require("node:util");
const lib = require("./lib.js");
const types = require("./indextypes.js");
const { readSchemaFields } = require("./schema.js");
const { holdAt } = require("./hold.js");

const { RC, IE, KIND, Failure } = lib;
const EXIT_OK = 0;
const EXIT_BAD_REQUEST = 2;
const EXIT_NO_RESULT = 3;

// ---- stdout discipline: only the result frame goes there --------------------

const stdout = process.stdout;
const writeStdout = stdout.write.bind(stdout);
stdout.write = function redirected(chunk, encoding, cb) {
  return process.stderr.write(chunk, encoding, cb);
};
for (const m of ["log", "info", "debug", "dir", "table", "trace"]) {
  console[m] = (...args) => process.stderr.write(util.format(...args) + "\n");
}

// Quiet Lance's WARN lines unless the agent chose a level. Thread pools
// (LANCE_CPU_THREADS, LANCE_IO_THREADS, RAYON_NUM_THREADS, UV_THREADPOOL_SIZE,
// TOKIO_WORKER_THREADS) are the agent's to set; they are never touched here.
if (!process.env.LANCEDB_LOG) process.env.LANCEDB_LOG = "error";

let sanitize = lib.makeSanitizer(null);
let resultWritten = false;
let currentMode = "";

function log(msg) {
  process.stderr.write(`builder: ${lib.shortMessage(sanitize(msg))}\n`);
}

function finish(code) {
  process.exit(code);
}

// writeResult encodes and writes the one result frame, then exits.
function writeResult(result) {
  if (resultWritten) return;
  resultWritten = true;
  let body;
  try {
    body = Buffer.from(JSON.stringify(result), "utf8");
  } catch (e) {
    log(`result cannot be encoded: ${e && e.message}`);
    finish(EXIT_NO_RESULT);
    return;
  }
  if (body.length > lib.MAX_RESULT_BYTES) {
    const msg = `the ${result.mode} answer is ${body.length} bytes; at most ${lib.MAX_RESULT_BYTES} are allowed`;
    log(msg);
    if (result.mode === "inspect" && result.ok) {
      // A very wide schema: answer a typed failure instead of a frame the agent must refuse.
      resultWritten = false;
      writeResult({ protocol: lib.PROTOCOL, mode: "inspect", ok: false, error_code: IE.INTERNAL, message: msg });
      return;
    }
    finish(EXIT_NO_RESULT);
    return;
  }
  const frame = Buffer.alloc(4 + body.length);
  frame.writeUInt32BE(body.length, 0);
  body.copy(frame, 4);
  stdout.once("error", (e) => {
    log(`stdout failed: ${e && e.code}`);
    finish(EXIT_NO_RESULT);
  });
  writeStdout(frame, (err) => {
    if (err) {
      log(`stdout failed: ${err.code || err.message}`);
      finish(EXIT_NO_RESULT);
      return;
    }
    finish(EXIT_OK);
  });
}

// ---- the request frame --------------------------------------------------------

class BadRequest extends Error {}

const MODES = new Set(["build", "inspect", "resolve"]);

// readRequest reads exactly one frame from stdin: never more than
// MAX_REQUEST_BYTES+4 bytes are kept, whatever the prefix claims. Bytes after
// the frame are ignored; stdin is not read to its end.
function readRequest() {
  return new Promise((resolve, reject) => {
    const chunks = [];
    let have = 0;
    let need = -1;
    let done = false;
    const stdin = process.stdin;
    const stop = (fn, v) => {
      if (done) return;
      done = true;
      stdin.removeAllListeners("data");
      stdin.removeAllListeners("end");
      stdin.pause();
      stdin.destroy();
      fn(v);
    };
    stdin.on("data", (c) => {
      if (done) return;
      chunks.push(c);
      have += c.length;
      if (need < 0 && have >= 4) {
        const head = Buffer.concat(chunks);
        chunks.length = 0;
        chunks.push(head);
        need = head.readUInt32BE(0);
        if (need === 0) return stop(reject, new BadRequest("request frame is empty (length prefix 0)"));
        if (need > lib.MAX_REQUEST_BYTES) {
          return stop(reject, new BadRequest(`request frame length prefix ${need} exceeds ${lib.MAX_REQUEST_BYTES}`));
        }
      }
      if (need >= 0 && have >= 4 + need) {
        const all = Buffer.concat(chunks);
        if (all.length > 4 + need) log(`ignoring ${all.length - 4 - need} bytes after the request frame`);
        stop(resolve, all.subarray(4, 4 + need));
      }
    });
    stdin.on("end", () => {
      stop(reject, new BadRequest(need < 0
        ? `stdin ended after ${have} bytes, before a 4-byte length prefix`
        : `stdin ended after ${have - 4} of ${need} request bytes`));
    });
    stdin.on("error", (e) => stop(reject, new BadRequest(`stdin failed: ${e.code || e.message}`)));
  });
}

function decodeRequest(body) {
  let text;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(body);
  } catch (e) {
    throw new BadRequest("request frame is not valid UTF-8");
  }
  let req;
  try {
    req = JSON.parse(text);
  } catch (e) {
    throw new BadRequest("request frame is not valid JSON");
  }
  if (req === null || typeof req !== "object" || Array.isArray(req)) throw new BadRequest("request frame is not a JSON object");
  // Redact storage option values from here on, even if the request is refused.
  sanitize = lib.makeSanitizer(req.storage_options);
  if (req.protocol !== lib.PROTOCOL) throw new BadRequest(`request protocol is not ${lib.PROTOCOL}`);
  if (!MODES.has(req.mode)) throw new BadRequest("request mode is not build, inspect or resolve");
  return req;
}

// ---- LanceDB -------------------------------------------------------------------

let lancedb = null;

function storageOptions(req) {
  const so = req.storage_options;
  if (so === undefined || so === null) return undefined;
  if (typeof so !== "object" || Array.isArray(so)) throw new Failure(KIND.INVALID, "storage_options must be an object of strings");
  for (const v of Object.values(so)) {
    if (typeof v !== "string") throw new Failure(KIND.INVALID, "storage_options values must be strings");
  }
  return Object.keys(so).length ? { ...so } : undefined;
}

// openTable opens <parent>/<name>.lance at its latest version.
async function openTable(req) {
  const { parent, name } = lib.splitDatasetURI(req.dataset_uri);
  const so = storageOptions(req);
  if (!lancedb) lancedb = require("@lancedb/lancedb");
  const db = await lancedb.connect(parent, so ? { storageOptions: so } : {});
  const tbl = await db.openTable(name, undefined, so ? { storageOptions: so } : {});
  return { db, tbl };
}

// pidsMaxHits sums the "max" counters of our cgroup's pids.events (v1 or
// v2): how many thread/process spawns the pids limit refused. null if unknown.
function pidsMaxHits() {
  let cg;
  try {
    cg = fs.readFileSync("/proc/self/cgroup", "utf8");
  } catch (_) {
    return null;
  }
  let total = null;
  for (const p of lib.pidsEventsPaths(cg)) {
    try {
      const n = lib.parsePidsMax(fs.readFileSync(p, "utf8"));
      if (n !== null) total = (total || 0) + n;
    } catch (_) { /* not this hierarchy */ }
  }
  return total;
}

const pidsHitsAtStart = pidsMaxHits();
let pidsRefusals = 0;

function pidsLimitHit() {
  if (pidsHitsAtStart === null) return false;
  const now = pidsMaxHits();
  if (now === null || now <= pidsHitsAtStart) return false;
  pidsRefusals = now - pidsHitsAtStart;
  log(`the pids limit refused ${pidsRefusals} thread/process spawns during this run`);
  return true;
}

// errKind classifies an error: the builder's own Failures carry their kind;
// anything else is classified from its (sanitized) message chain. A Rust
// panic carries no cause to JS ("Panic in async function"), so an
// INTERNAL/IO/INDEX error while our pids limit refused spawns is RESOURCE.
function errKind(e) {
  if (e instanceof Failure) return e.kind;
  const kind = lib.classify(sanitize(errText(e)));
  if ((kind === KIND.INTERNAL || kind === KIND.IO || kind === KIND.INDEX) && pidsLimitHit()) return KIND.RESOURCE;
  return kind;
}

function errText(e) {
  if (e && typeof e.message === "string") return e.message;
  return String(e);
}

// errMessage is the sanitized first link of an error's message; a
// RESOURCE error told by the pids counter says so.
function errMessage(e) {
  return lib.shortMessage(sanitize(errDetail(e)));
}

function errDetail(e) {
  const t = errText(e);
  return pidsRefusals > 0 ? `the pids limit refused ${pidsRefusals} thread/process spawns: ${t}` : t;
}

async function readFields(tbl) {
  return (await readSchemaFields(tbl)).map((f, i) => lib.canonicalField(f, i));
}

// ---- inspect ---------------------------------------------------------------------

const INSPECT_CODE = {
  [KIND.NOT_FOUND]: IE.NOT_FOUND,
  [KIND.INVALID]: IE.INVALID_ARGUMENT,
  [KIND.IO]: IE.IO,
  [KIND.CREDENTIAL]: IE.IO,
  [KIND.MEMORY_POOL]: IE.IO,
};

async function inspect(req) {
  const fail = (e) => ({
    protocol: lib.PROTOCOL, mode: "inspect", ok: false,
    error_code: INSPECT_CODE[errKind(e)] || IE.INTERNAL, message: errMessage(e),
  });
  let tbl;
  try {
    ({ tbl } = await openTable(req));
    const version = await tbl.version();
    const fields = await readFields(tbl);
    const indexes = [];
    const indexStats = [];
    for (const ix of await tbl.listIndices()) {
      const type = lib.normalizeIndexType(ix.indexType);
      let stats;
      const details = ix.indexDetails && typeof ix.indexDetails === "object" ? ix.indexDetails : {};
      if (lib.isVectorIndexType(type) && typeof details.metric_type !== "string") {
        stats = await tbl.indexStats(ix.name);
      }
      indexes.push({
        name: ix.name, index_type: type, columns: Array.isArray(ix.columns) ? ix.columns.map(String) : [],
        properties_json: types.echoedProperties(type, details, stats),
      });
      indexStats.push(lib.indexStatsOf(ix));
    }
    return { protocol: lib.PROTOCOL, mode: "inspect", ok: true, dataset_version: version, fields, indexes, index_stats: indexStats };
  } catch (e) {
    log(`inspect failed: ${errText(e)}`);
    return fail(e);
  } finally {
    if (tbl) try { tbl.close(); } catch (_) { /* closing is best effort */ }
  }
}

// ---- build ------------------------------------------------------------------------

const BUILD_MUTATIONS = new Set([...lib.MUTATIONS, "OPTIMIZE"]);

function buildResult(code, message, extra) {
  return { protocol: lib.PROTOCOL, mode: "build", result_code: code, message: lib.shortMessage(sanitize(message)), ...extra };
}

// Codes for errors before any mutating call (nothing can have committed).
const PRE_TOUCH_CODE = {
  [KIND.RESOURCE]: RC.RESOURCE_REJECTED,
  [KIND.MEMORY_POOL]: RC.RESOURCE_REJECTED,
  [KIND.CREDENTIAL]: RC.CREDENTIAL_EXPIRED,
  [KIND.NOT_FOUND]: RC.STALE, // the admitted dataset is gone
  [KIND.INVALID]: RC.INVALID_ARGUMENT,
  [KIND.NOT_SUPPORTED]: RC.NOT_SUPPORTED,
  [KIND.IO]: RC.IO,
  [KIND.INDEX]: RC.INDEX,
  [KIND.COMMIT_CONFLICT]: RC.COMMIT_CONFLICT,
  [KIND.ALREADY_EXISTS]: RC.COMMIT_CONFLICT,
};

// validateBuild checks the request's own fields (no I/O).
function validateBuild(req) {
  const mutation = String(req.mutation_type || "").toUpperCase();
  if (!BUILD_MUTATIONS.has(mutation)) throw new Failure(KIND.INVALID, "mutation_type must be CREATE, REPLACE, DROP or OPTIMIZE");
  if (!Number.isSafeInteger(req.admitted_dataset_version) || req.admitted_dataset_version < 1) {
    throw new Failure(KIND.INVALID, "admitted_dataset_version must be a positive integer");
  }
  if (mutation === "OPTIMIZE") return { mutation, admitted: req.admitted_dataset_version };
  if (typeof req.index_name !== "string" || req.index_name.trim() === "") throw new Failure(KIND.INVALID, "index_name is empty");
  const b = { mutation, indexName: req.index_name, admitted: req.admitted_dataset_version };
  if (mutation === "DROP") return b;
  if (typeof req.column_name !== "string" || req.column_name.trim() === "") throw new Failure(KIND.INVALID, "column_name is empty");
  b.column = req.column_name;
  b.indexType = types.checkType(req.index_type);
  const o = types.options(b.indexType, lib.parseProperties(req.properties_json));
  b.options = o.options;
  b.canonical = o.canonical;
  return b;
}

// findIndex: the exact name, else the only case-insensitive match.
function findIndex(indexes, name) {
  const exact = indexes.filter((ix) => ix.name === name);
  if (exact.length) return { hit: exact[0] };
  const lc = name.toLowerCase();
  const folded = indexes.filter((ix) => String(ix.name).toLowerCase() === lc);
  if (folded.length > 1) return { ambiguous: folded.length };
  return { hit: folded[0] };
}

// latestVersion opens the dataset afresh and reads its latest version; null if it cannot.
async function latestVersion(req) {
  let tbl;
  try {
    ({ tbl } = await openTable(req));
    return await tbl.version();
  } catch (e) {
    log(`re-reading the dataset version after a failure failed: ${errText(e)}`);
    return null;
  } finally {
    if (tbl) try { tbl.close(); } catch (_) { /* best effort */ }
  }
}

async function build(req) {
  // 0. The request itself, and the admitted contract's version: no I/O.
  let b;
  try {
    b = validateBuild(req);
  } catch (e) {
    return buildResult(PRE_TOUCH_CODE[errKind(e)] || RC.INVALID_ARGUMENT, errText(e));
  }
  let admittedContract = null;
  if (b.mutation === "OPTIMIZE") return optimizer.optimize(req, b);
  if (b.mutation !== "DROP") {
    const pc = lib.parseContract(req.schema_contract_json);
    if (pc.unsupported) return buildResult(RC.UNSUPPORTED_CONTRACT, pc.unsupported);
    admittedContract = pc.contract;
  }

  let tbl;
  let startVersion = b.admitted;
  try {
    // 1-3. Open, check the version, recompute the contract, resolve names:
    // read-only, so nothing can have committed if any of this fails.
    let plan;
    try {
      ({ tbl } = await openTable(req));
      startVersion = await tbl.version();
      if (startVersion < b.admitted) {
        return buildResult(RC.STALE, `the dataset is at version ${startVersion}, before the admitted version ${b.admitted}: it was recreated`);
      }
      // Other commits since admission (another index, an append) do not
      // make the job stale; a different dataset or column does. Re-open the
      // admitted version and check its contract (the same dataset), then
      // plan on the latest version, whose contract planMutation checks too.
      if (startVersion !== b.admitted && admittedContract) {
        const stale = await admittedVersionStale(tbl, b, admittedContract);
        if (stale) return stale;
      }
      plan = await planMutation(tbl, b, admittedContract);
    } catch (e) {
      const kind = errKind(e);
      log(`build: failed before touching the dataset: ${errText(e)}`);
      return buildResult(PRE_TOUCH_CODE[kind] || RC.INTERNAL, errDetail(e));
    }
    if (plan.result) return plan.result;

    // 5. Act, announcing the new index's uuid as soon as it is seen.
    const started = Date.now();
    progress({ phase: "building" });
    const watch = startUuidWatch(req, b);
    let seen = { announced: "", learned: "" };
    try {
      await holdAt("before-commit"); // tests only (hold.js)
      await plan.act();
    } catch (e) {
      if (watch) seen = watch.stop();
      return await withLeftover(req, await actFailure(req, b, e, startVersion), seen.learned);
    }
    if (watch) seen = watch.stop();
    const announced = seen.announced;
    let version = null;
    try {
      version = await tbl.version();
    } catch (e) {
      log(`build: reading the version after the commit failed: ${errText(e)}`);
    }
    await holdAt("after-commit"); // tests only (hold.js)
    log(`build: ${b.mutation} ${b.indexType || ""} done in ${Date.now() - started} ms; dataset version ${version}`);
    // 6. Verify on a fresh connection (§13.7).
    progress({ phase: "verifying" });
    return await withLeftover(req, await verifyCommit(req, b, plan, { startVersion, version, announced }), seen.learned);
  } finally {
    if (tbl) try { tbl.close(); } catch (_) { /* best effort */ }
  }
}

// admittedVersionStale re-opens the admitted version and compares the
// column's schema contract there with the admitted one; it returns a STALE
// result when the version is gone or differs (a different dataset), else
// null. The table is left at its latest version.
async function admittedVersionStale(tbl, b, admittedContract) {
  try {
    await tbl.checkout(b.admitted);
  } catch (e) {
    return buildResult(RC.STALE, `the admitted version ${b.admitted} can no longer be opened`);
  }
  try {
    const col = lib.findColumn(await readSchemaFields(tbl), b.column);
    if (col.error) return buildResult(RC.STALE, `column ${JSON.stringify(b.column)} ${col.error} at the admitted version`);
    const diff = lib.compareContracts(admittedContract, lib.contractOf(lib.canonicalField(col.field, col.pos)));
    if (diff) return buildResult(RC.STALE, `at the admitted version the schema contract differs: ${diff}`);
    return null;
  } finally {
    await tbl.checkoutLatest();
  }
}

// planMutation does the read-only checks of steps 3 and 4 and returns either
// {result} (a pre-touch answer) or {act, done}.
async function planMutation(tbl, b, admittedContract) {
  const schemaFields = await readSchemaFields(tbl);
  const indexes = await tbl.listIndices();
  const found = findIndex(indexes, b.indexName);
  if (found.ambiguous) {
    return { result: buildResult(RC.INVALID_ARGUMENT, `index name ${JSON.stringify(b.indexName)} matches ${found.ambiguous} indexes that differ only in case`) };
  }
  if (b.mutation === "DROP") {
    if (!found.hit) return { result: buildResult(RC.NOT_FOUND, `index ${JSON.stringify(b.indexName)} does not exist`) };
    const name = found.hit.name;
    return { act: () => tbl.dropIndex(name), done: `dropped index ${JSON.stringify(name)}`, name, before: found.hit.indexUuid || "" };
  }

  // 3. The schema contract of the column, recomputed at this version.
  const col = lib.findColumn(schemaFields, b.column);
  if (col.error) {
    return { result: buildResult(RC.STALE, `column ${JSON.stringify(b.column)} ${col.error} at the admitted version`) };
  }
  const cf = lib.canonicalField(col.field, col.pos);
  const diff = lib.compareContracts(admittedContract, lib.contractOf(cf));
  if (diff) return { result: buildResult(RC.STALE, `the schema contract of column ${JSON.stringify(col.field.name)} changed: ${diff}`) };
  // The column's type, for this index type (the master checked it at admission).
  try {
    types.checkColumn(b.indexType, b.canonical, cf);
  } catch (e) {
    return { result: buildResult(RC.INVALID_ARGUMENT, errText(e)) };
  }

  // 4. Names and the index config.
  let name = b.indexName;
  if (found.hit) {
    if (b.mutation === "CREATE") {
      return { result: buildResult(RC.COMMIT_CONFLICT, `index ${JSON.stringify(found.hit.name)} already exists`) };
    }
    name = found.hit.name; // REPLACE keeps the stored spelling
    const cols = Array.isArray(found.hit.columns) ? found.hit.columns : [];
    if (cols.length !== 1 || cols[0] !== col.field.name) {
      return { result: buildResult(RC.INVALID_ARGUMENT, `index ${JSON.stringify(name)} is on other columns; Lance cannot replace it with an index on ${JSON.stringify(col.field.name)}`) };
    }
  }
  const config = types.config(lancedb.Index, b.indexType, b.options);
  const replace = b.mutation === "REPLACE";
  const verb = replace ? (found.hit ? "replaced" : "created (REPLACE)") : "created";
  return {
    act: () => tbl.createIndex(col.field.name, { name, replace, config }),
    done: `${verb} ${b.indexType} index ${JSON.stringify(name)} on column ${JSON.stringify(col.field.name)}`,
    name, before: found.hit ? found.hit.indexUuid || "" : "",
  };
}

// actFailure maps an error of createIndex/dropIndex. A code that classifies
// NOT_COMMITTED is only answered when it is certain: Lance's own "already
// exists" and commit-conflict errors are raised instead of a commit; a
// credential or resource error only after a fresh read shows the dataset
// still at the admitted version. Everything else classifies UNKNOWN.
async function actFailure(req, b, e, startVersion) {
  const kind = errKind(e);
  log(`build: ${b.mutation} failed: ${errText(e)}`);
  // Compared with the version this build started from, which is where our
  // own attempt would have committed.
  const latest = await latestVersion(req);
  const advanced = latest !== null && latest > startVersion;
  const unchanged = latest !== null && latest === startVersion;
  let code;
  switch (kind) {
    case KIND.ALREADY_EXISTS:
      code = b.mutation === "CREATE" ? RC.COMMIT_CONFLICT : RC.INVALID_ARGUMENT;
      break;
    case KIND.COMMIT_CONFLICT:
      code = RC.COMMIT_CONFLICT;
      break;
    case KIND.CREDENTIAL:
      code = unchanged ? RC.CREDENTIAL_EXPIRED : RC.IO;
      break;
    case KIND.RESOURCE:
      code = unchanged ? RC.RESOURCE_REJECTED : RC.INTERNAL;
      break;
    case KIND.MEMORY_POOL:
      code = unchanged ? RC.RESOURCE_REJECTED : RC.IO;
      break;
    case KIND.NOT_FOUND: code = RC.NOT_FOUND; break;
    case KIND.INVALID: code = RC.INVALID_ARGUMENT; break;
    case KIND.NOT_SUPPORTED: code = RC.NOT_SUPPORTED; break;
    case KIND.INDEX: code = RC.INDEX; break;
    case KIND.IO: code = RC.IO; break;
    default: code = RC.INTERNAL;
  }
  const extra = advanced ? { external_metadata_advanced: true } : {};
  return buildResult(code, errDetail(e), extra);
}

// ---- verified commits and resolve (commit.js) -------------------------------------

const commit = require("./commit.js")({
  openTable, storageOptions, errKind, errText, errDetail, buildResult, log,
  sanitize: (m) => sanitize(m), inspectCode: (e) => INSPECT_CODE[errKind(e)] || IE.INTERNAL,
});
const { progress, startUuidWatch, verifyCommit, withLeftover, resolve, resolveFailure } = commit;
const optimizer = require("./optimize.js")({
  openTable, openFresh: commit.openFresh, errKind, errText, errDetail, buildResult, log, progress,
  preTouchCode: (kind) => PRE_TOUCH_CODE[kind] || RC.INTERNAL,
});

// ---- main ----------------------------------------------------------------------------

async function main() {
  let req;
  try {
    req = decodeRequest(await readRequest());
  } catch (e) {
    if (e instanceof BadRequest) {
      log(`refusing the request frame: ${e.message}`);
      finish(EXIT_BAD_REQUEST);
      return;
    }
    throw e;
  }
  currentMode = req.mode;
  const t0 = Date.now();
  const result = await ({ inspect, build, resolve })[req.mode](req);
  const what = { inspect: () => (result.ok ? "ok" : result.error_code), resolve: () => (result.ok ? result.outcome : result.error_code),
    build: () => result.result_code }[req.mode]();
  log(`${req.mode}: ${what} in ${Date.now() - t0} ms`);
  writeResult(result);
}

// A last resort: an unexpected JS error still yields a typed failure frame
// (NATIVE_INTERNAL / INTERNAL) when the mode is known and none was written.
function lastResort(e) {
  log(`unexpected error: ${errText(e)}`);
  if (resultWritten) return;
  if (currentMode === "build") writeResult(buildResult(RC.INTERNAL, `unexpected builder error: ${errText(e)}`));
  else if (currentMode === "inspect") writeResult({ protocol: lib.PROTOCOL, mode: "inspect", ok: false, error_code: IE.INTERNAL, message: errMessage(e) });
  else if (currentMode === "resolve") writeResult(resolveFailure(IE.INTERNAL, `unexpected builder error: ${errText(e)}`));
  else finish(1);
}

process.on("uncaughtException", lastResort);
process.on("unhandledRejection", lastResort);
main().catch(lastResort);
