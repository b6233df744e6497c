/*
 * nbprof front end: a payload as it travels in the page (nbprof/views/timeline/wire.py).
 *
 * The base64 of "NBPK", a uint32 count n, n uint32 part lengths, then the n parts, each
 * deflated: part 0 the header (JSON), the others the columns it names ({part: k}).
 * `unpack` gives the header with each column's bytes inflated beside it (col.bytes).
 */

const MAGIC = "NBPK";

const NO_INFLATE =
  "this browser cannot unpack the timeline's data: it needs DecompressionStream " +
  "(Chrome 80, Firefox 113, Safari 16.4 or newer)";

/** The bytes of base64 `text`. */
export function fromBase64(text) {
  const bin = atob(text);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

/** The bytes of a zlib stream (what Python's zlib.compress writes). */
export async function inflate(bytes) {
  if (typeof DecompressionStream !== "function") throw new Error(NO_INFLATE);
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate"));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

/** The parts of a pack's bytes, still deflated. */
export function parts(bytes) {
  const magic = String.fromCharCode(...bytes.subarray(0, 4));
  if (magic !== MAGIC) throw new Error("the timeline's data is not an nbprof pack");
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const n = view.getUint32(4, true);
  const out = [];
  let at = 8 + 4 * n;
  for (let k = 0; k < n; k++) {
    const size = view.getUint32(8 + 4 * k, true);
    if (at + size > bytes.length) throw new Error("the timeline's data is cut short");
    out.push(bytes.subarray(at, at + size));
    at += size;
  }
  return out;
}

/** Every column ({dtype, length, part}) in `value`, a JSON tree. */
function columns(value, out) {
  if (value === null || typeof value !== "object") return out;
  if (Array.isArray(value)) {
    for (const v of value) columns(v, out);
  } else if (typeof value.part === "number" && typeof value.dtype === "string") {
    out.push(value);
  } else {
    for (const v of Object.values(value)) columns(v, out);
  }
  return out;
}

/** The header of pack `text`, each column in it holding its inflated bytes (col.bytes). */
export async function unpack(text) {
  const raw = await Promise.all(parts(fromBase64(text.trim())).map(inflate));
  const header = JSON.parse(new TextDecoder().decode(raw[0]));
  for (const col of columns(header, [])) {
    if (!(col.part > 0 && col.part < raw.length)) {
      throw new Error("a column names part " + col.part + " of " + raw.length);
    }
    col.bytes = raw[col.part];
  }
  return header;
}

/** Byte planes (every value's first byte, then every second byte, ...) put back. */
export function unshuffle(bytes, itemsize) {
  if (itemsize === 1) return bytes;
  const n = bytes.length / itemsize;
  const out = new Uint8Array(bytes.length);
  for (let b = 0; b < itemsize; b++) {
    const plane = b * n;
    for (let i = 0; i < n; i++) out[i * itemsize + b] = bytes[plane + i];
  }
  return out;
}
