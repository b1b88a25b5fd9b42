// evidence.js: the pure rules of verified commits and of resolve mode
// (DESIGN.md §13.4, §13.7; docs/builder.md "Verified commits" and "Resolve
// mode"). No I/O and no LanceDB: builder.js reads the dataset and hands the
// facts here; test/evidence.test.js tests every row of the tables directly.
"use strict";

const { cutBytes } = require("./lib.js");

const OUTCOME = Object.freeze({ COMMITTED: "COMMITTED", NOT_COMMITTED: "NOT_COMMITTED", UNKNOWN: "UNKNOWN" });
const MAX_EVIDENCE_BYTES = 1024;
// The progress line the builder prints on stderr (pkg/backend/frame.ParseProgressLine).
const PROGRESS_PREFIX = "lancemaster-progress ";
const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

function isUuid(s) {
  return typeof s === "string" && UUID_RE.test(s);
}

// progressLine is the one stderr line announcing a fact of a running build:
// {"index_uuid":"…"} and/or {"phase":"…"} (phase ≤ 64 bytes).
function progressLine(fields) {
  const o = {};
  if (isUuid(fields.index_uuid)) o.index_uuid = fields.index_uuid;
  if (typeof fields.phase === "string" && fields.phase) o.phase = cutBytes(fields.phase, 64);
  return PROGRESS_PREFIX + JSON.stringify(o) + "\n";
}

// indexState says what one version's listIndices() tells about name: the
// exact name, else every case-insensitive match (the build's own rule).
// {kind: "absent"} | {kind: "present", name, uuid} | {kind: "ambiguous", uuids}.
function indexState(indexes, name) {
  const exact = indexes.filter((ix) => ix.name === name);
  const hits = exact.length ? exact : indexes.filter((ix) => String(ix.name).toLowerCase() === name.toLowerCase());
  if (hits.length === 0) return { kind: "absent" };
  if (hits.length > 1) return { kind: "ambiguous", uuids: hits.map((ix) => ix.indexUuid || "") };
  return { kind: "present", name: hits[0].name, uuid: hits[0].indexUuid || "" };
}

function uuidsOf(st) {
  if (!st) return [];
  if (st.kind === "present") return [st.uuid];
  if (st.kind === "ambiguous") return st.uuids;
  return [];
}

function describe(st) {
  if (!st) return "not read";
  if (st.kind === "absent") return "absent";
  if (st.kind === "ambiguous") return `${st.uuids.length} case-insensitive matches`;
  return st.uuid ? `uuid ${st.uuid}` : "present without a uuid";
}

function range(a, b) {
  return a === b ? `${a}` : `${a}..${b}`;
}

// missingVersions names the versions of [from, to] not in retained, cut short.
function missingVersions(retained, from, to) {
  const out = [];
  for (let v = from; v <= to; v++) if (!retained.has(v)) out.push(v);
  return out;
}

function listShort(vs) {
  return vs.length <= 8 ? vs.join(", ") : `${vs.slice(0, 8).join(", ")}, … (${vs.length} in all)`;
}

