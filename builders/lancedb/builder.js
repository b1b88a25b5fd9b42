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

function buildResult(code, message, extra) {
  return { protocol: lib.PROTOCOL, mode: "build", result_code: code, message: lib.shortMessage(sanitize(message)), ...extra };
}

// ---- verified commits and resolve (commit.js) -------------------------------------

const commit = require("./commit.js")({
  openTable, storageOptions, errKind, errText, errDetail, buildResult, log,
  sanitize: (m) => sanitize(m), inspectCode: (e) => INSPECT_CODE[errKind(e)] || IE.INTERNAL,
});
const { resolve, resolveFailure } = commit;
const { build } = require("./build.js")({ openTable, errKind, errText, errDetail, buildResult, log, commit });

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
