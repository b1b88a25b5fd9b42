// leftover_index_uuid end to end: two builders CREATE the same name at once
// (each held before its mutating call, then released one after the other).
// The second builds its files, loses the commit to the first, and names the
// directory it left behind. Also for a vector build whose uuid Lance logs
// (the builder's own watch then runs silently).
"use strict";

const test = require("node:test");
const assert = require("node:assert/strict");
const fs = require("node:fs");
const path = require("node:path");
const h = require("../harness.js");
const ev = require("../evidence.js");

const root = h.tmpDir("lm-leftover-");
const uri = path.join(root, "items.lance");
let fields;

test.before(async () => {
  h.makeDataset(root, "items", { rows: 20000, dim: 16 });
  fields = (await h.run(h.inspectReq(uri))).result.fields;
});
test.after(() => fs.rmSync(root, { recursive: true, force: true }));

function holdDir(name) {
  const d = path.join(root, `hold-${name}`);
  fs.mkdirSync(d);
  fs.writeFileSync(path.join(d, "before-commit"), "");
  return d;
}

async function reached(dir) {
  const f = path.join(dir, "before-commit.reached");
  for (let i = 0; i < 1200 && !fs.existsSync(f); i++) await new Promise((r) => setTimeout(r, 25));
  assert.ok(fs.existsSync(f), `${dir} never reached its hold point`);
}

const announced = (stderr) => stderr.split("\n").filter((l) => l.startsWith(ev.PROGRESS_PREFIX))
  .map((l) => JSON.parse(l.slice(ev.PROGRESS_PREFIX.length)).index_uuid).filter(Boolean);

// race runs two CREATEs of name, releasing a before b; it returns both runs.
async function race(name, fieldsOfReq, env = {}) {
  const ha = holdDir(`${name}-a`);
  const hb = holdDir(`${name}-b`);
  const version = (await h.run(h.inspectReq(uri))).result.dataset_version;
  const req = () => h.buildReq(uri, { mutation_type: "CREATE", index_name: name, admitted_dataset_version: version, ...fieldsOfReq });
  const pa = h.run(req(), { env: { ...env, LANCEMASTER_BUILDER_HOLD: ha } });
  const pb = h.run(req(), { env: { ...env, LANCEMASTER_BUILDER_HOLD: hb } });
  await reached(ha);
  await reached(hb);
  fs.unlinkSync(path.join(ha, "before-commit"));
  const a = await pa;
  fs.unlinkSync(path.join(hb, "before-commit"));
  return { a, b: await pb };
}

async function listedUuids() {
  return (await h.run(h.inspectReq(uri))).result.index_stats.map((s) => s.index_uuid);
}

test("leftover: the loser of a commit race names the index directory it wrote; the winner's is listed", async () => {
  const { a, b } = await race("n_bitmap", { column_name: "text", index_type: "BITMAP", schema_contract_json: h.contract(fields[2]) });
  assert.equal(a.result.result_code, "NATIVE_OK", a.result.message);
  assert.equal(a.result.leftover_index_uuid, undefined);
  assert.equal(b.result.result_code, "NATIVE_COMMIT_CONFLICT", b.result.message);
  const seen = announced(b.stderr);
  assert.equal(seen.length, 1, `the loser announced ${seen.length} uuids`);
  assert.equal(b.result.leftover_index_uuid, seen[0]);
  assert.ok(fs.existsSync(path.join(uri, "_indices", seen[0])), "the directory is there");
  const listed = await listedUuids();
  assert.ok(listed.includes(a.result.index_uuid));
  assert.ok(!listed.includes(seen[0]));
});

test("leftover: a vector build whose uuid Lance logs still learns it, silently", async () => {
  const { a, b } = await race("n_flat", { column_name: "vector", index_type: "IVF_FLAT", properties_json: '{"num_partitions":2}',
    schema_contract_json: h.contract(fields[1]) }, { LANCEDB_LOG: "error,lance::index::vector=debug" });
  assert.equal(a.result.result_code, "NATIVE_OK", a.result.message);
  assert.equal(b.result.result_code, "NATIVE_COMMIT_CONFLICT", b.result.message);
  assert.deepEqual(announced(b.stderr), [], "no builder line of its own");
  const lance = /DEBUG lance::index::vector\] build_vector_index;.* uuid=([0-9a-f-]{36}) /.exec(b.stderr);
  assert.ok(lance, "Lance logged the uuid");
  assert.equal(b.result.leftover_index_uuid, lance[1]);
  assert.ok(!(await listedUuids()).includes(lance[1]));
});
