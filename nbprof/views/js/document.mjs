/*
 * nbprof timeline: reading the timeline document (nbprof/views/timeline/document.py).
 *
 * A column is {dtype, length, part[, shuffle][, labels]}, its bytes inflated beside it by
 * wire.mjs unpack (col.bytes): its little-endian values, as byte planes when shuffled;
 * with labels, the values are codes into them (text). `open` turns a document into the
 * model every other module draws from: the events' start and duration (µs since the
 * first event), signature and link arrays, the signature table S, the idle gaps G.
 */
import { decode, decodeGaps, decodeLinks } from "./lod.mjs";
import { unshuffle } from "./wire.mjs";

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

/** A column's values: a typed array, or an array of strings for a text column. */
export function decodeColumn(col) {
  const Type = ARRAYS[col.dtype];
  if (!Type) throw new Error("unknown column type " + col.dtype);
  if (!(col.bytes instanceof Uint8Array)) throw new Error("a column came without its bytes");
  if (col.bytes.length !== col.length * Type.BYTES_PER_ELEMENT) {
    throw new Error("a column holds " + col.bytes.length + " bytes, not " + col.length +
      " values");
  }
  const raw = col.shuffle ? unshuffle(col.bytes, Type.BYTES_PER_ELEMENT) : col.bytes;
  // A fresh buffer when it is not aligned for the type (a slice of the pack's bytes).
  const bytes = raw.byteOffset % Type.BYTES_PER_ELEMENT ? raw.slice() : raw;
  // Little-endian on the wire; every browser nbprof runs in is little-endian too.
  const values = new Type(bytes.buffer, bytes.byteOffset, col.length);
  if (!("labels" in col)) return values;
  const labels = col.labels;
  return Array.from(values, (c) => labels[c]);
}

/** Every column of a table, decoded. */
export function decodeTable(table) {
  const out = {};
  for (const n of Object.keys(table)) out[n] = decodeColumn(table[n]);
  return out;
}

/** The model of a timeline document. */
export async function open(tdoc) {
  if (tdoc.schema !== SCHEMA) {
    throw new Error("timeline document " + tdoc.schema + " is not " + SCHEMA +
      ": the page's nbprof scripts and its data come from different nbprof versions");
  }
  const [ev, S, gaps] = [tdoc.events, tdoc.sigs, tdoc.gaps].map(decodeTable);
  const { x, d } = decode(ev.dx, ev.dd, tdoc.offsets, tdoc.tick);
  return { tdoc, x, d, sig: ev.sig, link: decodeLinks(ev.dl, tdoc.offsets), S,
    G: decodeGaps(gaps, tdoc.tick) };
}
