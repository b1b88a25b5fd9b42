// End-to-end tests of the index types beyond IVF_PQ/BTREE/BITMAP: every
// type CREATE → REPLACE → DROP through the real builder on a small dataset
// (2,000 rows x 16 dims, with make-dataset's --extra columns and a
// large_list column), what inspect reports, and the rejections the worker
// makes itself before Lance sees a request. Tests run in order and share
// the dataset.
"use strict";

const test = require("node:test");
const assert = require("node:assert/strict");
const fs = require("node:fs");
const path = require("node:path");
const h = require("../harness.js");
const ev = require("../evidence.js");

const root = h.tmpDir("lm-types-");
const uri = path.join(root, "items.lance");
let fields;
let version = 1;

const contractOf = (name) => h.contract(fields.find((f) => f.name === name));
const inspect = async () => (await h.run(h.inspectReq(uri))).result;

// [index name, type, column, properties, what inspect echoes]
const CASES = [
  ["v_pq", "IVF_PQ", "vector", { metric: "l2", num_partitions: 2, num_sub_vectors: 2, num_bits: 4, max_iterations: 5, sample_rate: 64 },
    '{"metric":"l2","num_bits":4,"num_sub_vectors":2}'],
  ["v_flat", "IVF_FLAT", "vector", { metric: "cosine", num_partitions: 2, max_iterations: 5, sample_rate: 64 }, '{"metric":"cosine"}'],
  ["b_flat", "IVF_FLAT", "bits", { metric: "hamming", num_partitions: 2 }, '{"metric":"hamming"}'],
  ["v_rq", "IVF_RQ", "vector", { metric: "dot", num_partitions: 2, num_bits: 1 }, '{"metric":"dot","num_bits":1}'],
  ["v_hsq", "IVF_HNSW_SQ", "vector", { num_partitions: 1, m: 8, ef_construction: 40 }, '{"ef_construction":40,"m":8,"metric":"l2"}'],
  ["v_hpq", "IVF_HNSW_PQ", "vector", { metric: "cosine", num_partitions: 1, num_sub_vectors: 2, m: 6, ef_construction: 30, max_iterations: 5 },
    '{"ef_construction":30,"m":6,"metric":"cosine","num_sub_vectors":2}'],
  ["l_list", "LABEL_LIST", "labels", {}, ""],
  ["l_large", "LABEL_LIST", "tags", {}, ""],
  ["t_fts", "FTS", "text", { base_tokenizer: "whitespace", language: "english", stem: "false", with_position: true, lower_case: true,
    max_token_length: 30, remove_stop_words: false, ascii_folding: false },
  '{"ascii_folding":false,"base_tokenizer":"whitespace","language":"English","lower_case":true,"max_token_length":30,' +
    '"ngram_max_length":3,"ngram_min_length":3,"prefix_only":false,"remove_stop_words":false,"stem":false,"with_position":true}'],
  ["t_fm", "FM", "text", {}, ""],
];

async function build(mutation, [name, type, column, props], extra, opts) {
  const r = await h.run(h.buildReq(uri, {
    mutation_type: mutation, index_name: name, column_name: column, index_type: type,
    properties_json: Object.keys(props).length ? JSON.stringify(props) : "",
    admitted_dataset_version: version, schema_contract_json: contractOf(column), ...extra,
  }), opts);
  return r;
}

// progressUuids: the uuids the builder announced on stderr.
function progressUuids(stderr) {
  return stderr.split("\n").filter((l) => l.startsWith(ev.PROGRESS_PREFIX))
    .map((l) => JSON.parse(l.slice(ev.PROGRESS_PREFIX.length)).index_uuid).filter(Boolean);
}

test.before(async () => {
  const made = h.makeDataset(root, "items", { rows: 2000, dim: 16, extra: true });
  assert.equal(made.version, 1);
  // A large_list column: Arrow JS cannot make one, Lance's SQL can.
  process.env.LANCEDB_LOG = process.env.LANCEDB_LOG || "error";
  const lancedb = require("@lancedb/lancedb");
  const db = await lancedb.connect(root);
  const t = await db.openTable("items");
  await t.addColumns([{ name: "tags", valueSql: "arrow_cast(make_array(id % 7, id % 3), 'LargeList(Int64)')" }]);
  version = await t.version();
  t.close();
});

test.after(() => fs.rmSync(root, { recursive: true, force: true }));

test("inspect: list and large_list fields carry element_type and element_nullable, no list_dimension", async () => {
  const r = await inspect();
  assert.equal(r.ok, true, r.message);
  fields = r.fields;
  assert.deepEqual(r.fields.slice(3), [
    { field_id: 3, name: "labels", data_type: "list", nullable: true, element_type: "utf8", element_nullable: true },
    { field_id: 4, name: "bits", data_type: "fixed_size_list", nullable: false, list_dimension: 8, element_type: "uint8", element_nullable: true },
    { field_id: 5, name: "tags", data_type: "large_list", nullable: true, element_type: "int64", element_nullable: true },
  ]);
  // The columns of the plain dataset are reported as they always were.
  assert.deepEqual(r.fields.slice(0, 3).map((f) => f.data_type), ["int32", "fixed_size_list", "utf8"]);
});

