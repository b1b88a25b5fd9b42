// Unit tests of indextypes.js: canonical properties → library options, the
// column each type takes, refused types, and what inspect echoes.
"use strict";

const test = require("node:test");
const assert = require("node:assert/strict");
const lib = require("../lib.js");
const types = require("../indextypes.js");

const opts = (t, json) => types.options(t, lib.parseProperties(json));
const vec = (elem) => ({ name: "v", data_type: "fixed_size_list", list_dimension: 8, element_type: elem, element_nullable: true });
const field = (data_type, element_type) => ({ name: "c", data_type, ...(element_type ? { element_type } : {}) });

test("indextypes: the ten types map canonical keys to the library's options", () => {
  assert.deepEqual(opts("IVF_PQ", '{"metric":"COSINE","num_partitions":"4","num_sub_vectors":2,"num_bits":"4","max_iterations":5,"sample_rate":64}').options,
    { distanceType: "cosine", numPartitions: 4, numSubVectors: 2, numBits: 4, maxIterations: 5, sampleRate: 64 });
  assert.deepEqual(opts("IVF_FLAT", '{"metric":"hamming","num_partitions":2,"max_iterations":3,"sample_rate":10}').options,
    { distanceType: "hamming", numPartitions: 2, maxIterations: 3, sampleRate: 10 });
  assert.deepEqual(opts("IVF_RQ", '{"metric":"dot","num_bits":1}').options, { distanceType: "dot", numBits: 1 });
  assert.deepEqual(opts("IVF_HNSW_SQ", '{"m":8,"ef_construction":50,"num_partitions":1}').options, { m: 8, efConstruction: 50, numPartitions: 1 });
  assert.deepEqual(opts("IVF_HNSW_PQ", '{"num_sub_vectors":2,"m":"16"}').options, { numSubVectors: 2, m: 16 });
  assert.deepEqual(opts("FTS", JSON.stringify({ with_position: "TRUE", base_tokenizer: "Ngram", language: "french", max_token_length: 30,
    lower_case: false, stem: "false", remove_stop_words: true, ascii_folding: true, ngram_min_length: 2, ngram_max_length: 4, prefix_only: true })).options,
  { withPosition: true, baseTokenizer: "ngram", language: "French", maxTokenLength: 30, lowercase: false, stem: false, removeStopWords: true,
    asciiFolding: true, ngramMinLength: 2, ngramMaxLength: 4, prefixOnly: true });
  for (const t of ["BTREE", "BITMAP", "LABEL_LIST", "FM"]) assert.deepEqual(opts(t, "").options, {});
  assert.equal(types.TYPE_NAMES.length, 10);
});

test("indextypes: unknown keys and bad values are INVALID, never passed on", () => {
  const bad = [
    ["IVF_PQ", '{"num_bits":2}'], ["IVF_PQ", '{"metric":"hamming"}'], ["IVF_PQ", '{"m":8}'], ["IVF_PQ", '{"sample_rate":0}'],
    ["IVF_PQ", '{"max_iterations":1.5}'], ["IVF_PQ", '{"num_partitions":4294967296}'], ["IVF_FLAT", '{"num_sub_vectors":2}'],
    ["IVF_RQ", '{"num_bits":9}'], ["IVF_RQ", '{"num_bits":0}'], ["IVF_HNSW_SQ", '{"num_bits":8}'], ["IVF_HNSW_SQ", '{"m":0}'],
    ["IVF_HNSW_PQ", '{"ef_construction":-1}'], ["BTREE", '{"metric":"l2"}'], ["LABEL_LIST", '{"x":1}'], ["FM", '{"language":"English"}'],
    ["FTS", '{"language":"Klingon"}'], ["FTS", '{"base_tokenizer":"icu"}'], ["FTS", '{"stem":"yes"}'], ["FTS", '{"stem":1}'],
    ["FTS", '{"ngram_min_length":5,"ngram_max_length":2}'], ["FTS", '{"lowercase":true}'], ["FTS", '{"max_token_length":"40x"}'],
  ];
  for (const [t, json] of bad) {
    assert.throws(() => opts(t, json), (e) => e instanceof lib.Failure && e.kind === lib.KIND.INVALID, `${t} ${json}`);
  }
});

