// Reading the timeline document (nbprof/views/js/document.mjs): typed columns whose bytes
// wire.mjs unpacked beside them (col.bytes), as byte planes when shuffled.
import assert from "node:assert/strict";
import test from "node:test";
import * as doc from "../../nbprof/views/js/document.mjs";
import { tdoc } from "./fixture.mjs";

function planes(bytes, k) {
  const n = bytes.length / k;
  const out = new Uint8Array(bytes.length);
  for (let i = 0; i < n; i++) for (let b = 0; b < k; b++) out[b * n + i] = bytes[i * k + b];
  return out;
}

function column(typed, labels, shuffle) {
  const bytes = new Uint8Array(typed.buffer, typed.byteOffset, typed.byteLength).slice();
  const col = { dtype: typed.constructor.name.replace("Array", "").toLowerCase(),
    length: typed.length, part: 1, shuffle: shuffle ? 1 : 0,
    bytes: shuffle ? planes(bytes, typed.BYTES_PER_ELEMENT) : bytes };
  return labels ? { ...col, labels } : col;
}

test("a column comes back as the typed array it was, shuffled or not", () => {
  for (const shuffle of [false, true]) {
    const v = doc.decodeColumn(column(Uint32Array.from([0, 7, 4294967295]), null, shuffle));
    assert.ok(v instanceof Uint32Array);
    assert.deepEqual(Array.from(v), [0, 7, 4294967295]);
    const f = doc.decodeColumn(column(Float64Array.from([1.5, NaN]), null, shuffle));
    assert.ok(Number.isNaN(f[1]) && f[0] === 1.5);
  }
});

test("a column whose bytes start off its type's alignment still decodes", () => {
  const c = column(Uint16Array.from([258, 3]));
  const padded = new Uint8Array(5);
  padded.set(c.bytes, 1);
  assert.deepEqual(Array.from(doc.decodeColumn({ ...c, bytes: padded.subarray(1) })), [258, 3]);
});

test("a text column is codes into its distinct values", () => {
  const v = doc.decodeColumn(column(Uint8Array.from([1, 0, 1]), ["aten::mm", "gemm"]));
  assert.deepEqual(v, ["gemm", "aten::mm", "gemm"]);
});

test("a column whose bytes disagree with its length, or an unknown type, fails", () => {
  const c = column(Uint16Array.from([1, 2]));
  assert.throws(() => doc.decodeColumn({ ...c, length: 3 }), /4 bytes, not 3 values/);
  assert.throws(() => doc.decodeColumn({ ...c, dtype: "int64" }), /unknown column type/);
  assert.throws(() => doc.decodeColumn({ ...c, bytes: undefined }), /without its bytes/);
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
