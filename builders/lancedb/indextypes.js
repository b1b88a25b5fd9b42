// indextypes.js: the index types a build may ask for (docs/builder.md
// "Index types"): canonical property keys → the library's constructor
// options, the column types each type takes, and what inspect reports back
// from listIndices().indexDetails. Pure: no I/O, no LanceDB (the caller
// hands in lancedb.Index). The master validates first; this re-validates so
// the worker never passes an unchecked value to Lance (a bad FTS language,
// for one, aborts the whole process inside the library).
"use strict";

const { Failure, KIND, canonicalJSON, indexProperties } = require("./lib.js");

// Values of the library's u32 parameters; nothing sensible is larger.
const MAX_INT = 0x7fffffff;
const VECTOR_METRICS = ["l2", "cosine", "dot"];
const FLOAT_ELEMENTS = new Set(["float16", "float32", "float64"]);
// lance-index 8.0.0 tokenizer languages, spelled as the library spells them.
const LANGUAGES = ["Arabic", "Danish", "Dutch", "English", "Finnish", "French", "German", "Greek", "Hungarian", "Italian",
  "Norwegian", "Portuguese", "Romanian", "Russian", "Spanish", "Swedish", "Tamil", "Turkish"];
const NESTED = new Set(["list", "large_list", "fixed_size_list", "struct", "map", "union", "dictionary"]);
const TEXT = new Set(["utf8", "large_utf8"]);

// Value kinds of canonical properties.
const int = (min, max = MAX_INT) => ({ kind: "int", min, max });
const bool = { kind: "bool" };
const oneOf = (values) => ({ kind: "enum", values });

const IVF = {
  num_partitions: ["numPartitions", int(1)],
  max_iterations: ["maxIterations", int(1)],
  sample_rate: ["sampleRate", int(1)],
};
const HNSW = { m: ["m", int(1)], ef_construction: ["efConstruction", int(1)] };

// TYPES: canonical type → {keys: canonical key → [library option, value kind],
// call: the lancedb.Index constructor, column: what it takes}.
const TYPES = {
  IVF_PQ: { call: "ivfPq", column: "vector", keys: { metric: ["distanceType", oneOf(VECTOR_METRICS)], ...IVF,
    num_sub_vectors: ["numSubVectors", int(1)], num_bits: ["numBits", oneOf([4, 8])] } },
  IVF_FLAT: { call: "ivfFlat", column: "vector_or_binary", keys: { metric: ["distanceType", oneOf([...VECTOR_METRICS, "hamming"])], ...IVF } },
  IVF_RQ: { call: "ivfRq", column: "vector", keys: { metric: ["distanceType", oneOf(VECTOR_METRICS)], ...IVF, num_bits: ["numBits", int(1, 8)] } },
  IVF_HNSW_SQ: { call: "hnswSq", column: "vector", keys: { metric: ["distanceType", oneOf(VECTOR_METRICS)], ...IVF, ...HNSW } },
  IVF_HNSW_PQ: { call: "hnswPq", column: "vector", keys: { metric: ["distanceType", oneOf(VECTOR_METRICS)], ...IVF,
    num_sub_vectors: ["numSubVectors", int(1)], ...HNSW } },
  BTREE: { call: "btree", column: "scalar", keys: {} },
  BITMAP: { call: "bitmap", column: "scalar", keys: {} },
  LABEL_LIST: { call: "labelList", column: "label_list", keys: {} },
  FTS: { call: "fts", column: "text", keys: {
    with_position: ["withPosition", bool], base_tokenizer: ["baseTokenizer", oneOf(["simple", "whitespace", "raw", "ngram"])],
    language: ["language", { kind: "language" }], max_token_length: ["maxTokenLength", int(1)], lower_case: ["lowercase", bool],
    stem: ["stem", bool], remove_stop_words: ["removeStopWords", bool], ascii_folding: ["asciiFolding", bool],
    ngram_min_length: ["ngramMinLength", int(1)], ngram_max_length: ["ngramMaxLength", int(1)], prefix_only: ["prefixOnly", bool],
  } },
  FM: { call: "fm", column: "text", keys: {} },
};

