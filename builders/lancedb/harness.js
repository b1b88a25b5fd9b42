// Test harness (used by test/*.test.js): spawn builder.js, speak the frame
// protocol, make datasets. Kept outside test/ so `node --test test/` does not
// run it as a test file.
"use strict";

const { spawn, execFileSync } = require("node:child_process");
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");

const DIR = __dirname;
const BUILDER = path.join(DIR, "builder.js");
const MAKE_DATASET = path.join(DIR, "make-dataset.js");

function frameOf(obj) {
  const body = Buffer.from(typeof obj === "string" ? obj : JSON.stringify(obj), "utf8");
  const head = Buffer.alloc(4);
  head.writeUInt32BE(body.length, 0);
  return Buffer.concat([head, body]);
}

// runRaw feeds raw stdin bytes to builder.js and collects everything.
function runRaw(input, { env, endStdin = true, timeoutMs = 60000 } = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BUILDER], {
      stdio: ["pipe", "pipe", "pipe"],
      env: { ...process.env, ...env },
    });
    const out = [];
    const err = [];
    child.stdout.on("data", (c) => out.push(c));
    child.stderr.on("data", (c) => err.push(c));
    child.stdin.on("error", () => {}); // the builder may stop reading early
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.on("error", reject);
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout: Buffer.concat(out), stderr: Buffer.concat(err).toString("utf8") });
    });
    if (input.length) child.stdin.write(input);
    if (endStdin) child.stdin.end();
  });
}

// decodeResult checks stdout holds exactly one frame and parses it.
function decodeResult(stdout) {
  if (stdout.length < 4) throw new Error(`stdout has ${stdout.length} bytes, no frame`);
  const n = stdout.readUInt32BE(0);
  if (stdout.length !== 4 + n) throw new Error(`stdout has ${stdout.length} bytes; the frame says ${n}+4`);
  return JSON.parse(stdout.subarray(4).toString("utf8"));
}

// run sends one request object and returns {code, result, stderr, stdout}.
async function run(req, opts) {
  const r = await runRaw(frameOf(req), opts);
  if (r.code !== 0) throw new Error(`builder exited ${r.code} (${r.signal}); stderr: ${r.stderr}`);
  return { ...r, result: decodeResult(r.stdout) };
}

function tmpDir(prefix) {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

function makeDataset(parent, name, { rows = 2000, dim = 16, extra = false } = {}) {
  const args = [MAKE_DATASET, parent, name, "--rows", String(rows), "--dim", String(dim), ...(extra ? ["--extra"] : [])];
  const out = execFileSync(process.execPath, args, {
    encoding: "utf8", stdio: ["ignore", "pipe", "pipe"],
  });
  return JSON.parse(out);
}

function inspectReq(uri, extra) {
  return { protocol: 1, mode: "inspect", dataset_uri: uri, ...extra };
}

let invocation = 0;
function buildReq(uri, fields) {
  invocation++;
  return { protocol: 1, mode: "build", dataset_uri: uri, job_id: invocation, invocation_id: `inv-${invocation}`, ...fields };
}

// contract computes schema contract v1 JSON the way pkg/job does (Go's
// encoding/json with omitempty on dim/elem/elem_nullable).
function contract(f) {
  const c = { id: f.field_id, name: f.name.toLowerCase(), type: f.data_type, nullable: f.nullable };
  if (f.list_dimension) c.dim = f.list_dimension;
  if (f.element_type) c.elem = f.element_type;
  if (f.element_nullable) c.elem_nullable = true;
  return JSON.stringify({ v: 1, fields: [c] });
}

module.exports = { DIR, BUILDER, frameOf, runRaw, decodeResult, run, tmpDir, makeDataset, inspectReq, buildReq, contract };