// decide applies the §13.4 table.
//
//   mutation   CREATE | REPLACE | DROP
//   admitted   the admitted dataset version A
//   versions   every retained version number (listVersions), any order
//   states     Map version → indexState(listIndices() at that version),
//              for every retained version ≥ A
//   uuid       this invocation's index uuid ("" if unknown)
//   admittedUuid  the uuid of N at admission ("" if none or unknown)
//   trust      lance_index_job_trust_exclusive_writer
//
// It returns {outcome, evidence, head_version, index_uuid?}. COMMITTED needs
// this invocation's uuid in a retained later version (CREATE, REPLACE) or,
// with trust, N's disappearance in a retained run of versions (DROP).
// NOT_COMMITTED needs every version from A to the head retained. Anything
// else, including several case-insensitive candidates, is UNKNOWN.
function decide({ mutation, admitted, versions, states, uuid = "", admittedUuid = "", trust = false, name }) {
  const retained = new Set(versions);
  const head = versions.length ? Math.max(...versions) : 0;
  const N = JSON.stringify(name);
  const out = (outcome, why, extra) => ({
    outcome, head_version: head, ...extra,
    evidence: cutBytes(`${mutation} ${N} admitted at version ${admitted}, head ${head}: ${why}`, MAX_EVIDENCE_BYTES),
  });
  if (!versions.length) return out(OUTCOME.UNKNOWN, "no version is retained");
  if (head < admitted) return out(OUTCOME.UNKNOWN, `the head is before the admitted version (the dataset was recreated?)`);
  const later = [...retained].filter((v) => v > admitted).sort((a, b) => a - b);
  const missing = missingVersions(retained, admitted, head);
  const contiguous = missing.length === 0;
  const gap = () => out(OUTCOME.UNKNOWN, `versions ${listShort(missing)} are not retained (pruned), so a commit among them cannot be ruled out`);
  const read = `read versions ${range(admitted + 1, head)}`;
  const st = (v) => states.get(v);
  const sA = retained.has(admitted) ? st(admitted) : null;
  if (uuid && !isUuid(uuid)) return out(OUTCOME.UNKNOWN, "this invocation's uuid is not a uuid");

  if (mutation === "CREATE" || mutation === "REPLACE") {
    if (uuid) {
      const hit = later.find((v) => uuidsOf(st(v)).includes(uuid));
      if (hit !== undefined) {
        return out(OUTCOME.COMMITTED, `version ${hit} lists ${N} with this invocation's uuid ${uuid}`, { index_uuid: uuid });
      }
    }
    if (!contiguous) return gap();
    if (mutation === "CREATE") {
      const listed = later.filter((v) => st(v) && st(v).kind !== "absent");
      if (!listed.length) return out(OUTCOME.NOT_COMMITTED, `${read} (all retained): none lists ${N}`);
      const first = listed[0];
      if (uuid) {
        return out(OUTCOME.NOT_COMMITTED, `${read} (all retained): ${N} first at version ${first} (${describe(st(first))}), never with this invocation's uuid ${uuid}`);
      }
      return out(OUTCOME.UNKNOWN, `${read}: ${N} appears at version ${first} (${describe(st(first))}) and this invocation's uuid is unknown`);
    }
    // REPLACE: N keeps the uuid it had at admission in every later version.
    if (sA.kind === "ambiguous") return out(OUTCOME.UNKNOWN, `at the admitted version ${N} has ${describe(sA)}`);
    if (admittedUuid && (sA.kind !== "present" || sA.uuid !== admittedUuid)) {
      return out(OUTCOME.UNKNOWN, `the admitted version lists ${N} ${describe(sA)}, not the admitted uuid ${admittedUuid}`);
    }
    const base = sA.kind === "present" ? sA.uuid : "";
    if (sA.kind === "present" && !base) return out(OUTCOME.UNKNOWN, `at the admitted version ${N} has no uuid`);
    const deviant = later.find((v) => {
      const s = st(v);
      return base ? !(s && s.kind === "present" && s.uuid === base) : !(s && s.kind === "absent");
    });
    if (deviant === undefined) {
      const keeps = base ? `${N} keeps uuid ${base}` : `${N} is absent, as at the admitted version`;
      return out(OUTCOME.NOT_COMMITTED, `${read} (all retained): ${keeps} in every one`);
    }
    const why = uuid ? "" : "; this invocation's uuid is unknown";
    return out(OUTCOME.UNKNOWN, `at version ${deviant} ${N} is ${describe(st(deviant))} (admitted: ${describe(sA)})${why}; a uuid change alone never proves a REPLACE`);
  }

  // DROP.
  if (sA && sA.kind !== "present") return out(OUTCOME.UNKNOWN, `at the admitted version ${N} is ${describe(sA)}`);
  if (trust) {
    // Under the exclusive-writer trust (and the same-name fence), only this
    // job removes N: the first version without it is its commit, provided
    // every version up to it is retained and lists N before it.
    for (let v = admitted + 1; v <= head && retained.has(v); v++) {
      const s = st(v);
      if (!s || s.kind === "ambiguous") break;
      if (s.kind === "absent") {
        return out(OUTCOME.COMMITTED, `versions ${range(admitted + 1, v)} retained; ${N} is listed before version ${v} and absent from it (trust_exclusive_writer: only this job removes ${N})`);
      }
    }
  }
  if (!contiguous) return gap();
  const gone = later.find((v) => st(v).kind !== "present");
  if (gone === undefined) return out(OUTCOME.NOT_COMMITTED, `${read} (all retained): ${N} is present in every one`);
  const why = trust ? "" : "; without lance_index_job_trust_exclusive_writer a DROP is never proven";
  return out(OUTCOME.UNKNOWN, `at version ${gone} ${N} is ${describe(st(gone))}${why}`);
}

