// Reading the timeline document (nbprof/views/js/document.mjs): deflated base64 columns,
// as Python's zlib.compress writes them (node's zlib writes the same format).
import assert from "node:assert/strict";
import test from "node:test";
import { deflateSync } from "node:zlib";
import * as doc from "../../nbprof/views/js/document.mjs";
import { tdoc } from "./fixture.mjs";

function column(typed, labels) {
  const bytes = Buffer.from(typed.buffer, typed.byteOffset, typed.byteLength);
  const col = { dtype: typed.constructor.name.replace("Array", "").toLowerCase(),
    length: typed.length, deflate: deflateSync(bytes).toString("base64") };
  return labels ? { ...col, labels } : col;
}

test("a column comes back as the typed array it was", async () => {
  const v = await doc.decodeColumn(column(Uint32Array.from([0, 7, 4294967295])));
  assert.ok(v instanceof Uint32Array);
  assert.deepEqual(Array.from(v), [0, 7, 4294967295]);
  const f = await doc.decodeColumn(column(Float64Array.from([1.5, NaN])));
  assert.ok(Number.isNaN(f[1]) && f[0] === 1.5);
});

test("a text column is codes into its distinct values", async () => {
  const v = await doc.decodeColumn(column(Uint8Array.from([1, 0, 1]), ["aten::mm", "gemm"]));
  assert.deepEqual(v, ["gemm", "aten::mm", "gemm"]);
});

test("a column whose bytes disagree with its length, or an unknown type, fails", async () => {
  const c = column(Uint16Array.from([1, 2]));
  await assert.rejects(doc.decodeColumn({ ...c, length: 3 }), /4 bytes, not 3 values/);
  await assert.rejects(doc.decodeColumn({ ...c, dtype: "int64" }), /unknown column type/);
});

test("open decodes events, signatures and gaps into the model", async () => {
  const t = tdoc({
    events: { dx: column(Uint32Array.from([1000, 5000, 15000])),
      dd: column(Uint32Array.from([2000, 10000, 1000])),
      sig: column(Uint16Array.from([0, 1, 2])),
      dl: column(Int32Array.from([1, -2147483648, 0])) },
    sigs: { cls: column(Uint8Array.from([0, 1, 2])),
      name: column(Uint8Array.from([0, 1, 1]), ["a", "b"]) },
    gaps: { dx: column(Uint32Array.from([15000])), dd: column(Uint32Array.from([5000])),
      li: column(Uint16Array.from([1])), cause: column(Uint8Array.from([0])),
      cpu: column(Uint16Array.from([0])) },
  });
  const m = await doc.open(t);
  assert.deepEqual(Array.from(m.x), [1, 5, 20]);
  assert.deepEqual(Array.from(m.d), [2, 10, 1]);
  assert.deepEqual(Array.from(m.link), [1, -1, 0]);
  assert.deepEqual(m.S.name, ["a", "b", "b"]);
  assert.deepEqual([m.G.left[0], m.G.right[0]], [15, 20]);
  assert.equal(m.tdoc, t);
});

test("a document of another format is refused, saying why", async () => {
  await assert.rejects(doc.open(tdoc({ schema: "nbprof.timeline/2" })),
    /nbprof.timeline\/2 is not nbprof.timeline\/1/);
});
