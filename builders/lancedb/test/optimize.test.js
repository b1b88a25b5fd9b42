// End-to-end tests of OPTIMIZE mode: the real builder on a small dataset
// (2,000 rows x 16 dims with --extra) carrying one index of several kinds,
// before and after appends made through LanceDB. Tests run in order.
"use strict";

const test = require("node:test");
const assert = require("node:assert/strict");
const fs = require("node:fs");
const path = require("node:path");
const h = require("../harness.js");

process.env.LANCEDB_LOG = process.env.LANCEDB_LOG || "error";
const lancedb = require("@lancedb/lancedb");

const root = h.tmpDir("lm-optimize-");
const uri = path.join(root, "items.lance");
const N = 100; // rows per append
const INDEXES = ["v_pq", "v_hsq", "i_btree", "t_fts", "t_fm", "l_list"];

async function openTable() {
  const db = await lancedb.connect(root);
  return db.openTable("items");
}

async function headVersion() {
  const t = await openTable();
  try {
    return await t.version();
  } finally {
    t.close();
  }
}

const optimizeReq = (extra) => h.buildReq(uri, { mutation_type: "OPTIMIZE", admitted_dataset_version: 1, ...extra });

test.before(async () => {
  h.makeDataset(root, "items", { rows: 2000, dim: 16, extra: true });
  const t = await openTable();
  const { Index } = lancedb;
  await t.createIndex("vector", { name: "v_pq", config: Index.ivfPq({ numPartitions: 2, numSubVectors: 2, numBits: 4 }) });
  await t.createIndex("vector", { name: "v_hsq", config: Index.hnswSq({ numPartitions: 1, m: 6, efConstruction: 20 }) });
  await t.createIndex("id", { name: "i_btree", config: Index.btree() });
  await t.createIndex("text", { name: "t_fts", config: Index.fts() });
  await t.createIndex("text", { name: "t_fm", config: Index.fm() });
  await t.createIndex("labels", { name: "l_list", config: Index.labelList() });
  t.close();
});

test.after(() => fs.rmSync(root, { recursive: true, force: true }));

test("OPTIMIZE: request problems are typed and touch nothing", async () => {
  const v = await headVersion();
  for (const [extra, code] of [
    [{ index_name: "v_pq" }, "NATIVE_INVALID_ARGUMENT"],
    [{ column_name: "vector" }, "NATIVE_INVALID_ARGUMENT"],
    [{ index_type: "IVF_PQ" }, "NATIVE_INVALID_ARGUMENT"],
    [{ properties_json: "{}" }, "NATIVE_INVALID_ARGUMENT"],
    [{ admitted_dataset_version: 0 }, "NATIVE_INVALID_ARGUMENT"],
    [{ admitted_dataset_version: v + 3 }, "PRE_INVOCATION_STALE_ADMISSION"],
  ]) {
    const r = (await h.run(optimizeReq(extra))).result;
    assert.equal(r.result_code, code, `${JSON.stringify(extra)}: ${r.message}`);
    assert.equal(r.optimized_indexes, undefined);
  }
  assert.equal(await headVersion(), v);
});

test("OPTIMIZE with nothing unindexed: NATIVE_OK, every index current", async () => {
  const v = await headVersion();
  const r = (await h.run(optimizeReq())).result;
  assert.equal(r.result_code, "NATIVE_OK", r.message);
  assert.ok(r.new_dataset_version >= v);
  assert.equal(r.dataset_version, r.new_dataset_version);
  if (r.new_dataset_version === v) assert.match(r.message, /nothing to optimize/);
  assert.deepEqual(r.optimized_indexes.map((o) => o.name), [...INDEXES].sort());
  for (const o of r.optimized_indexes) assert.equal(o.after.unindexed_rows, 0, o.name);
});

test("OPTIMIZE after 3 appends: NATIVE_OK, none unindexed after, no version pruned", async () => {
  const t = await openTable();
  const rows = (await t.query().limit(N).toArray()).map((r) => {
    const o = r.toJSON();
    return { ...o, vector: Array.from(o.vector), bits: Array.from(o.bits), labels: Array.from(o.labels) };
  });
  for (let i = 0; i < 3; i++) await t.add(rows);
  const v = await t.version();
  const versionsBefore = (await t.listVersions()).map((x) => x.version);
  t.close();

  const r = await h.run(optimizeReq());
  const res = r.result;
  assert.equal(res.result_code, "NATIVE_OK", res.message);
  assert.ok(res.new_dataset_version > v, `version ${res.new_dataset_version} after ${v}`);
  assert.equal(res.dataset_version, res.new_dataset_version);
  assert.match(res.message, /^optimized: /);
  assert.match(r.stderr, /lancemaster-progress \{"phase":"optimizing"\}/);
  assert.deepEqual(res.optimized_indexes.map((o) => o.name), [...INDEXES].sort());
  for (const o of res.optimized_indexes) {
    assert.equal(o.before.unindexed_rows, 3 * N, o.name);
    assert.equal(o.before.indexed_rows, 2000, o.name);
    assert.equal(o.after.unindexed_rows, 0, o.name);
    assert.equal(o.after.indexed_rows, 2000 + 3 * N, o.name);
    assert.match(o.before.index_uuid, /^[0-9a-f-]{36}$/);
    assert.ok(Number.isInteger(o.after.segments) && o.after.segments >= 1, o.name);
  }

  // Never pruned: every version there before is still listed and opens.
  const t2 = await openTable();
  try {
    const after = (await t2.listVersions()).map((x) => x.version);
    for (const old of versionsBefore) assert.ok(after.includes(old), `version ${old} was pruned`);
    await t2.checkout(1);
    assert.equal(await t2.countRows(), 2000);
    await t2.checkoutLatest();
    for (const ix of await t2.listIndices()) assert.equal(ix.numUnindexedRows, 0, ix.name);
  } finally {
    t2.close();
  }
});

test("OPTIMIZE whose index merge runs out of Lance's memory pool after compacting: NATIVE_IO, the evidence in the message", async () => {
  const dir = h.tmpDir("lm-optimize-pool-");
  try {
    h.makeDataset(dir, "small", { rows: 2000, dim: 16 });
    const db = await lancedb.connect(dir);
    const t = await db.openTable("small");
    await t.createIndex("text", { name: "b", config: lancedb.Index.btree() });
    const rows = (await t.query().limit(N).toArray()).map((r) => ({ ...r.toJSON(), vector: Array.from(r.toJSON().vector) }));
    for (let i = 0; i < 3; i++) await t.add(rows);
    const v = await t.version();
    t.close();
    const r = (await h.run(h.buildReq(path.join(dir, "small.lance"), { mutation_type: "OPTIMIZE", admitted_dataset_version: 1 }),
      { env: { LANCE_MEM_POOL_SIZE: "1024" } })).result;
    // The compaction committed; the merge into the BTREE did not: not RESOURCE_REJECTED, whose claim is "unchanged".
    assert.equal(r.result_code, "NATIVE_IO", r.message);
    assert.equal(r.external_metadata_advanced, true);
    assert.match(r.message, new RegExp(`^version ${v} to \\d+, but "b" has ${3 * N} unindexed rows; optimize\\(\\) failed: .*Resources exhausted`));
    assert.deepEqual(r.optimized_indexes.map((o) => [o.name, o.before.unindexed_rows, o.after.unindexed_rows]), [["b", 3 * N, 3 * N]]);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
