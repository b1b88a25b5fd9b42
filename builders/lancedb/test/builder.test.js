// End-to-end tests of builder.js: spawned as a child, spoken to over the
// frame protocol, against a small real dataset (2,000 rows x 16 dims).
// Tests in this file run in order and share one dataset whose version they track.
"use strict";

const test = require("node:test");
const assert = require("node:assert/strict");
const fs = require("node:fs");
const path = require("node:path");
const h = require("../harness.js");

const CANARY = "CANARY-7f3a9c-do-not-print";
const CANARY2 = "canary_second_value_42";

const root = h.tmpDir("lm-builder-");
const uri = path.join(root, "items.lance");
let fields; // from the first inspect
let version = 1; // the dataset version the tests expect

const contractOf = (name) => h.contract(fields.find((f) => f.name === name));
const inspect = async (u = uri, extra) => (await h.run(h.inspectReq(u, extra))).result;
const build = async (fieldsOfReq, opts) => (await h.run(h.buildReq(uri, fieldsOfReq), opts)).result;

function noCanary(r) {
  for (const s of [r.stdout.toString("utf8"), r.stderr]) {
    assert.ok(!s.includes(CANARY) && !s.includes(CANARY2), "a storage option value leaked");
  }
}

async function assertVersion(v) {
  const r = await inspect();
  assert.equal(r.ok, true);
  assert.equal(r.dataset_version, v);
  return r;
}

test.before(() => {
  const made = h.makeDataset(root, "items", { rows: 2000, dim: 16 });
  assert.equal(made.version, 1);
});

test.after(() => {
  fs.rmSync(root, { recursive: true, force: true });
});

test("inspect: version, canonical fields with position ids, no indexes", async () => {
  const r = await inspect();
  assert.equal(r.protocol, 1);
  assert.equal(r.mode, "inspect");
  assert.equal(r.ok, true);
  assert.equal(r.dataset_version, 1);
  assert.deepEqual(r.fields, [
    { field_id: 0, name: "id", data_type: "int32", nullable: false },
    { field_id: 1, name: "vector", data_type: "fixed_size_list", nullable: false, list_dimension: 16, element_type: "float32", element_nullable: true },
    { field_id: 2, name: "text", data_type: "utf8", nullable: true },
  ]);
  assert.deepEqual(r.indexes, []);
  fields = r.fields;
});

test("inspect: file:// URI and trailing slash open the same dataset", async () => {
  assert.equal((await inspect("file://" + uri)).dataset_version, 1);
  assert.equal((await inspect(uri + "/")).dataset_version, 1);
});

test("inspect: missing dataset is NOT_FOUND; bad URIs are INVALID_ARGUMENT and not echoed", async () => {
  const missing = await inspect(path.join(root, "nothere.lance"));
  assert.equal(missing.ok, false);
  assert.equal(missing.error_code, "NOT_FOUND");
  for (const bad of [path.join(root, "items"), "relative/items.lance", "db://x/items.lance", "http://h/items.lance",
    "s3://bucket/items.lance?X-Amz-Signature=SECRETSIG", "s3://user:pw@bucket/items.lance", "/data/bad name.lance", "/data/.lance"]) {
    const r = await inspect(bad);
    assert.equal(r.ok, false, bad);
    assert.equal(r.error_code, "INVALID_ARGUMENT", bad);
    assert.ok(!r.message.includes("SECRETSIG") && !r.message.includes("pw@"), r.message);
  }
});

test("build: BTREE CREATE is NATIVE_OK with version+1; inspect lists BTREE", async () => {
  const r = await build({ mutation_type: "CREATE", index_name: "id_btree", column_name: "id", index_type: "BTREE",
    admitted_dataset_version: version, schema_contract_json: contractOf("id") });
  assert.equal(r.result_code, "NATIVE_OK", r.message);
  assert.equal(r.new_dataset_version, version + 1);
  assert.equal(r.external_metadata_advanced, undefined);
  version++;
  const ins = await assertVersion(version);
  assert.deepEqual(ins.indexes, [{ name: "id_btree", index_type: "BTREE", columns: ["id"], properties_json: "" }]);
});

