// Unit tests of lib.js: URI splitting, canonical types, the schema contract,
// index type/properties normalization, error classification (on messages
// LanceDB 0.31 really produces) and sanitizing.
"use strict";

const test = require("node:test");
const assert = require("node:assert/strict");
const arrow = require("apache-arrow");
const lib = require("../lib.js");
const types = require("../indextypes.js");

test("splitDatasetURI: parent + name for local paths, file:// and object stores", () => {
  const ok = [
    ["/data/lake/db/items.lance", "/data/lake/db", "items"],
    ["/data/lake/db/items.lance/", "/data/lake/db", "items"],
    ["/items.lance", "/", "items"],
    ["file:///data/lake/items.lance", "/data/lake", "items"],
    ["file://localhost/data/lake/items.lance", "/data/lake", "items"],
    ["FILE:///data/a%20b/it-ems_1.v2.lance", "/data/a b", "it-ems_1.v2"],
    ["s3://bucket/lake/db/items.lance", "s3://bucket/lake/db", "items"],
    ["s3://bucket/items.lance", "s3://bucket", "items"],
    ["gs://b/x/items.lance", "gs://b/x", "items"],
    ["az://c/x/items.lance", "az://c/x", "items"],
  ];
  for (const [uri, parent, name] of ok) assert.deepEqual(lib.splitDatasetURI(uri), { parent, name }, uri);
  const bad = ["", "  ", "items.lance", "./items.lance", "/data/items", "/data/items.lance.bak", "/data/.lance",
    "/data/my table.lance", "s3://bucket", "s3://bucket/", "s3://bucket/x.lance?versionId=1", "s3://u:p@bucket/x.lance",
    "db://remote/x.lance", "https://h/x.lance", "file://otherhost/x.lance", "/data/x\n.lance", 42, null];
  for (const uri of bad) {
    assert.throws(() => lib.splitDatasetURI(uri), (e) => e instanceof lib.Failure && e.kind === lib.KIND.INVALID, String(uri));
  }
  // Messages never echo the URI.
  try { lib.splitDatasetURI("s3://bucket/secret-path?sig=XYZ"); } catch (e) { assert.ok(!e.message.includes("XYZ") && !e.message.includes("secret-path")); }
});

test("canonicalType: pkg/job's canonical names", () => {
  const cases = [
    [new arrow.Int8(), "int8"], [new arrow.Int16(), "int16"], [new arrow.Int32(), "int32"], [new arrow.Int64(), "int64"],
    [new arrow.Uint8(), "uint8"], [new arrow.Uint16(), "uint16"], [new arrow.Uint32(), "uint32"], [new arrow.Uint64(), "uint64"],
    [new arrow.Float16(), "float16"], [new arrow.Float32(), "float32"], [new arrow.Float64(), "float64"],
    [new arrow.Bool(), "bool"], [new arrow.Utf8(), "utf8"], [new arrow.LargeUtf8(), "large_utf8"],
    [new arrow.Binary(), "binary"], [new arrow.LargeBinary(), "large_binary"],
    [new arrow.DateDay(), "date32"], [new arrow.DateMillisecond(), "date64"],
    [new arrow.TimestampMicrosecond(), "timestamp"], [new arrow.Timestamp(arrow.TimeUnit.SECOND, "UTC"), "timestamp"],
    [new arrow.FixedSizeList(4, new arrow.Field("item", new arrow.Float32(), true)), "fixed_size_list"],
    [new arrow.List(new arrow.Field("item", new arrow.Int32(), true)), "list"],
    [new arrow.Struct([new arrow.Field("a", new arrow.Int32())]), "struct"],
    [new arrow.Null(), "null"], [new arrow.FixedSizeBinary(16), "fixed_size_binary"],
    [new arrow.Decimal(2, 10, 128), "decimal128"], [new arrow.TimeMillisecond(), "time32"], [new arrow.TimeNanosecond(), "time64"],
    [new arrow.Dictionary(new arrow.Utf8(), new arrow.Int32()), "dictionary"],
  ];
  for (const [t, want] of cases) assert.equal(lib.canonicalType(t), want, String(t));
});

