// The builder against a fake S3 endpoint that refuses every request with
// 403 ExpiredToken: build answers PRE_INVOCATION_CREDENTIAL_EXPIRED before
// touching anything, inspect answers IO, and no storage option value (the
// endpoint URL, which Lance echoes in its error, and the keys) appears on
// stdout or stderr. Lance retries the refused listings internally (~7 s on
// LanceDB 0.31, ~3 s on 0.37); both children run at once.
"use strict";

const test = require("node:test");
const assert = require("node:assert/strict");
const http = require("node:http");
const h = require("../harness.js");

const CANARY = "CANARYs3secretValue9";

test("fake S3 403 ExpiredToken: CREDENTIAL_EXPIRED / IO, and no canary anywhere", async () => {
  let requests = 0;
  let sawKeyId = false;
  const srv = http.createServer((req, res) => {
    requests++;
    if (String(req.headers.authorization || "").includes(`Credential=${CANARY}-id/`)) sawKeyId = true;
    res.writeHead(403, { "content-type": "application/xml" });
    res.end('<?xml version="1.0" encoding="UTF-8"?><Error><Code>ExpiredToken</Code>' +
      `<Message>The provided token has expired.</Message><AWSAccessKeyId>${CANARY}-id</AWSAccessKeyId></Error>`);
  });
  await new Promise((r) => srv.listen(0, "127.0.0.1", r));
  try {
    const so = {
      aws_access_key_id: `${CANARY}-id`, aws_secret_access_key: `${CANARY}-secret`, aws_session_token: `${CANARY}-token`,
      endpoint: `http://127.0.0.1:${srv.address().port}/${CANARY}-ep`, allow_http: "true", region: "us-east-1",
    };
    const dsURI = "s3://bucket/lake/items.lance";
    const [b, i] = await Promise.all([
      h.run(h.buildReq(dsURI, { mutation_type: "CREATE", index_name: "id_btree", column_name: "id", index_type: "BTREE",
        admitted_dataset_version: 1, schema_contract_json: '{"v":1,"fields":[{"id":0,"name":"id","type":"int32","nullable":false}]}',
        storage_options: so })),
      h.run(h.inspectReq(dsURI, { storage_options: so })),
    ]);
    assert.ok(requests > 0 && sawKeyId, "the builder reached the fake endpoint with the given key");
    assert.equal(b.result.result_code, "PRE_INVOCATION_CREDENTIAL_EXPIRED", b.result.message);
    // LanceDB 0.31 says "403 Forbidden"; 0.37 "Status { status: 403, …".
    assert.match(b.result.message, /403 Forbidden|status: 403\b/);
    assert.ok(!/\.rs\b|location: Location/.test(b.result.message), `Rust source locations are cut from messages: ${b.result.message}`);
    assert.ok(!b.result.message.includes("list-type"), "URI query strings are cut from messages");
    assert.equal(i.result.ok, false);
    assert.equal(i.result.error_code, "IO", i.result.message);
    for (const r of [b, i]) {
      for (const s of [r.stdout.toString("utf8"), r.stderr]) assert.ok(!s.includes(CANARY), `a storage option value leaked: ${s}`);
    }
  } finally {
    srv.close();
  }
});

// A fake S3 endpoint answering every request with one status: the store's
// failure keeps its own kind (LanceDB 0.37 wraps it as "Invalid input,
// Failed to connect to namespace: IO { … }", which must not make it INVALID).
async function withStatus(status, code, fn) {
  const srv = http.createServer((req, res) => {
    res.writeHead(status, { "content-type": "application/xml" });
    res.end(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>${code}</Code><Message>m</Message></Error>`);
  });
  await new Promise((r) => srv.listen(0, "127.0.0.1", r));
  try {
    return await fn({ aws_access_key_id: "AKIDfake", aws_secret_access_key: "fakesecret", endpoint: `http://127.0.0.1:${srv.address().port}`,
      allow_http: "true", region: "us-east-1" });
  } finally {
    srv.close();
  }
}

test("fake S3 404 NoSuchBucket and 500: STALE / NOT_FOUND and NATIVE_IO / IO, never INVALID", async () => {
  const dsURI = "s3://bucket/lake/items.lance";
  const build = (so) => h.run(h.buildReq(dsURI, { mutation_type: "CREATE", index_name: "id_btree", column_name: "id", index_type: "BTREE",
    admitted_dataset_version: 1, schema_contract_json: '{"v":1,"fields":[{"id":0,"name":"id","type":"int32","nullable":false}]}', storage_options: so }));
  const [[b404, i404], [b500, i500]] = await Promise.all([
    withStatus(404, "NoSuchBucket", (so) => Promise.all([build(so), h.run(h.inspectReq(dsURI, { storage_options: so }))])),
    withStatus(500, "InternalError", (so) => Promise.all([build(so), h.run(h.inspectReq(dsURI, { storage_options: so }))])),
  ]);
  assert.equal(b404.result.result_code, "PRE_INVOCATION_STALE_ADMISSION", b404.result.message);
  assert.equal(i404.result.error_code, "NOT_FOUND", i404.result.message);
  assert.equal(b500.result.result_code, "NATIVE_IO", b500.result.message);
  assert.equal(i500.result.error_code, "IO", i500.result.message);
});
