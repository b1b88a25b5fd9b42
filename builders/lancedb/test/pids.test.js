// The builder under a tight pids limit (threads count): an IVF_PQ build
// whose rayon pool cannot get its threads panics in Rust; JS sees only
// "Panic in async function", and the builder tells the cause from its
// cgroup's pids.events. It must answer PRE_INVOCATION_RESOURCE_REJECTED, and
// only with the dataset verifiably unchanged. Deterministic: the agent's
// thread knobs keep the baseline small (2 tokio/Lance threads) while
// RAYON_NUM_THREADS=64 asks for more threads than pids.max=40 allows. The
// same request without the limit must succeed. Needs a writable pids cgroup
// (v1 /sys/fs/cgroup/pids, or v2 with the pids controller); skipped otherwise.
"use strict";

const test = require("node:test");
const assert = require("node:assert/strict");
const fs = require("node:fs");
const path = require("node:path");
const { spawn } = require("node:child_process");
const h = require("../harness.js");

function makePidsCgroup() {
  const name = `lm-builder-test-${process.pid}`;
  const candidates = ["/sys/fs/cgroup/pids"];
  try {
    if (fs.readFileSync("/sys/fs/cgroup/cgroup.subtree_control", "utf8").split(/\s+/).includes("pids")) candidates.push("/sys/fs/cgroup");
  } catch (_) { /* not cgroup v2 at the root */ }
  for (const base of candidates) {
    const dir = path.join(base, name);
    try {
      fs.mkdirSync(dir);
      fs.writeFileSync(path.join(dir, "pids.max"), "max");
      return dir;
    } catch (_) {
      try { fs.rmdirSync(dir); } catch (_) { /* never made */ }
    }
  }
  return null;
}

const THREAD_ENV = { RAYON_NUM_THREADS: "64", LANCE_CPU_THREADS: "2", LANCE_IO_THREADS: "2", TOKIO_WORKER_THREADS: "2", UV_THREADPOOL_SIZE: "2" };

function runInCgroup(dir, max, frame, timeoutMs) {
  fs.writeFileSync(path.join(dir, "pids.max"), String(max));
  return new Promise((resolve) => {
    const child = spawn("/bin/sh", ["-c", 'echo $$ > "$1/cgroup.procs" && exec "$2" "$3"', "sh", dir, process.execPath, h.BUILDER],
      { stdio: ["pipe", "pipe", "pipe"], env: { ...process.env, ...THREAD_ENV } });
    const out = [];
    let err = "";
    child.stdout.on("data", (c) => out.push(c));
    child.stderr.on("data", (c) => { err += c; });
    child.stdin.on("error", () => {});
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout: Buffer.concat(out), stderr: err });
    });
    child.stdin.end(frame);
  });
}

const cg = makePidsCgroup();

test("pids limit: thread-pool refusal is PRE_INVOCATION_RESOURCE_REJECTED with the dataset unchanged",
  { skip: cg ? false : "no writable pids cgroup here" }, async () => {
    const root = h.tmpDir("lm-builder-pids-");
    try {
      const frame = (uri) => h.frameOf(h.buildReq(uri, { mutation_type: "CREATE", index_name: "vec", column_name: "vector", index_type: "IVF_PQ",
        properties_json: '{"num_bits":4,"num_partitions":2,"num_sub_vectors":2}', admitted_dataset_version: 1,
        schema_contract_json: '{"v":1,"fields":[{"id":1,"name":"vector","type":"fixed_size_list","nullable":false,"dim":16,"elem":"float32","elem_nullable":true}]}' }));
      for (const [name, max] of [["limited", 40], ["unlimited", "max"]]) h.makeDataset(root, name, { rows: 2000, dim: 16 });

      const limited = path.join(root, "limited.lance");
      const r = await runInCgroup(cg, 40, frame(limited), 20000);
      assert.equal(r.signal, null, `killed: ${r.stderr.slice(-2000)}`);
      assert.equal(r.code, 0, r.stderr);
      const res = h.decodeResult(r.stdout);
      assert.equal(res.result_code, "PRE_INVOCATION_RESOURCE_REJECTED", res.message);
      assert.match(res.message, /pids limit refused \d+ thread\/process spawns/);
      assert.equal(res.external_metadata_advanced, undefined);
      const after = (await h.run(h.inspectReq(limited))).result;
      assert.equal(after.dataset_version, 1, "RESOURCE_REJECTED claims NOT_COMMITTED: the dataset must be unchanged");
      assert.deepEqual(after.indexes, []);

      // The same request, same thread knobs, no limit: it is the limit that refused.
      const unlimited = path.join(root, "unlimited.lance");
      const ok = await runInCgroup(cg, "max", frame(unlimited), 20000);
      assert.equal(ok.code, 0, ok.stderr);
      const okRes = h.decodeResult(ok.stdout);
      assert.equal(okRes.result_code, "NATIVE_OK", okRes.message);
      assert.equal(okRes.new_dataset_version, 2);
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
    }
  });

test.after(() => {
  if (cg) try { fs.rmdirSync(cg); } catch (_) { /* still busy: left for the OS */ }
});