// Types Lance knows that this backend's library cannot build (or that are
// spelled otherwise here): refused as NOT_SUPPORTED.
const REFUSED = {
  IVF_SQ: "", IVF_HNSW_FLAT: "", NGRAM: "", ZONEMAP: "", BLOOMFILTER: "",
  INVERTED: " (use FTS: it is Lance's inverted index)",
};

const TYPE_NAMES = Object.keys(TYPES);

function isVectorType(t) {
  return t.startsWith("IVF_");
}

// checkType returns the canonical type of a request's index_type, or throws
// Failure(NOT_SUPPORTED).
function checkType(indexType) {
  const t = String(indexType || "").toUpperCase();
  if (TYPES[t]) return t;
  const shown = JSON.stringify(String(indexType || "").slice(0, 32));
  if (Object.prototype.hasOwnProperty.call(REFUSED, t)) {
    throw new Failure(KIND.NOT_SUPPORTED, `index type ${shown} is not supported by this backend's library${REFUSED[t]}`);
  }
  throw new Failure(KIND.NOT_SUPPORTED, `index type ${shown} is not supported (want one of ${TYPE_NAMES.join(", ")})`);
}

function value(type, k, kind, v) {
  const bad = (want) => new Failure(KIND.INVALID, `${type} property ${k} must be ${want}`);
  switch (kind.kind) {
    case "int": {
      const n = typeof v === "string" && /^\d{1,12}$/.test(v) ? Number(v) : v;
      if (!Number.isSafeInteger(n) || n < kind.min || n > kind.max) throw bad(`an integer from ${kind.min} to ${kind.max}`);
      return n;
    }
    case "bool": {
      if (typeof v === "boolean") return v;
      const s = typeof v === "string" ? v.toLowerCase() : "";
      if (s === "true" || s === "false") return s === "true";
      throw bad("true or false");
    }
    case "enum": {
      const n = typeof v === "string" && typeof kind.values[0] === "number" && /^\d{1,3}$/.test(v) ? Number(v) : v;
      const s = typeof n === "string" ? n.toLowerCase() : n;
      if (!kind.values.includes(s)) throw bad(`one of ${kind.values.join(", ")}`);
      return s;
    }
    case "language": {
      const s = typeof v === "string" ? v.toLowerCase() : "";
      const hit = LANGUAGES.find((l) => l.toLowerCase() === s);
      if (!hit) throw bad(`one of ${LANGUAGES.join(", ")}`);
      return hit;
    }
    default:
      throw bad("known");
  }
}

// options maps a type's canonical properties (parseProperties' output) to
// the library's options; throws Failure(INVALID) for an unknown key or a bad
// value. It returns {options, canonical}: canonical holds the checked values
// under their canonical keys.
function options(type, props) {
  const spec = TYPES[type];
  const o = {};
  const canonical = {};
  for (const [k, v] of Object.entries(props)) {
    const entry = spec.keys[k];
    if (!entry) {
      if (!Object.keys(spec.keys).length) throw new Failure(KIND.INVALID, `${type} takes no properties`);
      throw new Failure(KIND.INVALID, `${type} does not take property ${JSON.stringify(k.slice(0, 64))} (it takes ${Object.keys(spec.keys).join(", ")})`);
    }
    const [lib, kind] = entry;
    canonical[k] = value(type, k, kind, v);
    o[lib] = canonical[k];
  }
  if (type === "FTS" && o.ngramMinLength !== undefined && o.ngramMaxLength !== undefined && o.ngramMinLength > o.ngramMaxLength) {
    throw new Failure(KIND.INVALID, "FTS property ngram_min_length must not exceed ngram_max_length");
  }
  return { options: o, canonical };
}

