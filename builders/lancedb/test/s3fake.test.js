// The builder against a fake S3 endpoint that refuses every request with
// 403 ExpiredToken: build answers PRE_INVOCATION_CREDENTIAL_EXPIRED before
// touching anything, inspect answers IO, and no storage option value (the
// endpoint URL, which Lance echoes in its error, and the keys) appears on
// stdout or stderr. Lance retries the refused listings internally for ~7 s;
// both children run at once.
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
    assert.match(b.result.message, /403 Forbidden/);
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
