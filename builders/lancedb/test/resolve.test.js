// Resolve mode and verified commits against a real small dataset: builds run
// through builder.js, then resolve reads the versions after the admitted one.
// Tests in this file run in order and share one dataset.
"use strict";

const test = require("node:test");
const assert = require("node:assert/strict");
const fs = require("node:fs");
const path = require("node:path");
const h = require("../harness.js");

const root = h.tmpDir("lm-resolve-");
const uri = path.join(root, "items.lance");
const RANDOM = "0badc0de-0000-4000-8000-000000000000";
const CANARY = "CANARY-resolve-5e1f-do-not-print";
let fields;
const u = {}; // uuids by step

const contractOf = (name) => h.contract(fields.find((f) => f.name === name));
const build = async (req, opts) => {
  const r = await h.run(h.buildReq(uri, req), opts);
  assert.equal(r.result.result_code, "NATIVE_OK", r.result.message);
  return r;
};
const resolve = async (req, u2 = uri) => (await h.run({ protocol: 1, mode: "resolve", dataset_uri: u2, ...req })).result;
const progressUuids = (stderr) => [...stderr.matchAll(/^lancemaster-progress (\{.*\})$/gm)]
  .map((m) => JSON.parse(m[1]).index_uuid).filter(Boolean);

test.before(async () => {
  h.makeDataset(root, "items", { rows: 2000, dim: 16 });
  fields = (await h.run(h.inspectReq(uri))).result.fields;
});

test.after(() => fs.rmSync(root, { recursive: true, force: true }));

// The builder's own uuid watch is best effort (a build too quick to be seen
// with a file open announces nothing: test/walk.test.js tests the watch
// itself); what it announces must be the verified uuid.
function assertAnnounced(r) {
  const got = progressUuids(r.stderr);
  assert.ok(got.length <= 1 && got.every((x) => x === r.result.index_uuid), `announced ${got}, verified ${r.result.index_uuid}`);
}

test("build: a verified BTREE CREATE carries its uuid and version; the watch announced no other uuid", async () => {
  const r = await build({ mutation_type: "CREATE", index_name: "id_btree", column_name: "id", index_type: "BTREE",
    admitted_dataset_version: 1, schema_contract_json: contractOf("id") });
  assert.equal(r.result.dataset_version, 2);
  assert.equal(r.result.new_dataset_version, 2);
  assert.match(r.result.index_uuid, /^[0-9a-f-]{36}$/);
  assert.match(r.result.message, /verified at version 2/);
  assertAnnounced(r);
  assert.match(r.stderr, /^lancemaster-progress \{"phase":"building"\}$/m);
  assert.match(r.stderr, /^lancemaster-progress \{"phase":"verifying"\}$/m);
  u.btree = r.result.index_uuid;
  const ins = (await h.run(h.inspectReq(uri))).result;
  const st = ins.index_stats.find((s) => s.name === "id_btree");
  assert.equal(st.index_uuid, u.btree);
  assert.equal(st.indexed_rows, 2000);
  assert.equal(st.unindexed_rows, 0);
  assert.equal(st.segments, 1);
  assert.ok(st.size_bytes > 0);
  assert.ok(Math.abs(st.created_at_ms - Date.now()) < 10 * 60 * 1000, `created_at_ms ${st.created_at_ms}`);
});

test("build: IVF_PQ with LANCEDB_LOG set: Lance's build_vector_index uuid is the verified index_uuid", async () => {
  const r = await build({ mutation_type: "CREATE", index_name: "vec", column_name: "vector", index_type: "IVF_PQ",
    properties_json: '{"num_bits":4,"num_partitions":2,"num_sub_vectors":2}', admitted_dataset_version: 2,
    schema_contract_json: contractOf("vector") }, { env: { LANCEDB_LOG: "error,lance::index::vector=debug" } });
  const m = /build_vector_index; column="vector" name="vec" uuid=([0-9a-f-]{36})/.exec(r.stderr);
  assert.ok(m, "Lance logged no build_vector_index line");
  assert.equal(m[1], r.result.index_uuid);
  assert.deepEqual(progressUuids(r.stderr), [], "the builder does not watch when Lance announces");
  assert.equal(r.result.dataset_version, 3);
  u.vec = r.result.index_uuid;
});

