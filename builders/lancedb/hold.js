"use strict";
// A fault-injection point for end-to-end tests, off unless the worker's
// environment sets LANCEMASTER_BUILDER_HOLD to a directory. At a named point
// of a build ("before-commit", "after-commit") the builder then waits while
// the file <dir>/<point> exists, after creating <dir>/<point>.reached (its
// pid) to say it got there. A test uses it to kill the backend at an exact point of a
// build (pkg/master/e2e_evidence_test.go). Production never sets it.
const fs = require("fs");
const path = require("path");

const POLL_MS = 50;

async function holdAt(point) {
  const dir = process.env.LANCEMASTER_BUILDER_HOLD;
  if (!dir) return;
  const file = path.join(dir, point);
  if (!fs.existsSync(file)) return;
  // Written under another name, then renamed: <point>.reached appears
  // with the pid in it, never empty (a test reads it as soon as it exists).
  try {
    fs.writeFileSync(file + ".reached.tmp", String(process.pid));
    fs.renameSync(file + ".reached.tmp", file + ".reached");
  } catch (_) { /* best effort */ }
  while (fs.existsSync(file)) {
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
}

module.exports = { holdAt };
