/*
 * nbprof timeline: reading the timeline document (nbprof/views/timeline/document.py).
 *
 * A column is {dtype, length, deflate[, labels]}: its little-endian values, deflated, in
 * base64; with labels, the values are codes into them (text). `open` turns a document
 * into the model every other module draws from: the events' start and duration (µs since
 * the first event), signature and link arrays, the signature table S, the idle gaps G.
 */
import { decode, decodeGaps, decodeLinks } from "./lod.mjs";

/** The document format this code reads (document.py SCHEMA). */
export const SCHEMA = "nbprof.timeline/1";

const ARRAYS = {
  uint8: Uint8Array,
  uint16: Uint16Array,
  uint32: Uint32Array,
  int8: Int8Array,
  int16: Int16Array,
  int32: Int32Array,
  float32: Float32Array,
  float64: Float64Array,
};

const NO_INFLATE =
  "this browser cannot unpack the timeline's data: it needs DecompressionStream " +
  "(Chrome 80, Firefox 113, Safari 16.4 or newer)";

function fromBase64(text) {
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

/** A column's values: a typed array, or an array of strings for a text column. */
export async function decodeColumn(col) {
  const Type = ARRAYS[col.dtype];
  if (!Type) throw new Error("unknown column type " + col.dtype);
  const bytes = await inflate(fromBase64(col.deflate));
  if (bytes.length !== col.length * Type.BYTES_PER_ELEMENT) {
    throw new Error("a column holds " + bytes.length + " bytes, not " + col.length + " values");
  }
  // Little-endian on the wire; every browser nbprof runs in is little-endian too.
  const values = new Type(bytes.buffer, bytes.byteOffset, col.length);
  if (!("labels" in col)) return values;
  const labels = col.labels;
  return Array.from(values, (c) => labels[c]);
}

/** Every column of a table, decoded. */
export async function decodeTable(table) {
  const names = Object.keys(table);
  const cols = await Promise.all(names.map((n) => decodeColumn(table[n])));
  const out = {};
  names.forEach((n, k) => { out[n] = cols[k]; });
  return out;
}

/** The model of a timeline document. */
export async function open(tdoc) {
  if (tdoc.schema !== SCHEMA) {
    throw new Error("timeline document " + tdoc.schema + " is not " + SCHEMA +
      ": the page's nbprof scripts and its data come from different nbprof versions");
  }
  const [ev, S, gaps] = await Promise.all([tdoc.events, tdoc.sigs, tdoc.gaps].map(decodeTable));
  const { x, d } = decode(ev.dx, ev.dd, tdoc.offsets, tdoc.tick);
  return { tdoc, x, d, sig: ev.sig, link: decodeLinks(ev.dl, tdoc.offsets), S,
    G: decodeGaps(gaps, tdoc.tick) };
}