test("build: IVF_PQ without the Lance log: the watch announces no other uuid", async () => {
  const r = await build({ mutation_type: "CREATE", index_name: "vec2", column_name: "vector", index_type: "IVF_PQ",
    properties_json: '{"num_bits":4,"num_partitions":2,"num_sub_vectors":2}', admitted_dataset_version: 3,
    schema_contract_json: contractOf("vector") }, { env: { LANCEDB_LOG: "error" } });
  assertAnnounced(r);
  assert.equal(r.result.dataset_version, 4);
});

test("resolve CREATE: COMMITTED by this invocation's uuid; NOT_COMMITTED when contiguous and not ours; UNKNOWN without a uuid", async () => {
  let r = await resolve({ mutation_type: "CREATE", index_name: "id_btree", admitted_dataset_version: 1, index_uuid: u.btree });
  assert.equal(r.ok, true);
  assert.equal(r.mode, "resolve");
  assert.equal(r.outcome, "COMMITTED", r.evidence);
  assert.equal(r.index_uuid, u.btree);
  assert.equal(r.head_version, 4);
  assert.match(r.evidence, /version 2 lists "id_btree"/);
  r = await resolve({ mutation_type: "CREATE", index_name: "id_btree", admitted_dataset_version: 1, index_uuid: RANDOM });
  assert.equal(r.outcome, "NOT_COMMITTED", r.evidence);
  assert.equal(r.index_uuid, undefined);
  r = await resolve({ mutation_type: "CREATE", index_name: "never_built", admitted_dataset_version: 1 });
  assert.equal(r.outcome, "NOT_COMMITTED", r.evidence);
  assert.match(r.evidence, /read versions 2\.\.4 \(all retained\)/);
  r = await resolve({ mutation_type: "CREATE", index_name: "id_btree", admitted_dataset_version: 1 });
  assert.equal(r.outcome, "UNKNOWN", r.evidence);
  // Case-insensitive, as the build resolves names.
  r = await resolve({ mutation_type: "CREATE", index_name: "ID_BTREE", admitted_dataset_version: 1, index_uuid: u.btree.toUpperCase() });
  assert.equal(r.outcome, "COMMITTED", r.evidence);
});

test("resolve REPLACE: COMMITTED by the new uuid; NOT_COMMITTED when N keeps the admitted uuid; UNKNOWN on another change", async () => {
  const r0 = await build({ mutation_type: "REPLACE", index_name: "id_btree", column_name: "id", index_type: "BTREE",
    admitted_dataset_version: 4, schema_contract_json: contractOf("id") });
  assert.equal(r0.result.dataset_version, 5);
  assert.notEqual(r0.result.index_uuid, u.btree);
  u.btree2 = r0.result.index_uuid;
  let r = await resolve({ mutation_type: "REPLACE", index_name: "id_btree", admitted_dataset_version: 4,
    index_uuid: u.btree2, admitted_index_uuid: u.btree });
  assert.equal(r.outcome, "COMMITTED", r.evidence);
  assert.equal(r.index_uuid, u.btree2);
  r = await resolve({ mutation_type: "REPLACE", index_name: "id_btree", admitted_dataset_version: 4, admitted_index_uuid: u.btree });
  assert.equal(r.outcome, "UNKNOWN", r.evidence);
  r = await resolve({ mutation_type: "REPLACE", index_name: "id_btree", admitted_dataset_version: 4, index_uuid: RANDOM,
    admitted_index_uuid: u.btree });
  assert.equal(r.outcome, "UNKNOWN", r.evidence);
  // vec was not replaced after version 3: it keeps its uuid.
  r = await resolve({ mutation_type: "REPLACE", index_name: "vec", admitted_dataset_version: 3, index_uuid: RANDOM, admitted_index_uuid: u.vec });
  assert.equal(r.outcome, "NOT_COMMITTED", r.evidence);
  assert.match(r.evidence, /keeps uuid/);
  // An admitted uuid that the admitted version does not show.
  r = await resolve({ mutation_type: "REPLACE", index_name: "vec", admitted_dataset_version: 3, admitted_index_uuid: RANDOM });
  assert.equal(r.outcome, "UNKNOWN", r.evidence);
});