test("every type: CREATE is NATIVE_OK with a uuid; inspect reports the canonical type and the echoed properties", async () => {
  const uuids = new Map();
  for (const c of CASES) {
    const r = await build("CREATE", c);
    assert.equal(r.result.result_code, "NATIVE_OK", `${c[0]}: ${r.result.message}`);
    assert.equal(r.result.new_dataset_version, version + 1, c[0]);
    assert.ok(ev.isUuid(r.result.index_uuid), c[0]);
    for (const u of progressUuids(r.stderr)) assert.equal(u, r.result.index_uuid, `${c[0]}: an announced uuid is the committed one`);
    version++;
    uuids.set(c[0], r.result.index_uuid);
  }
  const ins = await inspect();
  assert.equal(ins.dataset_version, version);
  for (const [name, type, column, , echoed] of CASES) {
    const ix = ins.indexes.find((i) => i.name === name);
    assert.deepEqual(ix, { name, index_type: type, columns: [column], properties_json: echoed }, name);
    assert.equal(ins.index_stats.find((s) => s.name === name).index_uuid, uuids.get(name), name);
  }
  test.uuids = uuids;
});

test("every type: REPLACE gives a new uuid; DROP leaves it absent", async () => {
  for (const c of CASES) {
    const r = await build("REPLACE", c);
    assert.equal(r.result.result_code, "NATIVE_OK", `${c[0]}: ${r.result.message}`);
    assert.ok(ev.isUuid(r.result.index_uuid), c[0]);
    assert.notEqual(r.result.index_uuid, test.uuids.get(c[0]), `${c[0]}: REPLACE gives a new uuid`);
    assert.match(r.result.message, /^replaced /);
    version++;
  }
  for (const [name] of CASES) {
    const r = (await h.run(h.buildReq(uri, { mutation_type: "DROP", index_name: name, admitted_dataset_version: version }))).result;
    assert.equal(r.result_code, "NATIVE_OK", `${name}: ${r.message}`);
    assert.equal(r.new_dataset_version, version + 1);
    version++;
  }
  const ins = await inspect();
  assert.equal(ins.dataset_version, version);
  assert.deepEqual(ins.indexes, []);
});

test("rejections: wrong column type, bad parameter, unsupported type; the dataset is unchanged", async () => {
  const cases = [
    // wrong column types (Lance would panic on hamming over floats)
    [["x", "LABEL_LIST", "text", {}], "NATIVE_INVALID_ARGUMENT", /LABEL_LIST needs a list or large_list/],
    [["x", "FM", "labels", {}], "NATIVE_INVALID_ARGUMENT", /FM needs a utf8/],
    [["x", "IVF_FLAT", "vector", { metric: "hamming" }], "NATIVE_INVALID_ARGUMENT", /uint8 for metric hamming/],
    [["x", "IVF_FLAT", "bits", {}], "NATIVE_INVALID_ARGUMENT", /metric hamming on a fixed_size_list of uint8/],
    [["x", "BTREE", "tags", {}], "NATIVE_INVALID_ARGUMENT", /scalar column/],
    // bad parameters (a bad FTS language aborts the process inside the library)
    [["x", "FTS", "text", { language: "Klingon", stem: true }], "NATIVE_INVALID_ARGUMENT", /language must be one of/],
    [["x", "IVF_HNSW_PQ", "vector", { num_bits: 8 }], "NATIVE_INVALID_ARGUMENT", /does not take property "num_bits"/],
    // types this backend's library does not build (all six: test/indextypes.test.js)
    [["x", "IVF_SQ", "vector", {}], "NATIVE_NOT_SUPPORTED", /not supported by this backend's library/],
    [["x", "INVERTED", "text", {}], "NATIVE_NOT_SUPPORTED", /use FTS/],
  ];
  for (const [c, code, re] of cases) {
    const r = (await build("CREATE", c)).result;
    assert.equal(r.result_code, code, `${c[1]} on ${c[2]}: ${r.message}`);
    assert.match(r.message, re, `${c[1]} on ${c[2]}`);
    assert.equal(r.leftover_index_uuid, undefined);
  }
  assert.equal((await inspect()).dataset_version, version);
});

test("Lance's memory pool refusing the sort (LANCE_MEM_POOL_SIZE) is PRE_INVOCATION_RESOURCE_REJECTED, the dataset unchanged", async () => {
  const r = (await build("CREATE", ["i_btree", "BTREE", "text", {}], {}, { env: { LANCE_MEM_POOL_SIZE: "1024" } })).result;
  assert.equal(r.result_code, "PRE_INVOCATION_RESOURCE_REJECTED", r.message);
  assert.match(r.message, /Not enough memory to continue external sort/);
  assert.equal(r.external_metadata_advanced, undefined);
  const ins = await inspect();
  assert.equal(ins.dataset_version, version);
  assert.ok(!ins.indexes.some((i) => i.name === "i_btree"));
});
