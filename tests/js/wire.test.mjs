// A payload as the page carries it (nbprof/views/js/wire.mjs): base64 of "NBPK", the part
// lengths and the parts, each deflated as Python's zlib.compress writes it.
import assert from "node:assert/strict";
import test from "node:test";
import { deflateSync } from "node:zlib";
import * as wire from "../../nbprof/views/js/wire.mjs";

function pack(header, columns) {
  const parts = [Buffer.from(JSON.stringify(header)), ...columns].map((b) => deflateSync(b));
  const head = Buffer.alloc(8 + 4 * parts.length);
  head.write("NBPK", 0, "latin1");
  head.writeUInt32LE(parts.length, 4);
  parts.forEach((p, k) => head.writeUInt32LE(p.length, 8 + 4 * k));
  return Buffer.concat([head, ...parts]).toString("base64");
}

test("unpack gives the header with each column's bytes beside it", async () => {
  const bytes = Buffer.from(Uint16Array.from([5, 6, 7]).buffer);
  const text = pack({ meta: { events: { a: { dtype: "uint16", length: 3, part: 1 } } },
    name: "x" }, [bytes]);
  const h = await wire.unpack(text);
  assert.equal(h.name, "x");
  assert.deepEqual(Array.from(h.meta.events.a.bytes), Array.from(bytes));
});

test("a text that is not a pack, or a part it lacks, is refused", async () => {
  await assert.rejects(wire.unpack(Buffer.from("JSON{}").toString("base64")), /not an nbprof/);
  const bad = pack({ c: { dtype: "uint8", length: 1, part: 2 } }, [Buffer.from([1])]);
  await assert.rejects(wire.unpack(bad), /names part 2 of 2/);
});

test("byte planes go back to values", () => {
  // 0x0102, 0x0304 little-endian: bytes 02 01 04 03; as planes 02 04 01 03.
  const out = wire.unshuffle(Uint8Array.from([2, 4, 1, 3]), 2);
  assert.deepEqual(Array.from(out), [2, 1, 4, 3]);
  assert.deepEqual(Array.from(wire.unshuffle(Uint8Array.from([9, 8]), 1)), [9, 8]);
});
