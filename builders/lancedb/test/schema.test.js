// schema.js: the flatbuffer decoding of a table's schema agrees with Arrow
// JS for every column kind Arrow JS can decode, and reads large_list.
"use strict";

const test = require("node:test");
const assert = require("node:assert/strict");
const fs = require("node:fs");
const path = require("node:path");
const h = require("../harness.js");
const lib = require("../lib.js");
const schema = require("../schema.js");

process.env.LANCEDB_LOG = process.env.LANCEDB_LOG || "error";
const lancedb = require("@lancedb/lancedb");
const arrow = require("apache-arrow");

test("schema: the flatbuffer path gives what Arrow JS gives; large_list only the former can read", async () => {
  const root = h.tmpDir("lm-schema-");
  try {
    h.makeDataset(root, "items", { rows: 50, dim: 4, extra: true });
    const db = await lancedb.connect(root);
    const t = await db.openTable("items");
    // More kinds, through LanceDB's SQL: int64, float64, bool, date, timestamp, large_utf8, struct.
    await t.addColumns([
      { name: "i64", valueSql: "cast(id as bigint)" }, { name: "f64", valueSql: "cast(id as double)" },
      { name: "flag", valueSql: "id % 2 = 0" }, { name: "day", valueSql: "cast('2026-01-01' as date)" },
      { name: "ts", valueSql: "cast('2026-01-01T00:00:00' as timestamp)" }, { name: "big", valueSql: "arrow_cast(text, 'LargeUtf8')" },
      { name: "st", valueSql: "named_struct('a', id, 'b', text)" }, { name: "u16", valueSql: "arrow_cast(id, 'UInt16')" },
    ]);
    const canon = (fields) => fields.map((f, i) => lib.canonicalField(f, i));
    const viaArrow = canon((await t.schema()).fields);
    const viaFlatbuffer = canon(schema.decodeSchemaFields(await t.inner.schema()));
    assert.deepEqual(viaFlatbuffer, viaArrow);
    assert.deepEqual(viaArrow.slice(5).map((f) => f.data_type),
      ["int64", "float64", "bool", "date32", "timestamp", "large_utf8", "struct", "uint16"]);

    await t.addColumns([{ name: "tags", valueSql: "arrow_cast(make_array(id, id), 'LargeList(Int32)')" }]);
    await assert.rejects(() => t.schema(), /Unrecognized type/);
    const fields = canon(await schema.readSchemaFields(t));
    assert.deepEqual(fields.slice(0, viaArrow.length), viaArrow);
    assert.deepEqual(fields.at(-1), { field_id: viaArrow.length, name: "tags", data_type: "large_list", nullable: true,
      element_type: "int32", element_nullable: true });
    t.close();
    // A buffer that is no Arrow IPC is refused, not misread.
    assert.throws(() => schema.decodeSchemaFields(Buffer.from("not arrow at all")));
    // The stream format is read too.
    const tbl = new arrow.Table({ a: arrow.vectorFromArray([1, 2], new arrow.Int16()) });
    const stream = arrow.tableToIPC(tbl, "stream");
    assert.deepEqual(canon(schema.decodeSchemaFields(stream)), [{ field_id: 0, name: "a", data_type: "int16", nullable: true }]);
  } finally {
    fs.rmSync(root, { recursive: true, force: true });
  }
});
