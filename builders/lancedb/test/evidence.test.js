// Unit tests of evidence.js: every row of the §13.4 table and the §13.7
// verification rule, on synthetic version histories.
"use strict";

const test = require("node:test");
const assert = require("node:assert/strict");
const ev = require("../evidence.js");

const U1 = "11111111-1111-4111-8111-111111111111"; // at admission
const U2 = "22222222-2222-4222-8222-222222222222"; // this invocation's
const U3 = "33333333-3333-4333-8333-333333333333"; // someone else's (or optimize's)

const absent = { kind: "absent" };
const has = (uuid) => ({ kind: "present", name: "n", uuid });
const amb = { kind: "ambiguous", uuids: [U2, U3] };

// hist builds {versions, states} from {version: state}; versions not given are pruned.
function hist(obj) {
  const states = new Map(Object.entries(obj).map(([v, s]) => [Number(v), s]));
  return { versions: [...states.keys()], states };
}

function decide(mutation, h, extra = {}) {
  return ev.decide({ mutation, admitted: 3, name: "n", ...h, ...extra });
}

test("indexState: exact name, else the only case-insensitive match; several are ambiguous", () => {
  const ix = (name, indexUuid) => ({ name, indexUuid });
  assert.deepEqual(ev.indexState([], "n"), absent);
  assert.deepEqual(ev.indexState([ix("n", U1), ix("N", U2)], "n"), { kind: "present", name: "n", uuid: U1 });
  assert.deepEqual(ev.indexState([ix("N", U2)], "n"), { kind: "present", name: "N", uuid: U2 });
  assert.deepEqual(ev.indexState([ix("N", U2), ix("n ", U1), ix("nN", U1)], "n"), { kind: "present", name: "N", uuid: U2 });
  assert.deepEqual(ev.indexState([ix("N", U2), ix("n", U3)], "x"), absent);
  assert.equal(ev.indexState([ix("Ab", U2), ix("aB", U3)], "ab").kind, "ambiguous");
});

