// make-dataset.js: the schema of DESIGN's demo dataset and deterministic content.
"use strict";

const test = require("node:test");
const assert = require("node:assert/strict");
const fs = require("node:fs");
const path = require("node:path");
const { spawnSync } = require("node:child_process");
const h = require("../harness.js");

process.env.LANCEDB_LOG = process.env.LANCEDB_LOG || "error";
const lancedb = require("@lancedb/lancedb");

async function rows(parent, name) {
  const db = await lancedb.connect(parent);
  const t = await db.openTable(name);
  const a = await t.toArrow();
  t.close();
  return { schema: a.schema.fields.map((f) => `${f.name}:${f.type}:${f.nullable}`), rows: a.toArray().map((r) => JSON.stringify(r.toJSON())) };
}

test("make-dataset: id int32, vector fixed_size_list<float32>[dim], text utf8; same seed, same bytes", async () => {
  const root = h.tmpDir("lm-make-dataset-");
  try {
    const a = h.makeDataset(path.join(root, "a"), "items", { rows: 300, dim: 8 });
    h.makeDataset(path.join(root, "b"), "items", { rows: 300, dim: 8 });
    assert.deepEqual(a, { uri: path.join(root, "a", "items.lance"), version: 1, rows: 300, dim: 8 });
    const ra = await rows(path.join(root, "a"), "items");
    const rb = await rows(path.join(root, "b"), "items");
    assert.deepEqual(ra.schema, ["id:Int32:false", "vector:FixedSizeList[8]<Float32>:false", "text:Utf8:true"]);
    assert.equal(ra.rows.length, 300);
    assert.deepEqual(ra.rows, rb.rows);
    const other = spawnSync(process.execPath, [path.join(h.DIR, "make-dataset.js"), path.join(root, "c"), "items", "--rows", "300", "--dim", "8", "--seed", "7"]);
    assert.equal(other.status, 0, String(other.stderr));
    assert.notDeepEqual((await rows(path.join(root, "c"), "items")).rows, ra.rows);
    // It refuses to overwrite unless told to, and rejects bad arguments.
    const again = spawnSync(process.execPath, [path.join(h.DIR, "make-dataset.js"), path.join(root, "a"), "items", "--rows", "10", "--dim", "8"]);
    assert.equal(again.status, 1);
    const bad = spawnSync(process.execPath, [path.join(h.DIR, "make-dataset.js"), path.join(root, "a"), "it ems"]);
    assert.equal(bad.status, 2);
  } finally {
    fs.rmSync(root, { recursive: true, force: true });
  }
});

test("make-dataset --extra: adds labels list<utf8> and bits fixed_size_list<uint8>[8]; the first three columns keep their values", async () => {
  const root = h.tmpDir("lm-make-dataset-extra-");
  try {
    h.makeDataset(path.join(root, "a"), "items", { rows: 300, dim: 8 });
    h.makeDataset(path.join(root, "b"), "items", { rows: 300, dim: 8, extra: true });
    h.makeDataset(path.join(root, "c"), "items", { rows: 300, dim: 8, extra: true });
    const plain = await rows(path.join(root, "a"), "items");
    const extra = await rows(path.join(root, "b"), "items");
    assert.deepEqual(extra.schema, ["id:Int32:false", "vector:FixedSizeList[8]<Float32>:false", "text:Utf8:true",
      "labels:List<Utf8>:true", "bits:FixedSizeList[8]<Uint8>:false"]);
    assert.deepEqual(extra.rows, (await rows(path.join(root, "c"), "items")).rows);
    for (let i = 0; i < plain.rows.length; i++) {
      const p = JSON.parse(plain.rows[i]);
      const e = JSON.parse(extra.rows[i]);
      assert.deepEqual({ id: e.id, vector: e.vector, text: e.text }, p);
      assert.ok(e.labels.length >= 1 && e.labels.length <= 3);
      assert.equal(e.bits.length, 8);
    }
  } finally {
    fs.rmSync(root, { recursive: true, force: true });
  }
});

test("make-dataset --append: one new version of the dataset's own shape, ids going on, deterministic", async () => {
  const root = h.tmpDir("lm-make-dataset-append-");
  const md = path.join(h.DIR, "make-dataset.js");
  try {
    for (const d of ["a", "b"]) {
      h.makeDataset(path.join(root, d), "items", { rows: 200, dim: 8, extra: true });
      const r = spawnSync(process.execPath, [md, path.join(root, d), "items", "--append", "--rows", "50"]);
      assert.equal(r.status, 0, String(r.stderr));
      assert.deepEqual(JSON.parse(String(r.stdout)), { uri: path.join(root, d, "items.lance"), version: 2, rows: 250, dim: 8, appended: 50 });
    }
    const a = await rows(path.join(root, "a"), "items");
    assert.equal(a.rows.length, 250);
    assert.deepEqual(a.rows, (await rows(path.join(root, "b"), "items")).rows);
    assert.deepEqual(a.rows.map((r) => JSON.parse(r).id), [...Array(250).keys()]);
    const missing = spawnSync(process.execPath, [md, path.join(root, "none"), "items", "--append", "--rows", "5"]);
    assert.equal(missing.status, 1);
  } finally {
    fs.rmSync(root, { recursive: true, force: true });
  }
});
