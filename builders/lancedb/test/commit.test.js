// commit.js against fake tables: the verification's failure paths (which
// real Lance does not produce on demand) and resolve's handling of a version
// pruned during the walk.
"use strict";

const test = require("node:test");
const assert = require("node:assert/strict");
const lib = require("../lib.js");

const U1 = "11111111-1111-4111-8111-111111111111";
const U2 = "22222222-2222-4222-8222-222222222222";
const U3 = "33333333-3333-4333-8333-333333333333";
const ix = (name, indexUuid) => ({ name, indexUuid });

// fakeDataset: history maps version → listIndices(); listed (default: the
// history's versions) is what listVersions() answers.
function fakeDataset(history, { listed, openError, failOpens = Infinity } = {}) {
  const versions = Object.keys(history).map(Number);
  const head = Math.max(...versions);
  let opens = 0;
  const openTable = async () => {
    opens++;
    if (openError && opens <= failOpens) throw openError;
    let cur = head;
    return {
      tbl: {
        version: async () => cur,
        checkout: async (v) => {
          if (!(v in history)) throw new Error(`lance error: Dataset at path x/_versions/${v}.manifest was not found`);
          cur = v;
        },
        checkoutLatest: async () => { cur = head; },
        listVersions: async () => (listed || versions).map((v) => ({ version: v, timestamp: new Date(0), metadata: {} })),
        listIndices: async () => history[cur],
        close: () => {},
      },
    };
  };
  return { openTable, opens: () => opens };
}

function commitWith(ds) {
  const logs = [];
  const errText = (e) => (e && e.message) || String(e);
  const c = require("../commit.js")({
    openTable: ds.openTable,
    storageOptions: () => undefined,
    errKind: (e) => (e instanceof lib.Failure ? e.kind : lib.classify(errText(e))),
    errText,
    errDetail: errText,
    buildResult: (code, message, extra) => ({ result_code: code, message, ...extra }),
    log: (m) => logs.push(m),
    sanitize: (m) => String(m),
    inspectCode: () => "INTERNAL",
  });
  return { ...c, logs };
}

const plan = (name, before = "") => ({ name, before, done: "done" });

test("verify: NATIVE_OK with the uuid and version read on a fresh open", async () => {
  const ds = fakeDataset({ 1: [], 2: [ix("n", U2)], 3: [ix("n", U2), ix("m", U3)] });
  const r = await commitWith(ds).verifyCommit({}, { mutation: "CREATE" }, plan("n"), { startVersion: 1, version: 2, announced: U2 });
  assert.deepEqual(r, { result_code: "NATIVE_OK", message: "done; verified at version 2", new_dataset_version: 2, dataset_version: 2, index_uuid: U2 });
  assert.equal(ds.opens(), 1);
  // The handle's version unknown: the fresh head is used. DROP: absent, no uuid.
  const d = fakeDataset({ 4: [ix("n", U1)], 5: [] });
  const rd = await commitWith(d).verifyCommit({}, { mutation: "DROP" }, plan("n", U1), { startVersion: 4, version: null });
  assert.equal(rd.result_code, "NATIVE_OK");
  assert.equal(rd.dataset_version, 5);
  assert.equal(rd.index_uuid, undefined);
});

test("verify: one failed fresh open (I/O) is tried again", async () => {
  const ds = fakeDataset({ 1: [], 2: [ix("n", U2)] }, { openError: new Error("connection reset by peer"), failOpens: 1 });
  const c = commitWith(ds);
  const r = await c.verifyCommit({}, { mutation: "CREATE" }, plan("n"), { startVersion: 1, version: 2 });
  assert.equal(r.result_code, "NATIVE_OK", r.message);
  assert.equal(ds.opens(), 2);
  assert.ok(c.logs.some((l) => /trying again in 200 ms/.test(l)));
});

test("verify: a commit the fresh open does not show is COMMIT_CONFLICT only when the versions prove nothing committed", async () => {
  // CREATE: N nowhere after the start, every version retained.
  let r = await commitWith(fakeDataset({ 1: [], 2: [ix("m", U3)] }))
    .verifyCommit({}, { mutation: "CREATE" }, plan("n"), { startVersion: 1, version: 2 });
  assert.equal(r.result_code, "NATIVE_COMMIT_CONFLICT", r.message);
  assert.equal(r.external_metadata_advanced, true);
  assert.match(r.message, /version 2 read on a fresh connection does not show the commit: "n" is absent; .*none lists "n"/);
  // REPLACE: N keeps the uuid it had at the start.
  r = await commitWith(fakeDataset({ 3: [ix("n", U1)], 4: [ix("n", U1)] }))
    .verifyCommit({}, { mutation: "REPLACE" }, plan("n", U1), { startVersion: 3, version: 4 });
  assert.equal(r.result_code, "NATIVE_COMMIT_CONFLICT", r.message);
  // DROP: N listed in every version after the start.
  r = await commitWith(fakeDataset({ 3: [ix("n", U1)], 4: [ix("n", U1)] }))
    .verifyCommit({}, { mutation: "DROP" }, plan("n", U1), { startVersion: 3, version: 4 });
  assert.equal(r.result_code, "NATIVE_COMMIT_CONFLICT", r.message);
});