// checkColumn checks the canonical field (lib.canonicalField) against what
// the type takes, with the canonical properties; throws Failure(INVALID).
function checkColumn(type, canonical, cf) {
  const spec = TYPES[type];
  const what = `column ${JSON.stringify(cf.name)} is ${describeField(cf)}`;
  const fail = (want) => { throw new Failure(KIND.INVALID, `${what}; ${type} needs ${want}`); };
  switch (spec.column) {
    case "vector":
      if (cf.data_type !== "fixed_size_list" || !FLOAT_ELEMENTS.has(cf.element_type)) fail("a fixed_size_list of float16, float32 or float64");
      return;
    case "vector_or_binary": {
      const u8 = cf.data_type === "fixed_size_list" && cf.element_type === "uint8";
      if (canonical.metric === "hamming") {
        if (!u8) fail("a fixed_size_list of uint8 for metric hamming");
      } else if (u8) {
        fail("metric hamming on a fixed_size_list of uint8");
      } else if (cf.data_type !== "fixed_size_list" || !FLOAT_ELEMENTS.has(cf.element_type)) {
        fail("a fixed_size_list of float16, float32 or float64 (or of uint8, with metric hamming)");
      }
      return;
    }
    case "scalar":
      if (NESTED.has(cf.data_type)) fail("a scalar column (not a list, fixed_size_list, struct or map)");
      return;
    case "label_list":
      if ((cf.data_type !== "list" && cf.data_type !== "large_list") || !cf.element_type || NESTED.has(cf.element_type)) {
        fail("a list or large_list of a scalar type");
      }
      return;
    case "text":
      if (!TEXT.has(cf.data_type)) fail("a utf8 or large_utf8 column");
      return;
    default:
      fail("a known column kind");
  }
}

function describeField(cf) {
  return cf.element_type ? `${cf.data_type}<${cf.element_type}>` : cf.data_type;
}

// config builds the library's index config.
function config(Index, type, opts) {
  const call = TYPES[type].call;
  return Object.keys(TYPES[type].keys).length ? Index[call](opts) : Index[call]();
}

// ---- inspect: what listIndices().indexDetails echoes ----

const FTS_ECHO = { with_position: "with_position", base_tokenizer: "base_tokenizer", language: "language",
  max_token_length: "max_token_length", lower_case: "lower_case", stem: "stem", remove_stop_words: "remove_stop_words",
  ascii_folding: "ascii_folding", min_ngram_length: "ngram_min_length", max_ngram_length: "ngram_max_length", prefix_only: "prefix_only" };

// echoedProperties reads what the library tells reliably about an index of
// canonical type `type`, under canonical keys, and keeps only the keys that
// type takes (so a value Lance fixes, like SQ's 8 bits, is not reported as if
// it were a choice). For a type this backend does not build, it reports the
// metric and PQ parameters as it always did. num_partitions, max_iterations
// and sample_rate are never reported: Lance keeps no record of them beyond
// runtime hints.
function echoedProperties(type, details, stats) {
  if (!TYPES[type]) return indexProperties(details, stats);
  const d = details && typeof details === "object" && !Array.isArray(details) ? details : {};
  const p = {};
  if (typeof d.metric_type === "string" && d.metric_type) p.metric = d.metric_type.toLowerCase();
  else if (isVectorType(type) && stats && typeof stats.distanceType === "string" && stats.distanceType) p.metric = stats.distanceType.toLowerCase();
  const c = d.compression && typeof d.compression === "object" ? d.compression : null;
  const ctype = c ? String(c.type).toLowerCase() : "";
  if (c && (ctype === "pq" || ctype === "rq" || ctype === "sq")) {
    if (Number.isInteger(c.num_bits)) p.num_bits = c.num_bits;
    if (ctype === "pq" && Number.isInteger(c.num_sub_vectors)) p.num_sub_vectors = c.num_sub_vectors;
  }
  const hnsw = d.hnsw && typeof d.hnsw === "object" ? d.hnsw : null;
  if (hnsw) {
    if (Number.isInteger(hnsw.max_connections)) p.m = hnsw.max_connections;
    if (Number.isInteger(hnsw.construction_ef)) p.ef_construction = hnsw.construction_ef;
  }
  if (type === "FTS") {
    for (const [from, to] of Object.entries(FTS_ECHO)) {
      const v = d[from];
      if (typeof v === "boolean" || Number.isSafeInteger(v)) p[to] = v;
      else if (typeof v === "string" && v) p[to] = to === "language" ? v : v.toLowerCase();
    }
  }
  for (const k of Object.keys(p)) if (!TYPES[type].keys[k]) delete p[k];
  return canonicalJSON(p);
}

module.exports = { TYPES, TYPE_NAMES, REFUSED, LANGUAGES, isVectorType, checkType, options, checkColumn, config, echoedProperties };
