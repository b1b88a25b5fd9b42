// schema.js: a table's top-level schema fields, also where Arrow JS cannot
// decode them. apache-arrow 18 has no LargeList (nor the view types): its
// tableFromIPC throws `Unrecognized type: "LargeList" (21)` for a dataset
// with such a column, so Table.schema() fails. Then the schema is read from
// the IPC buffer LanceDB gives (the Arrow file format: a flatbuffer Footer
// holding the Schema) with Arrow's own generated flatbuffer readers, into
// objects shaped like Arrow JS fields ({name, nullable, type: {typeId, …,
// children}}) so that lib.canonicalField treats both alike.
"use strict";

const path = require("node:path");

let fb = null;

// Arrow's generated readers and the flatbuffers runtime they use (resolved
// from apache-arrow itself, not a dependency of ours).
function readers() {
  if (fb) return fb;
  const fbDir = path.dirname(require.resolve("apache-arrow/fb/footer"));
  const flatbuffers = require(require.resolve("flatbuffers", { paths: [fbDir] }));
  const r = (name) => require(`apache-arrow/fb/${name}`);
  fb = {
    flatbuffers,
    Footer: r("footer").Footer, Message: r("message").Message, Schema: r("schema").Schema,
    MessageHeader: r("message-header").MessageHeader, Type: r("type").Type,
    Int: r("int").Int, FloatingPoint: r("floating-point").FloatingPoint, Date: r("date").Date, Time: r("time").Time,
    Decimal: r("decimal").Decimal, FixedSizeList: r("fixed-size-list").FixedSizeList,
  };
  return fb;
}

const MAGIC = Buffer.from("ARROW1");

// schemaOfIPC finds the flatbuffer Schema in an Arrow IPC buffer: the file
// format (footer) or the stream format (the first message).
function schemaOfIPC(buf) {
  const { flatbuffers, Footer, Message, Schema, MessageHeader } = readers();
  const b = Buffer.from(buf);
  if (b.length >= 2 * MAGIC.length + 4 && b.subarray(0, 6).equals(MAGIC) && b.subarray(b.length - 6).equals(MAGIC)) {
    const len = b.readInt32LE(b.length - 10);
    const start = b.length - 10 - len;
    if (len <= 0 || start < 8) throw new Error("the schema buffer's Arrow footer is malformed");
    const bb = new flatbuffers.ByteBuffer(new Uint8Array(b.subarray(start, start + len)));
    const s = Footer.getRootAsFooter(bb).schema();
    if (!s) throw new Error("the schema buffer's Arrow footer holds no schema");
    return s;
  }
  let off = 0;
  if (b.length >= 8 && b.readUInt32LE(0) === 0xffffffff) off = 4; // continuation marker
  const len = b.readInt32LE(off);
  if (len <= 0 || off + 4 + len > b.length) throw new Error("the schema buffer is not an Arrow IPC message");
  const bb = new flatbuffers.ByteBuffer(new Uint8Array(b.subarray(off + 4, off + 4 + len)));
  const m = Message.getRootAsMessage(bb);
  if (m.headerType() !== MessageHeader.Schema) throw new Error("the schema buffer's first message is not a schema");
  return m.header(new Schema());
}

// fieldOf converts a flatbuffer Field into the Arrow JS field shape that
// lib.canonicalType reads (typeId plus the parameters it names).
function fieldOf(f, depth = 0) {
  const r = readers();
  if (depth > 64) throw new Error("the schema nests too deeply");
  const children = [];
  for (let i = 0; i < f.childrenLength(); i++) children.push(fieldOf(f.children(i), depth + 1));
  const typeId = f.typeType();
  const type = { typeId, children };
  if (f.dictionary()) return { name: f.name(), nullable: f.nullable(), type: { typeId: -1, children: [] } };
  switch (typeId) {
    case r.Type.Int: { const t = f.type(new r.Int()); type.isSigned = t.isSigned(); type.bitWidth = t.bitWidth(); break; }
    case r.Type.FloatingPoint: type.precision = f.type(new r.FloatingPoint()).precision(); break;
    case r.Type.Date: type.unit = f.type(new r.Date()).unit(); break;
    case r.Type.Time: type.bitWidth = f.type(new r.Time()).bitWidth(); break;
    case r.Type.Decimal: type.bitWidth = f.type(new r.Decimal()).bitWidth(); break;
    case r.Type.FixedSizeList: type.listSize = f.type(new r.FixedSizeList()).listSize(); break;
    default: break;
  }
  return { name: f.name(), nullable: f.nullable(), type };
}

// decodeSchemaFields reads the top-level fields of an Arrow IPC schema buffer.
function decodeSchemaFields(buf) {
  const s = schemaOfIPC(buf);
  const out = [];
  for (let i = 0; i < s.fieldsLength(); i++) out.push(fieldOf(s.fields(i)));
  return out;
}

// readSchemaFields returns the table's top-level fields: Arrow JS's own
// decoding when it can, else decodeSchemaFields of the raw schema buffer.
async function readSchemaFields(tbl) {
  try {
    return (await tbl.schema()).fields;
  } catch (e) {
    const msg = e && typeof e.message === "string" ? e.message : "";
    if (!/^Unrecognized type/.test(msg) || !tbl.inner || typeof tbl.inner.schema !== "function") throw e;
    return decodeSchemaFields(await tbl.inner.schema());
  }
}

module.exports = { decodeSchemaFields, readSchemaFields };
