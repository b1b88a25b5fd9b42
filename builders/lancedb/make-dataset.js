#!/usr/bin/env node
// make-dataset.js writes a deterministic sample Lance dataset for demos and tests:
//
//   node make-dataset.js <parentDir> <name> [--rows 20000] [--dim 128] [--seed 42] [--overwrite]
//
// creates <parentDir>/<name>.lance with three columns:
//   id      int32, not nullable            0 .. rows-1
//   vector  fixed_size_list<float32>[dim]  not nullable (elements nullable, as Arrow lists default)
//   text    utf8, nullable                 "doc <id> <word> <word>" from a small vocabulary
// The content depends only on rows, dim and seed (mulberry32 PRNG). On success
// it prints one JSON line {"uri","version","rows","dim"} to stdout.
"use strict";

const path = require("node:path");
const fs = require("node:fs");

const WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel",
  "india", "juliet", "kilo", "lima", "mike", "november", "oscar", "papa"];
const BATCH_ROWS = 8192;

function usage(msg) {
  if (msg) process.stderr.write(`make-dataset: ${msg}\n`);
  process.stderr.write("usage: node make-dataset.js <parentDir> <name> [--rows 20000] [--dim 128] [--seed 42] [--overwrite]\n");
  process.exit(2);
}

function parseArgs(argv) {
  const pos = [];
  const opt = { rows: 20000, dim: 128, seed: 42, overwrite: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--overwrite") { opt.overwrite = true; continue; }
    const m = /^--(rows|dim|seed)(?:=(.*))?$/.exec(a);
    if (m) {
      const v = m[2] !== undefined ? m[2] : argv[++i];
      if (v === undefined || !/^\d+$/.test(v)) usage(`--${m[1]} needs a non-negative integer`);
      opt[m[1]] = Number(v);
      continue;
    }
    if (a.startsWith("--")) usage(`unknown option ${a}`);
    pos.push(a);
  }
  if (pos.length !== 2) usage("want <parentDir> and <name>");
  [opt.parent, opt.name] = pos;
  if (opt.name.endsWith(".lance")) opt.name = opt.name.slice(0, -".lance".length);
  if (!/^[A-Za-z0-9_.-]+$/.test(opt.name)) usage("name may hold only letters, digits, '_', '-' and '.'");
  if (opt.rows < 1 || opt.rows > 50_000_000) usage("--rows must be between 1 and 50000000");
  if (opt.dim < 1 || opt.dim > 8192) usage("--dim must be between 1 and 8192");
  if (opt.seed > 0xffffffff) usage("--seed must fit in 32 bits");
  return opt;
}

// mulberry32: a tiny, well-known 32-bit PRNG; deterministic across platforms.
function mulberry32(seed) {
  let a = seed >>> 0;
  return function next() {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function schema(arrow, dim) {
  return new arrow.Schema([
    new arrow.Field("id", new arrow.Int32(), false),
    new arrow.Field("vector", new arrow.FixedSizeList(dim, new arrow.Field("item", new arrow.Float32(), true)), false),
    new arrow.Field("text", new arrow.Utf8(), true),
  ]);
}

function batch(arrow, sch, dim, start, n, rand) {
  const ids = new Int32Array(n);
  const vec = new Float32Array(n * dim);
  const text = new Array(n);
  for (let r = 0; r < n; r++) {
    const id = start + r;
    ids[r] = id;
    for (let d = 0; d < dim; d++) vec[r * dim + d] = rand() * 2 - 1;
    text[r] = `doc ${id} ${WORDS[Math.floor(rand() * WORDS.length)]} ${WORDS[Math.floor(rand() * WORDS.length)]}`;
  }
  const [fId, fVec, fText] = sch.fields;
  const idData = arrow.makeData({ type: fId.type, length: n, nullCount: 0, data: ids });
  const elem = arrow.makeData({ type: fVec.type.children[0].type, length: n * dim, nullCount: 0, data: vec });
  const vecData = arrow.makeData({ type: fVec.type, length: n, nullCount: 0, child: elem });
  const textData = arrow.vectorFromArray(text, fText.type).data[0];
  const structData = arrow.makeData({
    type: new arrow.Struct(sch.fields), length: n, nullCount: 0, children: [idData, vecData, textData],
  });
  return new arrow.RecordBatch(sch, structData);
}

async function main() {
  const opt = parseArgs(process.argv.slice(2));
  if (!process.env.LANCEDB_LOG) process.env.LANCEDB_LOG = "error";
  const lancedb = require("@lancedb/lancedb");
  const arrow = require("apache-arrow");

  const parent = path.resolve(opt.parent);
  fs.mkdirSync(parent, { recursive: true });
  const sch = schema(arrow, opt.dim);
  const rand = mulberry32(opt.seed);
  const batches = [];
  for (let start = 0; start < opt.rows; start += BATCH_ROWS) {
    batches.push(batch(arrow, sch, opt.dim, start, Math.min(BATCH_ROWS, opt.rows - start), rand));
  }
  const table = new arrow.Table(sch, batches);
  const db = await lancedb.connect(parent);
  const tbl = await db.createTable(opt.name, table, { mode: opt.overwrite ? "overwrite" : "create" });
  const out = { uri: path.join(parent, `${opt.name}.lance`), version: await tbl.version(), rows: opt.rows, dim: opt.dim };
  tbl.close();
  process.stdout.write(JSON.stringify(out) + "\n");
}

main().catch((err) => {
  process.stderr.write(`make-dataset: ${err && err.message ? err.message.split("\n")[0] : String(err)}\n`);
  process.exit(1);
});