test("resolve DROP: COMMITTED only with trust_exclusive_writer; NOT_COMMITTED when N stays; UNKNOWN otherwise", async () => {
  const r0 = await build({ mutation_type: "DROP", index_name: "vec2", admitted_dataset_version: 5 });
  assert.equal(r0.result.dataset_version, 6);
  assert.equal(r0.result.index_uuid, undefined);
  let r = await resolve({ mutation_type: "DROP", index_name: "vec2", admitted_dataset_version: 5, trust_exclusive_writer: true });
  assert.equal(r.outcome, "COMMITTED", r.evidence);
  r = await resolve({ mutation_type: "DROP", index_name: "vec2", admitted_dataset_version: 5 });
  assert.equal(r.outcome, "UNKNOWN", r.evidence);
  r = await resolve({ mutation_type: "DROP", index_name: "vec", admitted_dataset_version: 3, trust_exclusive_writer: true });
  assert.equal(r.outcome, "NOT_COMMITTED", r.evidence);
  assert.equal(r.head_version, 6);
});

test("resolve after pruning (optimize with cleanup): UNKNOWN for the pruned versions; a uuid still proves COMMITTED", async () => {
  process.env.LANCEDB_LOG = process.env.LANCEDB_LOG || "error";
  const lancedb = require("@lancedb/lancedb");
  const db = await lancedb.connect(root);
  const tbl = await db.openTable("items");
  const st = await tbl.optimize({ cleanupOlderThan: new Date(Date.now() + 1000), deleteUnverified: true });
  assert.ok(st.prune.oldVersionsRemoved > 0, JSON.stringify(st));
  const kept = (await tbl.listVersions()).map((v) => v.version);
  const indexes = await tbl.listIndices();
  tbl.close();
  assert.ok(!kept.includes(2), `versions kept: ${kept}`);
  let r = await resolve({ mutation_type: "CREATE", index_name: "never_built", admitted_dataset_version: 1 });
  assert.equal(r.outcome, "UNKNOWN", r.evidence);
  assert.match(r.evidence, /not retained \(pruned\)/);
  r = await resolve({ mutation_type: "DROP", index_name: "vec", admitted_dataset_version: 3 });
  assert.equal(r.outcome, "UNKNOWN", r.evidence);
  r = await resolve({ mutation_type: "REPLACE", index_name: "id_btree", admitted_dataset_version: 4, admitted_index_uuid: u.btree });
  assert.equal(r.outcome, "UNKNOWN", r.evidence);
  // The replaced BTREE keeps its uuid through optimize, so a retained version still shows it.
  const now = indexes.find((i) => i.name === "id_btree").indexUuid;
  r = await resolve({ mutation_type: "REPLACE", index_name: "id_btree", admitted_dataset_version: 4, index_uuid: now });
  assert.equal(r.outcome, "COMMITTED", r.evidence);
});

test("resolve: request and dataset errors are typed; storage option values never leak", async () => {
  const so = { aws_secret_access_key: CANARY };
  let r = await h.run({ protocol: 1, mode: "resolve", dataset_uri: path.join(root, `${CANARY}.lance`), storage_options: so,
    mutation_type: "CREATE", index_name: "x", admitted_dataset_version: 1 });
  assert.equal(r.result.ok, false);
  assert.equal(r.result.error_code, "NOT_FOUND");
  assert.ok(!r.stdout.toString().includes(CANARY) && !r.stderr.includes(CANARY));
  for (const bad of [{ mutation_type: "ALTER" }, { index_name: "" }, { admitted_dataset_version: 0 }, { index_uuid: "zz" },
    { admitted_index_uuid: 7 }, { trust_exclusive_writer: "yes" }, { storage_options: { k: 1 } }]) {
    const res = await resolve({ mutation_type: "CREATE", index_name: "x", admitted_dataset_version: 1, ...bad });
    assert.equal(res.ok, false, JSON.stringify(bad));
    assert.equal(res.error_code, "INVALID_ARGUMENT", JSON.stringify(bad));
  }
  r = await h.run({ protocol: 1, mode: "resolve", dataset_uri: "s3://u:pw@b/items.lance", mutation_type: "CREATE",
    index_name: "x", admitted_dataset_version: 1 });
  assert.equal(r.result.error_code, "INVALID_ARGUMENT");
  assert.ok(!r.result.message.includes("pw@"));
});
