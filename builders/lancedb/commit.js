// commit.js: verified commits (§13.7) and resolve mode (§13.4) of the
// builder (docs/builder.md). builder.js hands in its I/O and error helpers;
// walk.js reads the versions, evidence.js judges them.
"use strict";

const lib = require("./lib.js");
const ev = require("./evidence.js");
const walk = require("./walk.js");

const { RC, IE, KIND, Failure } = lib;
const { MUTATIONS } = lib;
// Pauses before the verification's second and third fresh open.
const VERIFY_RETRY_MS = [200, 800];

// The builder's helpers: openTable(req) → {tbl} on a fresh connection,
// storageOptions(req) (validates), errKind/errText/errDetail(e),
// buildResult(code, message, extra), log(msg), sanitize(msg),
// inspectCode(e) (an inspect/resolve error_code).
module.exports = function commit({ openTable, storageOptions, errKind, errText, errDetail, buildResult, log, sanitize, inspectCode }) {
  // progress prints one announcement line on stderr (docs/builder.md
  // "Progress lines"); the agent parses it with frame.ParseProgressLine.
  function progress(fields) {
    process.stderr.write(ev.progressLine(fields));
  }

  // lanceAnnouncesVectorUuid: LANCEDB_LOG makes Lance log build_vector_index
  // with the uuid (frame.LanceLogEnv), so the builder need not watch for it.
  function lanceAnnouncesVectorUuid() {
    return /(^|,)\s*lance::index::vector=(debug|trace)\s*(,|$)/.test(process.env.LANCEDB_LOG || "");
  }

  // startUuidWatch watches for the index directory this process writes
  // under a local dataset's _indices. It announces the uuid (a progress
  // line) unless Lance does (a vector build with lanceAnnouncesVectorUuid);
  // either way the uuid it sees is learned, for leftover_index_uuid. null
  // when there is nothing to watch. stop() returns {announced, learned}.
  function startUuidWatch(req, b) {
    if (b.mutation !== "CREATE" && b.mutation !== "REPLACE") return null;
    const silent = lib.isVectorIndexType(b.indexType) && lanceAnnouncesVectorUuid();
    let dir = null;
    try {
      dir = lib.localDatasetDir(req.dataset_uri);
    } catch (_) { /* validated already */ }
    if (!dir) return null;
    const w = walk.watchOwnIndexFiles(dir, (uuid) => { if (!silent) progress({ index_uuid: uuid }); }, { log });
    return {
      stop() {
        const uuid = w.stop();
        return { announced: silent ? "" : uuid, learned: uuid };
      },
    };
  }

  // withLeftover adds leftover_index_uuid to a build answer that is not
  // NATIVE_OK when the build learned its own index uuid and a fresh read of
  // the head version does not list it: the index directory Lance wrote and
  // did not commit. A head that cannot be read adds nothing.
  async function withLeftover(req, result, learned) {
    if (result.result_code === RC.OK || !ev.isUuid(learned)) return result;
    let tbl;
    try {
      ({ tbl } = await openFresh(req));
      const uuid = ev.leftoverUuid(learned, await tbl.listIndices());
      if (!uuid) return result;
      log(`build: index directory ${uuid} was written and is not listed at the head version`);
      return { ...result, leftover_index_uuid: uuid };
    } catch (e) {
      log(`build: reading the head for a leftover index uuid failed: ${errText(e)}`);
      return result;
    } finally {
      if (tbl) try { tbl.close(); } catch (_) { /* best effort */ }
    }
  }

  const isNotFound = (e) => errKind(e) === KIND.NOT_FOUND;

  // openFresh opens the dataset on a fresh connection, trying again after
  // an I/O error (VERIFY_RETRY_MS): a commit that landed should not turn
  // UNKNOWN for one failed request.
  async function openFresh(req) {
    for (let i = 0; ; i++) {
      try {
        return await openTable(req);
      } catch (e) {
        if (i >= VERIFY_RETRY_MS.length || errKind(e) !== KIND.IO) throw e;
        log(`build: the fresh open failed (${errText(e)}); trying again in ${VERIFY_RETRY_MS[i]} ms`);
        await new Promise((r) => setTimeout(r, VERIFY_RETRY_MS[i]));
      }
    }
  }

  // verifyCommit re-reads the dataset on a fresh connection at the version the
  // mutating call committed (version; the fresh head if that is unknown) and
  // answers NATIVE_OK only if it shows the commit: N present with a new uuid
  // (CREATE, REPLACE; the announced one if any) or N absent (DROP). Otherwise
  // it walks the versions after startVersion: if they prove nothing of ours
  // committed, NATIVE_COMMIT_CONFLICT; else NATIVE_INTERNAL (UNKNOWN).
  async function verifyCommit(req, b, plan, { startVersion, version, announced }) {
    let tbl;
    let head = null;
    const advanced = () => (head !== null && head > startVersion ? { external_metadata_advanced: true } : {});
    try {
      ({ tbl } = await openFresh(req)); // openTable connects afresh each time
      head = await tbl.version();
      const v = Number.isSafeInteger(version) && version > 0 ? version : head;
      let why;
      if (v <= startVersion) why = `the call returned, but version ${v} is not after version ${startVersion} it started from`;
      else if (v > head) why = `a fresh connection sees the head at version ${head}, before the committed version ${v}`;
      if (!why) {
        if (v !== head) await tbl.checkout(v);
        const state = ev.indexState(await tbl.listIndices(), plan.name);
        const chk = ev.checkVerified({ mutation: b.mutation, name: plan.name, state, before: plan.before, announced });
        if (chk.ok) {
          const extra = { new_dataset_version: v, dataset_version: v };
          if (chk.uuid) extra.index_uuid = chk.uuid;
          log(`build: verified at version ${v}${chk.uuid ? ` (uuid ${chk.uuid})` : ""}; head ${head}`);
          return buildResult(RC.OK, `${plan.done}; verified at version ${v}`, extra);
        }
        why = `version ${v} read on a fresh connection does not show the commit: ${chk.why}`;
      }
      log(`build: ${why}`);
      const w = await walk.walkVersions(tbl, startVersion, plan.name, isNotFound);
      if (w.tooMany) return buildResult(RC.INTERNAL, `${why}; ${w.tooMany} later versions are too many to walk`, advanced());
      const d = ev.decide({ mutation: b.mutation, admitted: startVersion, versions: w.versions, states: w.states,
        admittedUuid: plan.before, name: plan.name });
      const code = d.outcome === ev.OUTCOME.NOT_COMMITTED ? RC.COMMIT_CONFLICT : RC.INTERNAL;
      return buildResult(code, `${why}; ${d.evidence}`, advanced());
    } catch (e) {
      log(`build: verifying the commit failed: ${errText(e)}`);
      return buildResult(RC.INTERNAL, `the commit could not be verified on a fresh connection: ${errDetail(e)}`, advanced());
    } finally {
      if (tbl) try { tbl.close(); } catch (_) { /* best effort */ }
    }
  }

  // ---- resolve (§13.4) ----

  function resolveFailure(code, msg) {
    return { protocol: lib.PROTOCOL, mode: "resolve", ok: false, error_code: code, message: lib.shortMessage(sanitize(msg)) };
  }

  function optionalUuid(v, what) {
    if (v === undefined || v === null || v === "") return "";
    const s = typeof v === "string" ? v.toLowerCase() : "";
    if (!ev.isUuid(s)) throw new Failure(KIND.INVALID, `${what} is not a uuid`);
    return s;
  }

  function validateResolve(req) {
    const mutation = String(req.mutation_type || "").toUpperCase();
    if (!MUTATIONS.has(mutation)) throw new Failure(KIND.INVALID, "mutation_type must be CREATE, REPLACE or DROP");
    if (typeof req.index_name !== "string" || req.index_name.trim() === "") throw new Failure(KIND.INVALID, "index_name is empty");
    if (!Number.isSafeInteger(req.admitted_dataset_version) || req.admitted_dataset_version < 1) {
      throw new Failure(KIND.INVALID, "admitted_dataset_version must be a positive integer");
    }
    if (req.trust_exclusive_writer !== undefined && typeof req.trust_exclusive_writer !== "boolean") {
      throw new Failure(KIND.INVALID, "trust_exclusive_writer must be a boolean");
    }
    return {
      mutation, name: req.index_name, admitted: req.admitted_dataset_version, trust: req.trust_exclusive_writer === true,
      uuid: optionalUuid(req.index_uuid, "index_uuid"), admittedUuid: optionalUuid(req.admitted_index_uuid, "admitted_index_uuid"),
    };
  }

  // resolve reads a job's outcome from the dataset, read-only: listIndices()
  // at every retained version from the admitted one, judged by evidence.decide.
  async function resolve(req) {
    let r;
    try {
      r = validateResolve(req);
      storageOptions(req);
    } catch (e) {
      return resolveFailure(IE.INVALID_ARGUMENT, errText(e));
    }
    let tbl;
    try {
      ({ tbl } = await openTable(req));
      const w = await walk.walkVersions(tbl, r.admitted, r.name, isNotFound);
      let d;
      if (w.tooMany) {
        d = { outcome: ev.OUTCOME.UNKNOWN, head_version: Math.max(...w.versions),
          evidence: `${w.tooMany} versions from the admitted version ${r.admitted} on are more than ${walk.MAX_WALK_VERSIONS + 1} to read` };
      } else {
        d = ev.decide({ mutation: r.mutation, admitted: r.admitted, versions: w.versions, states: w.states, uuid: r.uuid,
          admittedUuid: r.admittedUuid, trust: r.trust, name: r.name });
      }
      const res = { protocol: lib.PROTOCOL, mode: "resolve", ok: true, outcome: d.outcome, head_version: d.head_version,
        evidence: lib.cutBytes(sanitize(d.evidence), ev.MAX_EVIDENCE_BYTES) };
      if (d.index_uuid) res.index_uuid = d.index_uuid;
      log(`resolve: ${res.outcome}: ${res.evidence}`);
      return res;
    } catch (e) {
      log(`resolve failed: ${errText(e)}`);
      return resolveFailure(inspectCode(e), errDetail(e));
    } finally {
      if (tbl) try { tbl.close(); } catch (_) { /* best effort */ }
    }
  }

  return { progress, startUuidWatch, openFresh, verifyCommit, withLeftover, resolve, resolveFailure };
};
