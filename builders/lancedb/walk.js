// walk.js: the read-only dataset walks of verified commits and of resolve
// mode (docs/builder.md), and the scalar builds' uuid watch. builder.js opens
// the table; evidence.js judges what these read.
"use strict";

const fs = require("node:fs");
const path = require("node:path");
const ev = require("./evidence.js");

// At most this many versions after the admitted one are read (41 local
// versions took 9 ms; this bounds a walk to seconds).
const MAX_WALK_VERSIONS = 10000;

// walkVersions reads listIndices() at every retained version ≥ admitted and
// returns {versions, states, tooMany}: versions as listVersions() gave them,
// less any that vanished (pruned) before their checkout; states a Map
// version → evidence.indexState for name. isNotFound(e) tells a version
// pruned under the walk from any other error, which is thrown. The table is
// left checked out at its latest version.
async function walkVersions(tbl, admitted, name, isNotFound) {
  const listed = (await tbl.listVersions()).map((v) => Number(v.version)).filter(Number.isSafeInteger);
  const versions = new Set(listed);
  const states = new Map();
  const toRead = [...versions].filter((v) => v >= admitted).sort((a, b) => a - b);
  if (toRead.length > MAX_WALK_VERSIONS + 1) return { versions: [...versions], states, tooMany: toRead.length };
  try {
    for (const v of toRead) {
      try {
        await tbl.checkout(v);
      } catch (e) {
        if (!isNotFound(e)) throw e;
        versions.delete(v); // pruned since listVersions
        continue;
      }
      states.set(v, ev.indexState(await tbl.listIndices(), name));
    }
  } finally {
    await tbl.checkoutLatest();
  }
  return { versions: [...versions], states, tooMany: 0 };
}

// watchIndexDirs polls <datasetDir>/_indices every intervalMs for entries
// that were not there when it started. onFirst(uuid) is called once, for the
// first scan that finds exactly one new uuid-named directory; a scan that
// finds several at once (another writer building too) announces nothing.
// stop() does a last scan and returns the uuid announced ("" if none).
function watchIndexDirs(datasetDir, onFirst, { intervalMs = 20, log = () => {} } = {}) {
  const dir = path.join(datasetDir, "_indices");
  const list = () => {
    try {
      return fs.readdirSync(dir);
    } catch (_) {
      return []; // not created yet
    }
  };
  const before = new Set(list());
  let announced = "";
  let given = false;
  const scan = () => {
    if (given) return;
    const fresh = list().filter((e) => !before.has(e) && ev.isUuid(e));
    if (fresh.length === 1) {
      given = true;
      announced = fresh[0];
      onFirst(announced);
    } else if (fresh.length > 1) {
      given = true;
      log(`${fresh.length} new index directories appeared at once; no uuid is announced`);
    }
  };
  const timer = setInterval(scan, intervalMs);
  timer.unref();
  return {
    stop() {
      clearInterval(timer);
      scan();
      return announced;
    },
  };
}

module.exports = { MAX_WALK_VERSIONS, walkVersions, watchIndexDirs };