test("verify: anything else that does not show the commit is NATIVE_INTERNAL (UNKNOWN)", async () => {
  // Another uuid than the announced one: never OK, never a conflict.
  let r = await commitWith(fakeDataset({ 1: [], 2: [ix("n", U3)] }))
    .verifyCommit({}, { mutation: "CREATE" }, plan("n"), { startVersion: 1, version: 2, announced: U2 });
  assert.equal(r.result_code, "NATIVE_INTERNAL", r.message);
  assert.match(r.message, /not the announced/);
  // N absent at v but listed at a later version.
  r = await commitWith(fakeDataset({ 1: [], 2: [], 3: [ix("n", U3)] }))
    .verifyCommit({}, { mutation: "CREATE" }, plan("n"), { startVersion: 1, version: 2 });
  assert.equal(r.result_code, "NATIVE_INTERNAL", r.message);
  // A pruned version after the start.
  r = await commitWith(fakeDataset({ 1: [], 3: [] }))
    .verifyCommit({}, { mutation: "CREATE" }, plan("n"), { startVersion: 1, version: 3 });
  assert.equal(r.result_code, "NATIVE_INTERNAL", r.message);
  assert.match(r.message, /not retained/);
  // The handle's version is not after the start, or past the fresh head.
  r = await commitWith(fakeDataset({ 1: [ix("n", U1)] })).verifyCommit({}, { mutation: "DROP" }, plan("n", U1), { startVersion: 1, version: 1 });
  assert.equal(r.result_code, "NATIVE_COMMIT_CONFLICT", r.message);
  assert.match(r.message, /is not after version 1/);
  r = await commitWith(fakeDataset({ 1: [], 2: [] })).verifyCommit({}, { mutation: "CREATE" }, plan("n"), { startVersion: 1, version: 3 });
  assert.match(r.message, /before the committed version 3/);
  // The fresh open fails, three times (I/O) or once (anything else).
  let ds = fakeDataset({ 1: [] }, { openError: new Error("connection reset by peer") });
  r = await commitWith(ds).verifyCommit({}, { mutation: "CREATE" }, plan("n"), { startVersion: 1, version: 2 });
  assert.equal(r.result_code, "NATIVE_INTERNAL");
  assert.match(r.message, /could not be verified on a fresh connection: connection reset/);
  assert.equal(r.external_metadata_advanced, undefined);
  assert.equal(ds.opens(), 3);
  ds = fakeDataset({ 1: [] }, { openError: new Error("Invalid user input: nope") });
  r = await commitWith(ds).verifyCommit({}, { mutation: "CREATE" }, plan("n"), { startVersion: 1, version: 2 });
  assert.equal(r.result_code, "NATIVE_INTERNAL");
  assert.equal(ds.opens(), 1);
  // The same head uuid as before the call (REPLACE that did not take) with a later change.
  r = await commitWith(fakeDataset({ 3: [ix("n", U1)], 4: [ix("n", U1)], 5: [ix("n", U3)] }))
    .verifyCommit({}, { mutation: "REPLACE" }, plan("n", U1), { startVersion: 3, version: 4 });
  assert.equal(r.result_code, "NATIVE_INTERNAL", r.message);
});

test("resolve: a version pruned between listVersions and its checkout counts as not retained", async () => {
  const ds = fakeDataset({ 1: [], 3: [] }, { listed: [1, 2, 3] });
  const c = commitWith(ds);
  let r = await c.resolve({ mutation_type: "CREATE", index_name: "n", admitted_dataset_version: 1 });
  assert.equal(r.ok, true);
  assert.equal(r.outcome, "UNKNOWN", r.evidence);
  assert.match(r.evidence, /versions 2 are not retained/);
  r = await commitWith(fakeDataset({ 1: [], 2: [], 3: [] })).resolve({ mutation_type: "create", index_name: "n", admitted_dataset_version: 1 });
  assert.equal(r.outcome, "NOT_COMMITTED", r.evidence);
  assert.equal(r.head_version, 3);
  // Any other checkout error is a failure, not a gap.
  const broken = fakeDataset({ 1: [], 2: [] });
  const open = broken.openTable;
  broken.openTable = async () => {
    const t = await open();
    t.tbl.checkout = async () => { throw new Error("connection reset by peer"); };
    return t;
  };
  r = await commitWith(broken).resolve({ mutation_type: "CREATE", index_name: "n", admitted_dataset_version: 1 });
  assert.equal(r.ok, false);
  assert.equal(r.error_code, "INTERNAL");
});

test("withLeftover: a non-OK answer names the uuid it learned when the head does not list it", async () => {
  const fail = { result_code: "NATIVE_COMMIT_CONFLICT", message: "conflict" };
  // Not listed at the head: a leftover directory.
  let r = await commitWith(fakeDataset({ 3: [ix("n", U1)], 4: [ix("m", U3)] })).withLeftover({}, fail, U2);
  assert.deepEqual(r, { ...fail, leftover_index_uuid: U2 });
  // Listed at the head (it did commit after all): no leftover.
  r = await commitWith(fakeDataset({ 3: [], 4: [ix("n", U2)] })).withLeftover({}, fail, U2);
  assert.deepEqual(r, fail);
  // NATIVE_OK, no uuid learned, or a head that cannot be read: nothing added.
  const ok = { result_code: "NATIVE_OK", message: "done" };
  assert.deepEqual(await commitWith(fakeDataset({ 3: [] })).withLeftover({}, ok, U2), ok);
  assert.deepEqual(await commitWith(fakeDataset({ 3: [] })).withLeftover({}, fail, ""), fail);
  const broken = fakeDataset({ 3: [] }, { openError: new Error("Table 'x' was not found") });
  assert.deepEqual(await commitWith(broken).withLeftover({}, fail, U2), fail);
});