test("indextypes: refused and unknown types are NOT_SUPPORTED with a clear message", () => {
  for (const t of ["IVF_SQ", "ivf_hnsw_flat", "NGRAM", "ZONEMAP", "BLOOMFILTER", "INVERTED"]) {
    assert.throws(() => types.checkType(t), (e) => e.kind === lib.KIND.NOT_SUPPORTED && /not supported by this backend's library/.test(e.message), t);
  }
  assert.throws(() => types.checkType("INVERTED"), /use FTS/);
  assert.throws(() => types.checkType("HNSW"), (e) => e.kind === lib.KIND.NOT_SUPPORTED && /want one of IVF_PQ/.test(e.message));
  assert.equal(types.checkType("ivf_hnsw_pq"), "IVF_HNSW_PQ");
  assert.equal(types.checkType("fm"), "FM");
});

test("indextypes: each type takes only its column kind; hamming exactly on fixed_size_list<uint8>", () => {
  const ok = [
    ["IVF_PQ", {}, vec("float32")], ["IVF_PQ", {}, vec("float16")], ["IVF_RQ", {}, vec("float64")], ["IVF_HNSW_SQ", {}, vec("float32")],
    ["IVF_HNSW_PQ", {}, vec("float32")], ["IVF_FLAT", {}, vec("float32")], ["IVF_FLAT", { metric: "hamming" }, vec("uint8")],
    ["BTREE", {}, field("int32")], ["BITMAP", {}, field("utf8")], ["LABEL_LIST", {}, field("list", "utf8")],
    ["LABEL_LIST", {}, field("large_list", "int64")], ["FTS", {}, field("utf8")], ["FTS", {}, field("large_utf8")], ["FM", {}, field("utf8")],
  ];
  for (const [t, c, cf] of ok) assert.doesNotThrow(() => types.checkColumn(t, c, cf), `${t} ${JSON.stringify(cf)}`);
  const bad = [
    ["IVF_PQ", {}, vec("uint8")], ["IVF_PQ", {}, field("list", "float32")], ["IVF_FLAT", {}, vec("uint8")],
    ["IVF_FLAT", { metric: "hamming" }, vec("float32")], ["IVF_FLAT", { metric: "l2" }, vec("uint8")], ["IVF_RQ", {}, field("utf8")],
    ["BTREE", {}, field("list", "utf8")], ["BITMAP", {}, vec("float32")], ["BTREE", {}, field("struct")],
    ["LABEL_LIST", {}, field("utf8")], ["LABEL_LIST", {}, field("fixed_size_list", "float32")], ["LABEL_LIST", {}, field("list", "struct")],
    ["FTS", {}, field("int32")], ["FTS", {}, field("list", "utf8")], ["FM", {}, field("binary")],
  ];
  for (const [t, c, cf] of bad) {
    assert.throws(() => types.checkColumn(t, c, cf), (e) => e.kind === lib.KIND.INVALID && /needs/.test(e.message), `${t} ${JSON.stringify(cf)}`);
  }
});

test("indextypes: inspect echoes only what indexDetails holds, under canonical keys, never num_partitions", () => {
  const hints = { runtime_hints: { "lance.ivf.max_iters": "5", "lance.ivf.sample_rate": "64" } };
  assert.equal(types.echoedProperties("IVF_PQ", { compression: { num_bits: 4, num_sub_vectors: 2, type: "pq" }, metric_type: "L2", ...hints }),
    '{"metric":"l2","num_bits":4,"num_sub_vectors":2}');
  assert.equal(types.echoedProperties("IVF_FLAT", { metric_type: "HAMMING", ...hints }), '{"metric":"hamming"}');
  assert.equal(types.echoedProperties("IVF_RQ", { compression: { num_bits: 1, rotation_type: "fast", type: "rq" }, metric_type: "DOT" }),
    '{"metric":"dot","num_bits":1}');
  const hnsw = { construction_ef: 50, max_connections: 8, max_level: 7 };
  assert.equal(types.echoedProperties("IVF_HNSW_SQ", { compression: { num_bits: 8, type: "sq" }, hnsw, metric_type: "L2" }),
    '{"ef_construction":50,"m":8,"metric":"l2"}');
  assert.equal(types.echoedProperties("IVF_HNSW_PQ", { compression: { num_bits: 8, num_sub_vectors: 2, type: "pq" }, hnsw, metric_type: "COSINE" }),
    '{"ef_construction":50,"m":8,"metric":"cosine","num_sub_vectors":2}');
  assert.equal(types.echoedProperties("FTS", { ascii_folding: true, base_tokenizer: "simple", custom_stop_words: null, lance_tokenizer: null,
    language: "English", lower_case: true, max_ngram_length: 3, max_token_length: 40, min_ngram_length: 3, prefix_only: false,
    remove_stop_words: true, stem: true, with_position: false }),
  '{"ascii_folding":true,"base_tokenizer":"simple","language":"English","lower_case":true,"max_token_length":40,"ngram_max_length":3,' +
    '"ngram_min_length":3,"prefix_only":false,"remove_stop_words":true,"stem":true,"with_position":false}');
  for (const t of ["BTREE", "BITMAP", "LABEL_LIST", "FM"]) assert.equal(types.echoedProperties(t, {}), "");
  assert.equal(types.echoedProperties("IVF_PQ", {}, { distanceType: "dot" }), '{"metric":"dot"}');
  // A type this backend does not build: the metric and PQ parameters, as before.
  assert.equal(types.echoedProperties("IVF_SQ", { compression: { num_bits: 8, type: "sq" }, metric_type: "L2" }), '{"metric":"l2"}');
  assert.equal(types.echoedProperties("FTS", "not an object"), "");
});