test("canonicalField and contractOf match pkg/job.SchemaContract's JSON", () => {
  const f = new arrow.Field("Vector", new arrow.FixedSizeList(16, new arrow.Field("item", new arrow.Float32(), true)), false);
  const cf = lib.canonicalField(f, 1);
  assert.deepEqual(cf, { field_id: 1, name: "Vector", data_type: "fixed_size_list", nullable: false, list_dimension: 16, element_type: "float32", element_nullable: true });
  // What Go's job.SchemaContract produces for this field (verified against pkg/job).
  const goJSON = '{"v":1,"fields":[{"id":1,"name":"vector","type":"fixed_size_list","nullable":false,"dim":16,"elem":"float32","elem_nullable":true}]}';
  const parsed = lib.parseContract(goJSON);
  assert.equal(parsed.unsupported, undefined);
  assert.equal(lib.compareContracts(parsed.contract, lib.contractOf(cf)), "");
  const scalar = lib.parseContract('{"v":1,"fields":[{"id":0,"name":"id","type":"int32","nullable":false}]}');
  assert.equal(lib.compareContracts(scalar.contract, lib.contractOf(lib.canonicalField(new arrow.Field("id", new arrow.Int32(), false), 0))), "");
  assert.notEqual(lib.compareContracts(scalar.contract, lib.contractOf(lib.canonicalField(new arrow.Field("id", new arrow.Int64(), false), 0))), "");
  assert.notEqual(lib.compareContracts(scalar.contract, lib.contractOf(lib.canonicalField(new arrow.Field("id", new arrow.Int32(), true), 0))), "");
  assert.notEqual(lib.compareContracts(scalar.contract, lib.contractOf(lib.canonicalField(new arrow.Field("id", new arrow.Int32(), false), 3))), "");
});

test("parseContract: unsupported versions and shapes", () => {
  for (const c of [undefined, "", "x", "[]", "null", '{"v":2,"fields":[]}', '{"v":"1","fields":[]}', '{"fields":[]}',
    '{"v":1}', '{"v":1,"fields":[]}', '{"v":1,"fields":[1]}', '{"v":1,"fields":[],"extra":1}',
    '{"v":1,"fields":[{"id":"0","name":"id","type":"int32","nullable":false}]}',
    '{"v":1,"fields":[{"id":0,"name":"id","type":"int32"}]}',
    '{"v":1,"fields":[{"id":0,"name":"id","type":"int32","nullable":false,"new_key":1}]}']) {
    assert.ok(lib.parseContract(c).unsupported, String(c));
  }
});

test("findColumn: exact, else the only case-insensitive match", () => {
  const fs = [{ name: "id" }, { name: "Vec" }, { name: "a" }, { name: "A" }];
  assert.equal(lib.findColumn(fs, "id").pos, 0);
  assert.equal(lib.findColumn(fs, "VEC").pos, 1);
  assert.equal(lib.findColumn(fs, "A").pos, 3);
  assert.ok(lib.findColumn(fs, "nope").error);
  assert.ok(lib.findColumn([{ name: "a" }, { name: "A" }], "b").error);
  assert.match(lib.findColumn([{ name: "ab" }, { name: "AB" }], "Ab").error, /differ only in case/);
});