test("build: CREATE of an existing name (any case) is NATIVE_COMMIT_CONFLICT, nothing touched", async () => {
  for (const name of ["id_btree", "ID_BTree"]) {
    const r = await build({ mutation_type: "CREATE", index_name: name, column_name: "id", index_type: "BTREE",
      admitted_dataset_version: version, schema_contract_json: contractOf("id") });
    assert.equal(r.result_code, "NATIVE_COMMIT_CONFLICT", r.message);
  }
  await assertVersion(version);
});

test("build: IVF_PQ with tiny parameters is NATIVE_OK; inspect reads metric, bits, sub-vectors", async () => {
  const r = await build({ mutation_type: "CREATE", index_name: "vec_idx", column_name: "vector", index_type: "IVF_PQ",
    properties_json: JSON.stringify({ metric: "l2", num_bits: 4, num_partitions: 2, num_sub_vectors: 2 }),
    admitted_dataset_version: version, schema_contract_json: contractOf("vector") });
  assert.equal(r.result_code, "NATIVE_OK", r.message);
  assert.equal(r.new_dataset_version, version + 1);
  version++;
  const ins = await assertVersion(version);
  const vec = ins.indexes.find((i) => i.name === "vec_idx");
  assert.deepEqual(vec, { name: "vec_idx", index_type: "IVF_PQ", columns: ["vector"],
    properties_json: '{"metric":"l2","num_bits":4,"num_sub_vectors":2}' });
});

test("build: REPLACE rebuilds with the new definition; a case-variant name keeps the stored spelling", async () => {
  let r = await build({ mutation_type: "REPLACE", index_name: "VEC_IDX", column_name: "Vector", index_type: "IVF_PQ",
    properties_json: '{"metric":"cosine","num_bits":4,"num_partitions":2,"num_sub_vectors":4}',
    admitted_dataset_version: version, schema_contract_json: contractOf("vector") });
  assert.equal(r.result_code, "NATIVE_OK", r.message);
  assert.equal(r.new_dataset_version, version + 1);
  assert.match(r.message, /replaced IVF_PQ index "vec_idx"/);
  version++;
  const ins = await assertVersion(version);
  assert.deepEqual(ins.indexes.map((i) => i.name).sort(), ["id_btree", "vec_idx"]);
  assert.equal(ins.indexes.find((i) => i.name === "vec_idx").properties_json, '{"metric":"cosine","num_bits":4,"num_sub_vectors":4}');

  // REPLACE of a name that does not exist creates it; BITMAP on text.
  r = await build({ mutation_type: "REPLACE", index_name: "text_bitmap", column_name: "text", index_type: "BITMAP",
    admitted_dataset_version: version, schema_contract_json: contractOf("text") });
  assert.equal(r.result_code, "NATIVE_OK", r.message);
  version++;
  const ins2 = await assertVersion(version);
  assert.deepEqual(ins2.indexes.find((i) => i.name === "text_bitmap"),
    { name: "text_bitmap", index_type: "BITMAP", columns: ["text"], properties_json: "" });
});

test("build: REPLACE of an index on another column is NATIVE_INVALID_ARGUMENT before touching", async () => {
  const r = await build({ mutation_type: "REPLACE", index_name: "id_btree", column_name: "text", index_type: "BTREE",
    admitted_dataset_version: version, schema_contract_json: contractOf("text") });
  assert.equal(r.result_code, "NATIVE_INVALID_ARGUMENT", r.message);
  await assertVersion(version);
});

test("build: an admitted version the dataset never reached is PRE_INVOCATION_STALE_ADMISSION and the dataset is unchanged", async () => {
  const r = await build({ mutation_type: "CREATE", index_name: "id_btree2", column_name: "id", index_type: "BTREE",
    admitted_dataset_version: version + 5, schema_contract_json: contractOf("id") });
  assert.equal(r.result_code, "PRE_INVOCATION_STALE_ADMISSION", r.message);
  assert.equal(r.new_dataset_version, undefined);
  assert.equal(r.external_metadata_advanced, undefined);
  const d = await build({ mutation_type: "DROP", index_name: "id_btree", admitted_dataset_version: version + 5 });
  assert.equal(d.result_code, "PRE_INVOCATION_STALE_ADMISSION", d.message);
  const ins = await assertVersion(version);
  assert.ok(!ins.indexes.some((i) => i.name === "id_btree2"));
  assert.ok(ins.indexes.some((i) => i.name === "id_btree"));
});

