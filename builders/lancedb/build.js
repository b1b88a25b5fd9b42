// build.js: build mode of the builder (docs/builder.md "Build mode"):
// validate, open, check the version and the schema contract, plan, act,
// verify. OPTIMIZE is handed to optimize.js. builder.js hands in its I/O and
// error helpers and the commit.js instance.
"use strict";

const lib = require("./lib.js");
const types = require("./indextypes.js");
const { readSchemaFields } = require("./schema.js");
const { holdAt } = require("./hold.js");

const { RC, KIND, Failure } = lib;
const BUILD_MUTATIONS = new Set([...lib.MUTATIONS, "OPTIMIZE"]);

module.exports = function builder({ openTable, errKind, errText, errDetail, buildResult, log, commit }) {
  const { progress, startUuidWatch, verifyCommit, withLeftover } = commit;

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
    const { Index } = require("@lancedb/lancedb"); // loaded by openTable already
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
    const config = types.config(Index, b.indexType, b.options);
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

  const optimizer = require("./optimize.js")({
    openTable, openFresh: commit.openFresh, errKind, errText, errDetail, buildResult, log, progress,
    preTouchCode: (kind) => PRE_TOUCH_CODE[kind] || RC.INTERNAL,
  });

  return { build };
};