test("index types and properties", () => {
  assert.equal(lib.normalizeIndexType("IvfPq"), "IVF_PQ");
  assert.equal(lib.normalizeIndexType("BTree"), "BTREE");
  assert.equal(lib.normalizeIndexType("Bitmap"), "BITMAP");
  assert.equal(lib.normalizeIndexType("IvfHnswSq"), "IVF_HNSW_SQ");
  assert.equal(lib.normalizeIndexType("SomethingNew"), "SOMETHINGNEW");
  const details = { compression: { num_bits: 4, num_sub_vectors: 2, type: "pq" }, metric_type: "COSINE", runtime_hints: { "lance.ivf.max_iters": "50" } };
  assert.equal(lib.indexProperties(details), '{"metric":"cosine","num_bits":4,"num_sub_vectors":2}');
  assert.equal(lib.indexProperties({}, { distanceType: "dot" }), '{"metric":"dot"}');
  assert.equal(lib.indexProperties({}), "");
  assert.equal(lib.indexProperties(undefined), "");
  const ivfPq = (props) => types.options("IVF_PQ", props).options;
  assert.deepEqual(ivfPq(lib.parseProperties('{"metric":"L2","num_partitions":64,"num_sub_vectors":16,"num_bits":8}')),
    { distanceType: "l2", numPartitions: 64, numSubVectors: 16, numBits: 8 });
  assert.deepEqual(ivfPq({}), {});
  for (const bad of ['{"metric":"hamming"}', '{"num_bits":5}', '{"num_partitions":0}', '{"num_partitions":1.5}', '{"nprobes":2}']) {
    assert.throws(() => ivfPq(lib.parseProperties(bad)), lib.Failure, bad);
  }
  for (const bad of ["[]", "1", "{", '{"A":1,"a":2}']) assert.throws(() => lib.parseProperties(bad), lib.Failure, bad);
  assert.deepEqual(lib.parseProperties(""), {});
});

test("classify: LanceDB 0.31 messages map to kinds", () => {
  const K = lib.KIND;
  const cases = [
    ["lance error: LanceError(Index): Index name 'id_btree' already exists, please specify a different name or use replace=True, /x/create.rs:201:24", K.ALREADY_EXISTS],
    ["lance error: LanceError(Index): Index name 'id_btree' already exists with different fields, please specify a different name", K.ALREADY_EXISTS],
    ["lance error: Lance index not found: name=nosuch, /x/index.rs:954:24", K.NOT_FOUND],
    ["Schema Error: Field path `nocol` not found in schema. Available field paths: id, vector, text", K.INVALID],
    ["Schema Error: A IVF PQ index cannot be created on the field `id` which has data type Int32", K.INVALID],
    ["lance error: Invalid user input: num_sub_vectors must divide vector dimension 16, but got 5", K.INVALID],
    ["lance error: Unprocessable: KMeans cannot train 4000 centroids with 2000 vectors; choose a smaller K (< 2000)", K.INVALID],
    ["Table 'nosuch' was not found  Caused by: Dataset at path tmp/bx/nosuch.lance was not found: Not found: tmp/bx/nosuch.lance/_versions", K.NOT_FOUND],
    ["lance error: Dataset at path tmp/bx/items.lance/_versions/99.manifest was not found", K.NOT_FOUND],
    ["lance error: Commit conflict for version 7: This CreateIndex transaction is incompatible with concurrent transaction", K.COMMIT_CONFLICT],
    ["lance error: Retryable commit conflict for version 7: ...", K.COMMIT_CONFLICT],
    ["lance error: LanceError(IO): Generic S3 error: Error performing list request: ... 403 Forbidden: <Error><Code>ExpiredToken</Code></Error>", K.CREDENTIAL],
    ["lance error: LanceError(IO): Generic S3 error: ... Server returned non-2xx status code: 403 Forbidden: <Code>AccessDenied</Code>", K.CREDENTIAL],
    ["lance error: LanceError(IO): Generic S3 error: ... <Code>InvalidAccessKeyId</Code>", K.CREDENTIAL],
    ["lance error: LanceError(IO): Generic GCS error: ... 401 Unauthorized", K.CREDENTIAL],
    ["lance error: LanceError(IO): Generic MicrosoftAzure error: AuthenticationFailed", K.CREDENTIAL],
    ["lance error: LanceError(IO): Generic LocalFileSystem error: Unable to open file /x: Permission denied (os error 13)", K.IO],
    ["lance error: LanceError(IO): Generic S3 error: ... HTTP error: error sending request Caused by: Connection refused (os error 111)", K.IO],
    ["lance error: LanceError(IO): Generic S3 error: ... 503 Service Unavailable", K.IO],
    ["Panic in async function: ThreadPoolBuildError { kind: IOError(Os { code: 11, kind: WouldBlock, message: \"Resource temporarily unavailable\" }) }", K.RESOURCE],
    ["failed to spawn thread: Os { code: 11, kind: WouldBlock }", K.RESOURCE],
    ["lance error: LanceError(Index): failed to train IVF model", K.INDEX],
    ["lance error: Not supported: vector index on this type", K.NOT_SUPPORTED],
    ["LanceDBError: not supported: remote tables", K.NOT_SUPPORTED],
    ["Panic in async function", K.INTERNAL],
    ["lance error: Encountered internal error. Please file a bug report", K.INTERNAL],
    ["", K.INTERNAL],
  ];
  for (const [msg, want] of cases) assert.equal(lib.classify(msg), want, msg);
});