test("CREATE: COMMITTED by this invocation's uuid in any retained later version, gaps or not", () => {
  let d = decide("CREATE", hist({ 3: absent, 4: absent, 5: has(U2), 6: has(U3) }), { uuid: U2 });
  assert.equal(d.outcome, "COMMITTED");
  assert.equal(d.index_uuid, U2);
  assert.equal(d.head_version, 6);
  assert.match(d.evidence, /version 5 lists "n" with this invocation's uuid/);
  // Pruned versions before and after do not matter: the uuid is the proof.
  d = decide("CREATE", hist({ 6: has(U2), 9: has(U3) }), { uuid: U2 });
  assert.equal(d.outcome, "COMMITTED");
  // Among several case-insensitive candidates, ours is still ours.
  assert.equal(decide("CREATE", hist({ 3: absent, 4: amb }), { uuid: U2 }).outcome, "COMMITTED");
});

test("CREATE: NOT_COMMITTED when contiguous and none lists N, or none with this uuid", () => {
  let d = decide("CREATE", hist({ 3: absent, 4: absent, 5: absent }));
  assert.equal(d.outcome, "NOT_COMMITTED");
  assert.match(d.evidence, /read versions 4\.\.5 \(all retained\): none lists "n"/);
  assert.equal(d.index_uuid, undefined);
  // No later version at all.
  assert.equal(decide("CREATE", hist({ 1: absent, 2: absent, 3: absent })).outcome, "NOT_COMMITTED");
  // Someone else's N (or an optimize's new uuid is impossible: contiguous and ours never listed).
  d = decide("CREATE", hist({ 3: absent, 4: has(U3), 5: has(U3) }), { uuid: U2 });
  assert.equal(d.outcome, "NOT_COMMITTED");
  assert.match(d.evidence, /never with this invocation's uuid/);
});

test("CREATE: UNKNOWN on a gap, or N listed with this invocation's uuid unknown, or ambiguous", () => {
  let d = decide("CREATE", hist({ 3: absent, 5: absent }), { uuid: U2 });
  assert.equal(d.outcome, "UNKNOWN");
  assert.match(d.evidence, /versions 4 are not retained \(pruned\)/);
  d = decide("CREATE", hist({ 4: absent, 5: absent })); // the admitted version itself is pruned
  assert.equal(d.outcome, "UNKNOWN");
  assert.match(d.evidence, /versions 3 are not retained/);
  d = decide("CREATE", hist({ 3: absent, 4: has(U3) }));
  assert.equal(d.outcome, "UNKNOWN");
  assert.match(d.evidence, /uuid is unknown/);
  assert.equal(decide("CREATE", hist({ 3: absent, 4: amb })).outcome, "UNKNOWN");
  // The dataset was recreated: its head is before the admitted version.
  d = decide("CREATE", hist({ 1: absent, 2: absent }), { uuid: U2 });
  assert.equal(d.outcome, "UNKNOWN");
  assert.match(d.evidence, /recreated/);
  assert.equal(decide("CREATE", hist({}), { uuid: U2 }).outcome, "UNKNOWN");
  assert.equal(decide("CREATE", hist({ 3: absent }), { uuid: "not-a-uuid" }).outcome, "UNKNOWN");
});

test("REPLACE: COMMITTED by this invocation's uuid; NOT_COMMITTED when N keeps the admitted uuid", () => {
  let d = decide("REPLACE", hist({ 3: has(U1), 4: has(U1), 5: has(U2) }), { uuid: U2, admittedUuid: U1 });
  assert.equal(d.outcome, "COMMITTED");
  assert.equal(d.index_uuid, U2);
  d = decide("REPLACE", hist({ 3: has(U1), 4: has(U1), 5: has(U1) }), { uuid: U2, admittedUuid: U1 });
  assert.equal(d.outcome, "NOT_COMMITTED");
  assert.match(d.evidence, /keeps uuid 1111/);
  // The admitted uuid, if not recorded, is read at the admitted version.
  assert.equal(decide("REPLACE", hist({ 3: has(U1), 4: has(U1) })).outcome, "NOT_COMMITTED");
  // A REPLACE of a name absent at admission (it creates): absent throughout.
  assert.equal(decide("REPLACE", hist({ 3: absent, 4: absent })).outcome, "NOT_COMMITTED");
});

test("REPLACE: UNKNOWN on a uuid change that is not ours, a gap, a disagreeing admitted uuid", () => {
  // optimize() changes uuids: a change alone never proves a REPLACE.
  let d = decide("REPLACE", hist({ 3: has(U1), 4: has(U3) }), { uuid: U2, admittedUuid: U1 });
  assert.equal(d.outcome, "UNKNOWN");
  assert.match(d.evidence, /never proves a REPLACE/);
  d = decide("REPLACE", hist({ 3: has(U1), 4: has(U3) }), { admittedUuid: U1 });
  assert.equal(d.outcome, "UNKNOWN");
  assert.match(d.evidence, /uuid is unknown/);
  assert.equal(decide("REPLACE", hist({ 3: has(U1), 4: absent }), { admittedUuid: U1 }).outcome, "UNKNOWN");
  assert.equal(decide("REPLACE", hist({ 3: has(U1), 5: has(U1) }), { admittedUuid: U1 }).outcome, "UNKNOWN");
  d = decide("REPLACE", hist({ 3: has(U3), 4: has(U3) }), { admittedUuid: U1 });
  assert.equal(d.outcome, "UNKNOWN");
  assert.match(d.evidence, /not the admitted uuid/);
  assert.equal(decide("REPLACE", hist({ 3: absent, 4: absent }), { admittedUuid: U1 }).outcome, "UNKNOWN");
  assert.equal(decide("REPLACE", hist({ 3: amb, 4: amb })).outcome, "UNKNOWN");
  assert.equal(decide("REPLACE", hist({ 3: absent, 4: has(U3) })).outcome, "UNKNOWN");
});

test("DROP: COMMITTED only with trust_exclusive_writer, N absent in the first later version without it", () => {
  const h = hist({ 3: has(U1), 4: absent, 5: absent });
  let d = decide("DROP", h, { trust: true });
  assert.equal(d.outcome, "COMMITTED");
  assert.match(d.evidence, /absent from it \(trust_exclusive_writer/);
  assert.equal(d.index_uuid, undefined);
  d = decide("DROP", h);
  assert.equal(d.outcome, "UNKNOWN");
  assert.match(d.evidence, /a DROP is never proven/);
  // Another job's commit first (N still listed), then ours; later versions pruned.
  assert.equal(decide("DROP", hist({ 3: has(U1), 4: has(U1), 5: absent, 9: absent }), { trust: true }).outcome, "COMMITTED");
  // A pruned version before N's disappearance: UNKNOWN even with trust.
  assert.equal(decide("DROP", hist({ 3: has(U1), 5: absent }), { trust: true }).outcome, "UNKNOWN");
  // N absent already at the admitted version.
  assert.equal(decide("DROP", hist({ 3: absent, 4: absent }), { trust: true }).outcome, "UNKNOWN");
});

test("DROP: NOT_COMMITTED when contiguous and N present in every later version, else UNKNOWN", () => {
  let d = decide("DROP", hist({ 3: has(U1), 4: has(U1), 5: has(U3) }), { trust: true });
  assert.equal(d.outcome, "NOT_COMMITTED");
  assert.match(d.evidence, /present in every one/);
  assert.equal(decide("DROP", hist({ 3: has(U1) })).outcome, "NOT_COMMITTED");
  assert.equal(decide("DROP", hist({ 3: has(U1), 5: has(U1) })).outcome, "UNKNOWN");
  assert.equal(decide("DROP", hist({ 4: has(U1), 5: has(U1) })).outcome, "UNKNOWN");
  assert.equal(decide("DROP", hist({ 3: has(U1), 4: amb }), { trust: true }).outcome, "UNKNOWN");
});

test("evidence is bounded to 1024 bytes and names no URI", () => {
  const long = "x".repeat(3000);
  const d = ev.decide({ mutation: "CREATE", admitted: 3, name: long, ...hist({ 3: absent }) });
  assert.ok(Buffer.byteLength(d.evidence) <= 1024);
  const many = {};
  for (let v = 3; v <= 400; v += 2) many[v] = absent;
  const g = decide("CREATE", hist(many));
  assert.equal(g.outcome, "UNKNOWN");
  assert.match(g.evidence, /in all\)/);
});

test("checkVerified: new uuid for CREATE/REPLACE (the announced one if any), absent for DROP", () => {
  const c = (mutation, state, extra) => ev.checkVerified({ mutation, name: "n", state, ...extra });
  assert.deepEqual(c("CREATE", has(U2)), { ok: true, uuid: U2 });
  assert.deepEqual(c("REPLACE", has(U2), { before: U1, announced: U2 }), { ok: true, uuid: U2 });
  assert.match(c("REPLACE", has(U1), { before: U1 }).why, /still has the uuid/);
  assert.match(c("CREATE", has(U3), { announced: U2 }).why, /not the announced/);
  assert.equal(c("CREATE", absent).ok, false);
  assert.equal(c("CREATE", amb).ok, false);
  assert.equal(c("CREATE", has("")).ok, false);
  assert.deepEqual(c("DROP", absent), { ok: true, uuid: "" });
  assert.equal(c("DROP", has(U1)).ok, false);
});

test("progressLine: one parseable line, uuid checked, phase bounded", () => {
  assert.equal(ev.progressLine({ index_uuid: U2 }), `lancemaster-progress {"index_uuid":"${U2}"}\n`);
  assert.equal(ev.progressLine({ phase: "building" }), 'lancemaster-progress {"phase":"building"}\n');
  assert.equal(ev.progressLine({ index_uuid: "nope" }), "lancemaster-progress {}\n");
  assert.ok(ev.progressLine({ phase: "p".repeat(100) }).length < 100);
});

test("judgeOptimize: optimized, nothing to do, or behind", () => {
  const c = (uuid, indexed, unindexed) => ({ index_uuid: uuid, indexed_rows: indexed, unindexed_rows: unindexed, segments: 1 });
  const m = (entries) => new Map(entries);
  // Advanced, every index current: optimized; before and after listed for each.
  let j = ev.judgeOptimize({ start: 4, version: 6, before: m([["a", c(U1, 10, 3)], ["b", c(U2, 10, 3)]]),
    after: m([["a", c(U3, 13, 0)], ["b", c(U2, 13, 0)]]) });
  assert.equal(j.state, "optimized");
  assert.deepEqual(j.optimized, [{ name: "a", before: c(U1, 10, 3), after: c(U3, 13, 0) }, { name: "b", before: c(U2, 10, 3), after: c(U2, 13, 0) }]);
  // An index gone at the new version does not hold it back; one created meanwhile is listed with after only.
  j = ev.judgeOptimize({ start: 4, version: 5, before: m([["a", c(U1, 10, 3)]]), after: m([["z", c(U2, 13, 0)]]) });
  assert.equal(j.state, "optimized");
  assert.match(j.why, /"a" gone at version 5/);
  assert.deepEqual(j.optimized, [{ name: "a", before: c(U1, 10, 3) }, { name: "z", after: c(U2, 13, 0) }]);
  // Not advanced, nothing unindexed: nothing to do.
  j = ev.judgeOptimize({ start: 4, version: 4, before: m([["a", c(U1, 10, 0)]]), after: m([["a", c(U1, 10, 0)]]) });
  assert.equal(j.state, "nothing");
  assert.equal(ev.judgeOptimize({ start: 4, version: 4, before: m([]), after: m([]) }).state, "nothing");
  // Advanced, but an index still has unindexed rows (or an unknown count): behind.
  j = ev.judgeOptimize({ start: 4, version: 5, before: m([["a", c(U1, 10, 3)]]), after: m([["a", c(U1, 12, 1)]]) });
  assert.equal(j.state, "behind");
  assert.match(j.why, /"a" has 1 unindexed rows/);
  j = ev.judgeOptimize({ start: 4, version: 5, before: m([["a", c(U1, 10, 3)]]), after: m([["a", { index_uuid: U1 }]]) });
  assert.equal(j.state, "behind");
  // Not advanced while rows were unindexed: behind.
  assert.equal(ev.judgeOptimize({ start: 4, version: 4, before: m([["a", c(U1, 10, 3)]]), after: m([["a", c(U1, 10, 3)]]) }).state, "behind");
});

test("countsOf: frame.IndexCounts of one listIndices() entry, unknown counts left out", () => {
  assert.deepEqual(ev.countsOf({ name: "a", indexUuid: U1, numIndexedRows: 5, numUnindexedRows: 0, numSegments: 2, sizeBytes: 9 }),
    { index_uuid: U1, indexed_rows: 5, unindexed_rows: 0, segments: 2 });
  assert.deepEqual(ev.countsOf({ name: "a" }), {});
});

test("leftoverUuid: the learned uuid only when the head does not list it", () => {
  assert.equal(ev.leftoverUuid(U2, [{ name: "n", indexUuid: U1 }]), U2);
  assert.equal(ev.leftoverUuid(U2, [{ name: "other", indexUuid: U2 }]), "");
  assert.equal(ev.leftoverUuid("", []), "");
  assert.equal(ev.leftoverUuid("not-a-uuid", []), "");
});
