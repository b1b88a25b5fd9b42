// The uuid watch (walk.watchOwnIndexFiles): only index directories this
// process holds a file open in, and that are new, are announced.
"use strict";

const test = require("node:test");
const assert = require("node:assert/strict");
const fs = require("node:fs");
const path = require("node:path");
const h = require("../harness.js");
const walk = require("../walk.js");

const OLD = "11111111-1111-4111-8111-111111111111";
const FOREIGN = "22222222-2222-4222-8222-222222222222";
const OURS = "33333333-3333-4333-8333-333333333333";
const SECOND = "44444444-4444-4444-8444-444444444444";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function dataset() {
  const dir = path.join(h.tmpDir("lm-walk-"), "t.lance");
  fs.mkdirSync(path.join(dir, "_indices", OLD), { recursive: true });
  return dir;
}

function openIn(dir, uuid) {
  fs.mkdirSync(path.join(dir, "_indices", uuid), { recursive: true });
  return fs.openSync(path.join(dir, "_indices", uuid, ".tmpX"), "w");
}

test("watch: another writer's new directory and our old one are never ours; our open file is", async () => {
  const dir = dataset();
  const seen = [];
  const w = walk.watchOwnIndexFiles(dir, (u) => seen.push(u), { intervalMs: 2 });
  const old = fs.openSync(path.join(dir, "_indices", OLD, "index.idx"), "w"); // e.g. REPLACE reading the old index
  fs.mkdirSync(path.join(dir, "_indices", FOREIGN));
  fs.writeFileSync(path.join(dir, "_indices", FOREIGN, "index.idx"), "x"); // written by someone else, closed
  await sleep(30);
  assert.deepEqual(seen, []);
  const fd = openIn(dir, OURS);
  await sleep(30);
  fs.closeSync(fd);
  fs.closeSync(old);
  assert.deepEqual(seen, [OURS]);
  assert.equal(w.stop(), OURS);
  fs.rmSync(path.dirname(dir), { recursive: true, force: true });
});

test("watch: files of two new directories open at once announce nothing, then or later", async () => {
  const dir = dataset();
  const seen = [];
  const w = walk.watchOwnIndexFiles(dir, (u) => seen.push(u), { intervalMs: 2 });
  const a = openIn(dir, OURS);
  const b = openIn(dir, SECOND);
  await sleep(30);
  fs.closeSync(b);
  await sleep(30);
  fs.closeSync(a);
  assert.deepEqual(seen, []);
  assert.equal(w.stop(), "");
  fs.rmSync(path.dirname(dir), { recursive: true, force: true });
});

test("watch: a dataset with no _indices yet, reached through a symlink", async () => {
  const root = h.tmpDir("lm-walk-");
  fs.mkdirSync(path.join(root, "real.lance"));
  fs.symlinkSync(path.join(root, "real.lance"), path.join(root, "t.lance"));
  const seen = [];
  const w = walk.watchOwnIndexFiles(path.join(root, "t.lance"), (u) => seen.push(u), { intervalMs: 2 });
  const fd = openIn(path.join(root, "real.lance"), OURS);
  await sleep(30);
  fs.closeSync(fd);
  assert.equal(w.stop(), OURS);
  assert.deepEqual(seen, [OURS]);
  fs.rmSync(root, { recursive: true, force: true });
});