test("classify: Lance's memory pool exhaustion is its own kind, before I/O", () => {
  const K = lib.KIND;
  for (const msg of [
    "lance error: LanceError(IO): Resources exhausted: Failed to allocate additional 12.0 MB for ExternalSorter[0] with 4.0 MB already allocated for this reservation",
    "External error: Resources exhausted: Not enough memory to continue external sort. Consider increasing the memory limit",
    "Not enough memory to continue external sort",
  ]) assert.equal(lib.classify(msg), K.MEMORY_POOL, msg);
  // The machine's own allocation failure stays resource.
  assert.equal(lib.classify("memory allocation of 1048576 bytes failed"), K.RESOURCE);
});

test("canonicalField: list and large_list carry their element, no dimension; other kinds unchanged", () => {
  const list = new arrow.Field("Labels", new arrow.List(new arrow.Field("item", new arrow.Utf8(), true)), true);
  assert.deepEqual(lib.canonicalField(list, 3), { field_id: 3, name: "Labels", data_type: "list", nullable: true, element_type: "utf8", element_nullable: true });
  // Arrow JS 18 has no LargeList: schema.js hands in this shape (flatbuffer type id 21).
  const large = { name: "tags", nullable: false, type: { typeId: 21, children: [{ name: "item", nullable: false, type: new arrow.Int64() }] } };
  assert.equal(lib.canonicalType(large.type), "large_list");
  assert.deepEqual(lib.canonicalField(large, 0), { field_id: 0, name: "tags", data_type: "large_list", nullable: false, element_type: "int64", element_nullable: false });
  const c = lib.contractOf(lib.canonicalField(large, 0)).fields[0];
  assert.deepEqual(c, { id: 0, name: "tags", type: "large_list", nullable: false, dim: 0, elem: "int64", elem_nullable: false });
  // Scalars and structs keep the shape they always had.
  assert.deepEqual(lib.canonicalField(new arrow.Field("s", new arrow.Struct([new arrow.Field("a", new arrow.Int32())]), true), 1),
    { field_id: 1, name: "s", data_type: "struct", nullable: true });
  assert.equal(lib.normalizeIndexType("Fm"), "FM");
  assert.equal(lib.normalizeIndexType("LabelList"), "LABEL_LIST");
  assert.equal(lib.normalizeIndexType("IvfRq"), "IVF_RQ");
});