// checkVerified checks a mutating call's own version, read on a fresh
// connection (§13.7): CREATE/REPLACE want N present with a uuid other than
// the one it had before the call (and the announced one, if any); DROP wants
// N absent. It returns {ok: true, uuid} or {ok: false, why}.
function checkVerified({ mutation, name, state, before = "", announced = "" }) {
  const N = JSON.stringify(name);
  if (mutation === "DROP") {
    return state.kind === "absent" ? { ok: true, uuid: "" } : { ok: false, why: `${N} is still listed (${describe(state)})` };
  }
  if (state.kind !== "present") return { ok: false, why: `${N} is ${describe(state)}` };
  if (!isUuid(state.uuid)) return { ok: false, why: `${N} is listed without a uuid` };
  if (before && state.uuid === before) return { ok: false, why: `${N} still has the uuid ${before} it had before the call` };
  if (announced && state.uuid !== announced) {
    return { ok: false, why: `${N} has uuid ${state.uuid}, not the announced ${announced}` };
  }
  return { ok: true, uuid: state.uuid };
}

// ---- OPTIMIZE (docs/builder.md "OPTIMIZE mode") ----

// countsOf is one listIndices() entry as frame.IndexCounts (unknown counts left out).
function countsOf(ix) {
  const o = {};
  if (isUuid(ix.indexUuid)) o.index_uuid = ix.indexUuid;
  for (const [from, to] of [["numIndexedRows", "indexed_rows"], ["numUnindexedRows", "unindexed_rows"], ["numSegments", "segments"]]) {
    const n = typeof ix[from] === "bigint" ? Number(ix[from]) : ix[from];
    if (Number.isSafeInteger(n) && n >= 0) o[to] = n;
  }
  return o;
}

// countsByName maps listIndices() to name → countsOf.
function countsByName(indexes) {
  const m = new Map();
  for (const ix of indexes) m.set(String(ix.name), countsOf(ix));
  return m;
}

// judgeOptimize judges an OPTIMIZE from what was read: before (countsByName
// at the version opened, start), after (countsByName at version, read on a
// fresh connection). It returns {state, optimized, why}:
//   "optimized"  version > start and every index of before is current at
//                version (0 unindexed rows; gone counts as current)
//   "nothing"    version = start and no index of before had unindexed rows
//   "behind"     otherwise: some index still has unindexed rows (or an
//                unknown count), or nothing committed while rows were unindexed
// optimized lists every index of before or after as frame.OptimizedIndex.
function judgeOptimize({ start, version, before, after }) {
  const names = [...new Set([...before.keys(), ...after.keys()])].sort();
  const optimized = names.map((name) => {
    const o = { name };
    if (before.has(name)) o.before = before.get(name);
    if (after.has(name)) o.after = after.get(name);
    return o;
  });
  const behind = [];
  for (const name of before.keys()) {
    const a = after.get(name);
    if (a && a.unindexed_rows !== 0) behind.push(`${JSON.stringify(name)} has ${a.unindexed_rows === undefined ? "an unknown number of" : a.unindexed_rows} unindexed rows`);
  }
  const gone = [...before.keys()].filter((n) => !after.has(n));
  const goneNote = gone.length ? `; ${listShort(gone.map((n) => JSON.stringify(n)))} gone at version ${version}` : "";
  const pendingBefore = [...before.values()].filter((c) => c.unindexed_rows !== 0).length;
  if (version > start && !behind.length) {
    return { state: "optimized", optimized, why: `version ${start} to ${version}; all ${before.size} indexes current${goneNote}` };
  }
  if (version === start && !pendingBefore) {
    return { state: "nothing", optimized, why: `nothing to optimize: version ${start} unchanged and no index had unindexed rows` };
  }
  const why = version > start
    ? `version ${start} to ${version}, but ${listShort(behind)}`
    : `version ${version} is not after ${start} although ${pendingBefore} indexes had unindexed rows`;
  return { state: "behind", optimized, why: cutBytes(why, MAX_EVIDENCE_BYTES) };
}

// leftoverUuid: the uuid a build that did not commit learned for its own
// index directory, if the head version does not list it (else "").
function leftoverUuid(learned, headIndexes) {
  if (!isUuid(learned)) return "";
  return headIndexes.some((ix) => ix.indexUuid === learned) ? "" : learned;
}

module.exports = { OUTCOME, MAX_EVIDENCE_BYTES, PROGRESS_PREFIX, UUID_RE, isUuid, progressLine, indexState, decide, checkVerified,
  countsOf, countsByName, judgeOptimize, leftoverUuid };
