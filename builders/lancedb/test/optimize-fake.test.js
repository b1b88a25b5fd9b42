// optimize.js against fake tables: the judgements real Lance does not
// produce on demand (a throw after the commits, memory-pool exhaustion, an
// index left behind, a commit conflict).
"use strict";

const test = require("node:test");
const assert = require("node:assert/strict");
const lib = require("../lib.js");

const U1 = "11111111-1111-4111-8111-111111111111";
const U2 = "22222222-2222-4222-8222-222222222222";
const ix = (name, uuid, indexed, unindexed) => ({ name, indexUuid: uuid, numIndexedRows: indexed, numUnindexedRows: unindexed, numSegments: 1 });

// fakeDataset: history maps version → listIndices(); optimize() moves the
// head to `to` (if given) and then throws `error` (if given).
function fakeDataset(history, { start, to, error }) {
  let head = start;
  const openTable = async () => {
    let cur = head;
    return {
      tbl: {
        version: async () => cur,
        listIndices: async () => history[cur],
        checkout: async (v) => { cur = v; },
        optimize: async (opts) => {
          assert.equal(opts.cleanupOlderThan.getTime(), 0, "never prune");
          assert.equal(opts.deleteUnverified, undefined);
          if (to) head = cur = to;
          if (error) throw new Error(error);
          return {};
        },
        close: () => {},
      },
    };
  };
  return openTable;
}

function optimizerWith(openTable) {
  const errText = (e) => (e && e.message) || String(e);
  return require("../optimize.js")({
    openTable, openFresh: openTable, errText, errDetail: errText,
    errKind: (e) => (e instanceof lib.Failure ? e.kind : lib.classify(errText(e))),
    buildResult: (code, message, extra) => ({ result_code: code, message, ...extra }),
    log: () => {}, progress: () => {}, preTouchCode: () => "NATIVE_INTERNAL",
  });
}

const run = (history, opts) => optimizerWith(fakeDataset(history, opts)).optimize({}, { mutation: "OPTIMIZE", admitted: 1 });

test("optimize (fake): a throw after the commits with the work done is NATIVE_OK", async () => {
  const r = await run({ 3: [ix("a", U1, 10, 5)], 5: [ix("a", U2, 15, 0)] },
    { start: 3, to: 5, error: "lance error: 1 tagged version(s) have been marked for cleanup" });
  assert.equal(r.result_code, "NATIVE_OK", r.message);
  assert.equal(r.new_dataset_version, 5);
  assert.match(r.message, /fresh read shows the work done: .*tagged/);
  assert.deepEqual(r.optimized_indexes, [{ name: "a", before: { index_uuid: U1, indexed_rows: 10, unindexed_rows: 5, segments: 1 },
    after: { index_uuid: U2, indexed_rows: 15, unindexed_rows: 0, segments: 1 } }]);
});

test("optimize (fake): memory-pool exhaustion is RESOURCE_REJECTED only with the dataset unchanged, else NATIVE_IO", async () => {
  const oom = "lance error: LanceError(IO): Resources exhausted: Failed to allocate additional 8.0 MB for ExternalSorter[0] with 1.0 MB already allocated";
  let r = await run({ 3: [ix("a", U1, 10, 5)] }, { start: 3, error: oom });
  assert.equal(r.result_code, "PRE_INVOCATION_RESOURCE_REJECTED", r.message);
  assert.equal(r.external_metadata_advanced, undefined);
  r = await run({ 3: [ix("a", U1, 10, 5)], 4: [ix("a", U1, 10, 5)] }, { start: 3, to: 4, error: oom });
  assert.equal(r.result_code, "NATIVE_IO", r.message);
  assert.equal(r.external_metadata_advanced, true);
  // A commit conflict stays one.
  r = await run({ 3: [ix("a", U1, 10, 5)] }, { start: 3, error: "lance error: Commit conflict for version 4: concurrent transaction" });
  assert.equal(r.result_code, "NATIVE_COMMIT_CONFLICT", r.message);
});

test("optimize (fake): a new version with an index still behind is NATIVE_INDEX; nothing to do is NATIVE_OK", async () => {
  let r = await run({ 3: [ix("a", U1, 10, 5), ix("b", U1, 10, 5)], 4: [ix("a", U1, 15, 0), ix("b", U1, 12, 3)] }, { start: 3, to: 4 });
  assert.equal(r.result_code, "NATIVE_INDEX", r.message);
  assert.match(r.message, /"b" has 3 unindexed rows/);
  assert.equal(r.optimized_indexes.length, 2);
  r = await run({ 3: [ix("a", U1, 10, 0)] }, { start: 3 });
  assert.equal(r.result_code, "NATIVE_OK", r.message);
  assert.equal(r.message, "nothing to optimize; version 3");
  assert.equal(r.new_dataset_version, 3);
  assert.equal(r.dataset_version, 3);
  // Returned without a new version while rows were unindexed: not done.
  r = await run({ 3: [ix("a", U1, 10, 5)] }, { start: 3 });
  assert.equal(r.result_code, "NATIVE_INDEX", r.message);
});
