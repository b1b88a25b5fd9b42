// optimize.js: OPTIMIZE mode of a build (docs/builder.md "OPTIMIZE mode").
// Dataset-scoped: no index name, column or type. It compacts the dataset and
// brings every index up to date with table.optimize(), never pruning a
// version, then judges the outcome from a fresh read (evidence.judgeOptimize).
// builder.js hands in its I/O and error helpers, commit.js the fresh open.
"use strict";

const lib = require("./lib.js");
const ev = require("./evidence.js");
const { holdAt } = require("./hold.js");

const { RC, KIND } = lib;

// cleanupOlderThan: LanceDB prunes versions older than now - (now - this),
// i.e. older than 1970: none. (Leaving it out would prune versions older
// than 7 days.) deleteUnverified is never set.
const OPTIMIZE_OPTIONS = Object.freeze({ cleanupOlderThan: new Date(0) });

module.exports = function optimizer({ openTable, openFresh, errKind, errText, errDetail, buildResult, log, progress, preTouchCode }) {
  // validate checks an OPTIMIZE request's own fields (no I/O).
  function validate(req) {
    for (const k of ["index_name", "column_name", "index_type", "properties_json"]) {
      if (req[k] !== undefined && req[k] !== null && req[k] !== "") {
        throw new lib.Failure(KIND.INVALID, `OPTIMIZE is dataset-scoped and takes no ${k}`);
      }
    }
  }

  // afterRead opens the dataset on a fresh connection and reads the
  // indexes at version (the head if version is unknown or past it).
  async function afterRead(req, version) {
    let tbl;
    try {
      ({ tbl } = await openFresh(req));
      const head = await tbl.version();
      const at = Number.isSafeInteger(version) && version > 0 && version <= head ? version : head;
      if (at !== head) await tbl.checkout(at);
      return { head, at, after: ev.countsByName(await tbl.listIndices()) };
    } finally {
      if (tbl) try { tbl.close(); } catch (_) { /* best effort */ }
    }
  }

  // failureCode maps an error of optimize() once the dataset is known not
  // optimized: as a createIndex failure, with latest read afresh.
  function failureCode(kind, unchanged) {
    switch (kind) {
      case KIND.COMMIT_CONFLICT: return RC.COMMIT_CONFLICT;
      case KIND.MEMORY_POOL: return unchanged ? RC.RESOURCE_REJECTED : RC.IO;
      case KIND.RESOURCE: return unchanged ? RC.RESOURCE_REJECTED : RC.INTERNAL;
      case KIND.CREDENTIAL: return unchanged ? RC.CREDENTIAL_EXPIRED : RC.IO;
      case KIND.NOT_FOUND: return RC.NOT_FOUND;
      case KIND.INVALID: return RC.INVALID_ARGUMENT;
      case KIND.NOT_SUPPORTED: return RC.NOT_SUPPORTED;
      case KIND.INDEX: return RC.INDEX;
      case KIND.IO: return RC.IO;
      default: return RC.INTERNAL;
    }
  }

  async function optimize(req, b) {
    try {
      validate(req);
    } catch (e) {
      return buildResult(RC.INVALID_ARGUMENT, errText(e));
    }
    let tbl;
    let start;
    let before;
    let version = null;
    let err = null;
    try {
      try {
        ({ tbl } = await openTable(req));
        start = await tbl.version();
        if (start < b.admitted) {
          return buildResult(RC.STALE, `the dataset is at version ${start}, before the admitted version ${b.admitted}: it was recreated`);
        }
        before = ev.countsByName(await tbl.listIndices());
      } catch (e) {
        log(`optimize: failed before touching the dataset: ${errText(e)}`);
        return buildResult(preTouchCode(errKind(e)), errDetail(e));
      }
      const started = Date.now();
      progress({ phase: "optimizing" });
      try {
        await holdAt("before-commit"); // tests only (hold.js)
        await tbl.optimize(OPTIMIZE_OPTIONS);
      } catch (e) {
        err = e;
        log(`optimize: optimize() failed: ${errText(e)}`);
      }
      try {
        version = await tbl.version();
      } catch (e) {
        log(`optimize: reading the version after optimize() failed: ${errText(e)}`);
      }
      log(`optimize: optimize() returned in ${Date.now() - started} ms; version ${version}`);
    } finally {
      if (tbl) try { tbl.close(); } catch (_) { /* best effort */ }
    }
    await holdAt("after-commit"); // tests only (hold.js)

    // Judge from a fresh read, whether optimize() threw or not: a throw
    // after its commits (a cleanup step) must not be reported as a failure
    // when the dataset shows the work done.
    progress({ phase: "verifying" });
    let read;
    try {
      read = await afterRead(req, err ? null : version);
    } catch (e) {
      log(`optimize: the fresh read failed: ${errText(e)}`);
      if (err) return buildResult(failureCode(errKind(err), false), errDetail(err));
      return buildResult(RC.INTERNAL, `optimize() returned but the dataset could not be read again on a fresh connection: ${errDetail(e)}`);
    }
    const j = ev.judgeOptimize({ start, version: read.at, before, after: read.after });
    const extra = { optimized_indexes: j.optimized };
    log(`optimize: ${j.state}: ${j.why}`);
    if (j.state === "optimized" || (j.state === "nothing" && !err)) {
      const msg = j.state === "nothing" ? `nothing to optimize; version ${start}` : `optimized: ${j.why}`;
      const also = err ? `; optimize() then failed, but a fresh read shows the work done: ${errText(err)}` : "";
      return buildResult(RC.OK, msg + also, { ...extra, dataset_version: read.at, new_dataset_version: read.at });
    }
    const advanced = read.head > start ? { external_metadata_advanced: true } : {};
    if (err) {
      return buildResult(failureCode(errKind(err), read.head === start), `${j.why}; optimize() failed: ${errDetail(err)}`, { ...extra, ...advanced });
    }
    return buildResult(RC.INDEX, `optimize() returned, but the dataset is not optimized: ${j.why}`, { ...extra, ...advanced });
  }

  return { optimize, OPTIMIZE_OPTIONS };
};