test("build: schema contract mismatch is STALE; unknown contract version is UNSUPPORTED", async () => {
  const vec = fields.find((f) => f.name === "vector");
  const mismatches = [
    h.contract({ ...vec, list_dimension: 8 }),
    h.contract({ ...vec, field_id: 2 }),
    h.contract({ ...vec, element_type: "float16" }),
    h.contract({ ...vec, element_nullable: false }),
    h.contract({ ...vec, nullable: true }),
    h.contract({ ...vec, name: "vectors" }),
    JSON.stringify({ v: 1, fields: [{ id: 1, name: "vector", type: "fixed_size_list", nullable: false, dim: 16, elem: "float32", elem_nullable: true },
      { id: 0, name: "id", type: "int32", nullable: false }] }),
  ];
  for (const c of mismatches) {
    const r = await build({ mutation_type: "CREATE", index_name: "v2", column_name: "vector", index_type: "IVF_PQ",
      properties_json: '{"num_bits":4,"num_partitions":2,"num_sub_vectors":2}', admitted_dataset_version: version, schema_contract_json: c });
    assert.equal(r.result_code, "PRE_INVOCATION_STALE_ADMISSION", `${c}: ${r.message}`);
  }
  // A column the dataset does not have.
  const nocol = await build({ mutation_type: "CREATE", index_name: "x", column_name: "nocol", index_type: "BTREE",
    admitted_dataset_version: version, schema_contract_json: JSON.stringify({ v: 1, fields: [{ id: 3, name: "nocol", type: "int32", nullable: false }] }) });
  assert.equal(nocol.result_code, "PRE_INVOCATION_STALE_ADMISSION", nocol.message);

  for (const c of [JSON.stringify({ v: 2, fields: [] }), "", "not json", '{"fields":[]}',
    JSON.stringify({ v: 1, fields: [{ id: 0, name: "id", type: "int32", nullable: false, collation: "x" }] })]) {
    const r = await build({ mutation_type: "CREATE", index_name: "x", column_name: "id", index_type: "BTREE",
      admitted_dataset_version: version, schema_contract_json: c });
    assert.equal(r.result_code, "PRE_INVOCATION_UNSUPPORTED_SCHEMA_CONTRACT", `${c}: ${r.message}`);
  }
  await assertVersion(version);
});

test("build: Lance's own errors map to typed codes and leave the dataset unchanged", async () => {
  const base = { mutation_type: "CREATE", column_name: "vector", index_type: "IVF_PQ", admitted_dataset_version: version,
    schema_contract_json: contractOf("vector") };
  // num_sub_vectors must divide the dimension: Lance "Invalid user input".
  let r = await build({ ...base, index_name: "bad1", properties_json: '{"num_bits":4,"num_partitions":2,"num_sub_vectors":5}' });
  assert.equal(r.result_code, "NATIVE_INVALID_ARGUMENT", r.message);
  assert.match(r.message, /must divide/);
  assert.ok(!/\.rs:\d+/.test(r.message), "Rust source locations are stripped");
  assert.equal(r.external_metadata_advanced, undefined);
  // More partitions than rows: Lance "Unprocessable".
  r = await build({ ...base, index_name: "bad2", properties_json: '{"num_bits":4,"num_partitions":4000,"num_sub_vectors":2}' });
  assert.equal(r.result_code, "NATIVE_INVALID_ARGUMENT", r.message);
  // IVF_PQ on an int column: Lance "Schema Error".
  r = await build({ ...base, index_name: "bad3", column_name: "id", schema_contract_json: contractOf("id"),
    properties_json: '{"num_bits":4,"num_partitions":2}' });
  assert.equal(r.result_code, "NATIVE_INVALID_ARGUMENT", r.message);
  // BTREE on the vector column.
  r = await build({ ...base, index_name: "bad4", index_type: "BTREE", properties_json: "" });
  assert.equal(r.result_code, "NATIVE_INVALID_ARGUMENT", r.message);
  await assertVersion(version);
});