// Verbatim (sanitized) LanceDB 0.37.1 answers of connect() against a fake S3
// endpoint: the namespace probe's wrapper says "Invalid input", but the
// cause is the store, so the kind is that of the inner IO error.
test("classify: LanceDB 0.37 namespace-probe failures are classified by their cause", () => {
  const K = lib.KIND;
  const wrap = (retries, inner) => "Invalid input, Failed to connect to namespace: IO { source: Generic { store: \"S3\", source: ListRequest { " +
    `source: RetryError(RetryErrorImpl { method: GET, uri: Some(***/bucket?*** retries: ${retries}, max_retries: 3, elapsed: 2.5ms, ` +
    `retry_timeout: 180s, inner: ${inner} }) } }, location: Location { file: "/usr/local/cargo/registry/src/index.crates.io-1949cf8c6b5b557f/lance-io-10.0.0/src/object_store.rs", line: 905, column: 92 }, backtrace: MaybeBacktrace }`;
  const status = (n, code) => `Status { status: ${n}, body: Some("<?xml version=\\"1.0\\"?><Error><Code>${code}</Code><Message>m</Message></Error>") }`;
  const cases = [
    [wrap(0, status(403, "ExpiredToken")), K.CREDENTIAL],
    [wrap(0, status(403, "AccessDenied")), K.CREDENTIAL],
    [wrap(0, "Status { status: 401, body: None }"), K.CREDENTIAL],
    [wrap(0, status(404, "NoSuchKey")), K.NOT_FOUND],
    [wrap(0, status(404, "NoSuchBucket")), K.NOT_FOUND],
    [wrap(0, "Status { status: 404, body: None }"), K.NOT_FOUND],
    [wrap(3, status(500, "InternalError")), K.IO],
    [wrap(3, "Status { status: 503, body: None }"), K.IO],
    [wrap(3, 'Http(HttpError { kind: Connect, source: reqwest::Error { kind: Request, source: hyper_util::client::legacy::Error(Connect, ' +
      'ConnectError("tcp connect error", 127.0.0.1:37909, Os { code: 111, kind: ConnectionRefused, message: "Connection refused" })) } })'), K.IO],
    // Only an IO cause is unwrapped: any other "Invalid input" stays invalid.
    ["Invalid input, Failed to connect to namespace: unknown namespace implementation", K.INVALID],
    ["lance error: Invalid input, num_partitions must be positive", K.INVALID],
  ];
  for (const [msg, want] of cases) assert.equal(lib.classify(msg), want, msg);
  const short = lib.shortMessage(wrap(0, status(403, "ExpiredToken")));
  assert.ok(!short.includes("location") && !short.includes(".rs"), `the Debug-printed source location is dropped: ${short}`);
  assert.match(short, /status: 403, body: .*ExpiredToken.* \} \}\) \} \} \}$/, "the cause is kept");
});

test("sanitizer: storage option values, user info, query strings, signed parts", () => {
  const s = lib.makeSanitizer({ secret: "S3CR3T/val+ue=", endpoint: "http://minio:9000/ep", short: "abc", n: "true" });
  const out = s("GET http://minio:9000/ep/bucket?list-type=2&X-Amz-Signature=abcd in 1ms; key S3CR3T/val+ue= or " +
    encodeURIComponent("S3CR3T/val+ue=") + " at s3://user:pw@bucket/x.lance?sig=zzz Credential=AKIAXX/2026/us-east-1 " +
    "<AWSAccessKeyId>AKIAXX</AWSAccessKeyId> <StringToSign>AWS4 x</StringToSign> abc true");
  for (const leak of ["S3CR3T", encodeURIComponent("S3CR3T/val+ue="), "minio:9000/ep", "list-type", "abcd", "user:pw", "zzz", "AKIAXX", "AWS4 x"]) {
    assert.ok(!out.includes(leak), `${leak} in ${out}`);
  }
  assert.match(out, /abc \*\*\*$/, "values shorter than 4 characters are not searched for; \"true\" (4) is");
  assert.match(out, /s3:\/\/\*\*\*@bucket\/x\.lance\?\*\*\*/);
});

test("shortMessage: first link, no Rust locations, bounded", () => {
  const m = lib.shortMessage("lance error: X happened, /usr/local/cargo/registry/src/lance-8.0.0/src/a.rs:1:2  Caused by: X happened, /b.rs:3:4");
  assert.equal(m, "lance error: X happened");
  const long = lib.shortMessage("é".repeat(2000));
  assert.ok(Buffer.byteLength(long) <= lib.MAX_MESSAGE_BYTES);
  assert.ok(long.endsWith("..."));
  assert.ok(!long.includes("\uFFFD"));
});
