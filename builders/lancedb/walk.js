// walk.js: the read-only dataset walks of verified commits and of resolve
// mode (docs/builder.md), and the uuid watch of builds Lance logs no uuid for. builder.js opens
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

// watchOwnIndexFiles watches for the index directory this process writes:
// every intervalMs it reads /proc/self/fd and looks for a file open under
// <datasetDir>/_indices/<uuid>/ whose <uuid> directory was not there when
// the watch started. Only this process's own descriptors count, so another
// writer's index directory appearing at the same time (another job building
// on the same table) is never taken for ours. onFirst(uuid) is called once,
// for the first scan that finds exactly one such uuid; a scan that finds
// several announces nothing, ever. A build too quick to be seen with a file
// open announces nothing. stop() ends the watch and returns the uuid
// announced ("" if none).
function watchOwnIndexFiles(datasetDir, onFirst, { intervalMs = 5, log = () => {}, fdDir = "/proc/self/fd" } = {}) {
  const indices = path.join(datasetDir, "_indices");
  const prefixes = new Set([indices + "/"]);
  try {
    prefixes.add(path.join(fs.realpathSync(datasetDir), "_indices") + "/");
  } catch (_) { /* the dataset directory is checked by the open */ }
  let before;
  try {
    before = new Set(fs.readdirSync(indices));
  } catch (_) {
    before = new Set(); // no index yet
  }
  let announced = "";
  let given = false;
  const scan = () => {
    if (given) return;
    let fds;
    try {
      fds = fs.readdirSync(fdDir);
    } catch (_) {
      return;
    }
    const found = new Set();
    for (const fd of fds) {
      let target;
      try {
        target = fs.readlinkSync(path.join(fdDir, fd));
      } catch (_) {
        continue; // closed meanwhile
      }
      for (const p of prefixes) {
        if (!target.startsWith(p)) continue;
        const uuid = target.slice(p.length).split("/")[0];
        if (ev.isUuid(uuid) && !before.has(uuid) && target.length > p.length + uuid.length + 1) found.add(uuid);
      }
    }
    if (found.size === 1) {
      given = true;
      announced = [...found][0];
      onFirst(announced);
    } else if (found.size > 1) {
      given = true;
      log(`files of ${found.size} new index directories are open at once; no uuid is announced`);
    }
  };
  const timer = setInterval(scan, intervalMs);
  timer.unref();
  return {
    stop() {
      clearInterval(timer);
      return announced;
    },
  };
}

module.exports = { MAX_WALK_VERSIONS, walkVersions, watchOwnIndexFiles };