test("build: request problems are typed without touching the dataset", async () => {
  const base = { index_name: "x", column_name: "id", admitted_dataset_version: version, schema_contract_json: contractOf("id") };
  const cases = [
    [{ ...base, mutation_type: "CREATE", index_type: "HNSW" }, "NATIVE_NOT_SUPPORTED"],
    [{ ...base, mutation_type: "CREATE", index_type: "BTREE", properties_json: '{"metric":"l2"}' }, "NATIVE_INVALID_ARGUMENT"],
    [{ ...base, mutation_type: "CREATE", index_type: "IVF_PQ", properties_json: '{"nprobes":3}' }, "NATIVE_INVALID_ARGUMENT"],
    [{ ...base, mutation_type: "CREATE", index_type: "IVF_PQ", properties_json: '{"num_bits":5}' }, "NATIVE_INVALID_ARGUMENT"],
    [{ ...base, mutation_type: "CREATE", index_type: "BTREE", properties_json: "{not json" }, "NATIVE_INVALID_ARGUMENT"],
    [{ ...base, mutation_type: "ALTER", index_type: "BTREE" }, "NATIVE_INVALID_ARGUMENT"],
    [{ ...base, mutation_type: "CREATE", index_type: "BTREE", index_name: "" }, "NATIVE_INVALID_ARGUMENT"],
    [{ ...base, mutation_type: "CREATE", index_type: "BTREE", admitted_dataset_version: undefined }, "NATIVE_INVALID_ARGUMENT"],
    [{ ...base, mutation_type: "CREATE", index_type: "BTREE", storage_options: { k: 1 } }, "NATIVE_INVALID_ARGUMENT"],
  ];
  for (const [req, want] of cases) {
    const r = await build(req);
    assert.equal(r.result_code, want, `${JSON.stringify(req)}: ${r.message}`);
  }
  const r = (await h.run(h.buildReq(path.join(root, "items"), { ...base, mutation_type: "CREATE", index_type: "BTREE" }))).result;
  assert.equal(r.result_code, "NATIVE_INVALID_ARGUMENT", r.message);
  // A dataset deleted since admission: STALE (nothing can have committed).
  const gone = (await h.run(h.buildReq(path.join(root, "gone.lance"), { ...base, mutation_type: "CREATE", index_type: "BTREE" }))).result;
  assert.equal(gone.result_code, "PRE_INVOCATION_STALE_ADMISSION", gone.message);
  await assertVersion(version);
});

test("build: DROP is NATIVE_OK with version+1; DROP of a missing index is NATIVE_NOT_FOUND", async () => {
  let r = await build({ mutation_type: "DROP", index_name: "ID_BTREE", admitted_dataset_version: version });
  assert.equal(r.result_code, "NATIVE_OK", r.message);
  assert.equal(r.new_dataset_version, version + 1);
  version++;
  let ins = await assertVersion(version);
  assert.ok(!ins.indexes.some((i) => i.name === "id_btree"));
  r = await build({ mutation_type: "DROP", index_name: "id_btree", admitted_dataset_version: version });
  assert.equal(r.result_code, "NATIVE_NOT_FOUND", r.message);
  assert.equal(r.external_metadata_advanced, undefined);
  ins = await assertVersion(version);
});

test("storage option values never reach stdout or stderr", async () => {
  const so = { aws_secret_access_key: CANARY, aws_session_token: CANARY2, region: "us-east-1" };
  let r = await h.run(h.inspectReq(uri, { storage_options: so }));
  assert.equal(r.result.ok, true);
  noCanary(r);
  r = await h.run(h.inspectReq(path.join(root, `${CANARY}.lance`), { storage_options: so }));
  assert.equal(r.result.error_code, "NOT_FOUND");
  noCanary(r);
  r = await h.run(h.buildReq(uri, { mutation_type: "CREATE", index_name: CANARY2, column_name: "id", index_type: "BTREE",
    admitted_dataset_version: version + 7, schema_contract_json: contractOf("id"), storage_options: so }));
  assert.equal(r.result.result_code, "PRE_INVOCATION_STALE_ADMISSION");
  noCanary(r);
  r = await h.run(h.buildReq(uri, { mutation_type: "DROP", index_name: CANARY2, admitted_dataset_version: version, storage_options: so }));
  assert.equal(r.result.result_code, "NATIVE_NOT_FOUND");
  noCanary(r);
  // A refused frame: nothing on stdout, nothing leaked on stderr.
  r = await h.runRaw(h.frameOf({ protocol: 99, mode: "build", storage_options: so }));
  assert.equal(r.code, 2);
  noCanary(r);
  await assertVersion(version);
});

test("protocol: unusable request frames exit 2 with nothing on stdout", async () => {
  const huge = Buffer.alloc(4);
  huge.writeUInt32BE((1 << 20) + 1, 0);
  const cases = [
    ["oversized length prefix, stdin left open", huge, false],
    ["length prefix 0xFFFFFFFF", Buffer.from([0xff, 0xff, 0xff, 0xff]), true],
    ["zero-length frame", Buffer.alloc(4), true],
    ["short length prefix", Buffer.from([0, 0]), true],
    ["truncated body", Buffer.concat([Buffer.from([0, 0, 0, 100]), Buffer.from("{}")]), true],
    ["not JSON", h.frameOf("{nope"), true],
    ["not UTF-8", Buffer.concat([Buffer.from([0, 0, 0, 3]), Buffer.from([0xff, 0xfe, 0xfd])]), true],
    ["JSON array", h.frameOf("[1,2]"), true],
    ["wrong protocol", h.frameOf({ protocol: 2, mode: "inspect", dataset_uri: uri }), true],
    ["unknown mode", h.frameOf({ protocol: 1, mode: "explode", dataset_uri: uri }), true],
    ["empty stdin", Buffer.alloc(0), true],
  ];
  for (const [what, input, end] of cases) {
    const r = await h.runRaw(input, { endStdin: end, timeoutMs: 15000 });
    assert.equal(r.signal, null, `${what}: killed (hung?)`);
    assert.equal(r.code, 2, `${what}: exit ${r.code}; stderr ${r.stderr}`);
    assert.equal(r.stdout.length, 0, what);
    assert.match(r.stderr, /refusing the request frame/, what);
  }
});

test("protocol: one frame is answered without waiting for EOF; trailing bytes are ignored", async () => {
  const req = h.frameOf(h.inspectReq(uri));
  let r = await h.runRaw(req, { endStdin: false, timeoutMs: 15000 });
  assert.equal(r.code, 0, r.stderr);
  assert.equal(h.decodeResult(r.stdout).dataset_version, version);
  r = await h.runRaw(Buffer.concat([req, Buffer.from("garbage after the frame")]));
  assert.equal(r.code, 0, r.stderr);
  assert.equal(h.decodeResult(r.stdout).ok, true);
});

test("protocol: an inspect answer above 256 KiB becomes a typed INTERNAL failure frame", async () => {
  process.env.LANCEDB_LOG = process.env.LANCEDB_LOG || "error";
  const lancedb = require("@lancedb/lancedb");
  const arrow = require("apache-arrow");
  const cols = {};
  for (let i = 0; i < 2500; i++) cols[`column_with_a_rather_long_descriptive_name_number_${String(i).padStart(5, "0")}`] = arrow.makeVector(new Int8Array([1]));
  const db = await lancedb.connect(root);
  (await db.createTable("wide", new arrow.Table(cols), { mode: "create" })).close();
  const r = await h.run(h.inspectReq(path.join(root, "wide.lance")));
  assert.ok(r.stdout.length <= 4 + (256 << 10));
  assert.equal(r.result.ok, false);
  assert.equal(r.result.error_code, "INTERNAL");
  assert.match(r.result.message, /at most 262144/);
});

test("build: commits since admission do not make a job stale; the admitted version is re-opened", async () => {
  assert.ok(version > 1, "earlier tests advanced the dataset");
  const r = await build({ mutation_type: "CREATE", index_name: "text_late", column_name: "text", index_type: "BTREE",
    admitted_dataset_version: 1, schema_contract_json: contractOf("text") });
  assert.equal(r.result_code, "NATIVE_OK", r.message);
  assert.equal(r.new_dataset_version, version + 1);
  version = r.new_dataset_version;
  const ins = await assertVersion(version);
  assert.ok(ins.indexes.some((i) => i.name === "text_late"));
});
