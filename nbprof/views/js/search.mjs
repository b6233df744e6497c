/*
 * nbprof timeline: search events by name. Pure functions: no DOM, no Bokeh.
 *
 * A query marks signatures (names are per signature, so a million events are searched
 * through their few thousand distinct names); the matches are the events of marked
 * signatures, visited in time order.
 */
import { fmtCount } from "./format.mjs";
import { MIN_INTERVAL, zoomRange } from "./range.mjs";

/**
 * Signatures whose name contains `query` (case-insensitive), as a 0/1 array; a query in
 * slashes (/gemm|conv/i) is a regular expression. An empty or invalid query marks none.
 */
export function matchSigs(names, query) {
  const mark = new Uint8Array(names.length);
  const q = (query || "").trim();
  if (!q) return mark;
  let test;
  const re = /^\/(.+)\/([a-z]*)$/.exec(q);
  if (re) {
    try {
      const r = new RegExp(re[1], re[2].includes("i") ? re[2] : re[2] + "i");
      test = (s) => r.test(s);
    } catch (e) {
      return mark;
    }
  } else {
    const lq = q.toLowerCase();
    test = (s) => s.toLowerCase().includes(lq);
  }
  for (let i = 0; i < names.length; i++) if (test(String(names[i]))) mark[i] = 1;
  return mark;
}

/** Signatures whose name is exactly `name` (a row of the top-kernels table). */
export function exactSigs(names, name) {
  const mark = new Uint8Array(names.length);
  for (let s = 0; s < names.length; s++) if (names[s] === name) mark[s] = 1;
  return mark;
}

/** Events whose signature is marked, in (lane, start) order. */
export function markedEvents(sig, mark) {
  const out = [];
  for (let i = 0; i < sig.length; i++) if (mark[sig[i]]) out.push(i);
  return out;
}

/** The events of marked signatures in time order, whatever their lane. */
export function matchesInTime(x, sig, mark) {
  return markedEvents(sig, mark).sort((a, b) => x[a] - x[b]);
}

/** What the count beside the search box says for `n` matches of `query`. */
export function countText(query, n) {
  if (!query) return "";
  return n === 0 ? "no match" : n === 1 ? "1 match" : fmtCount(n) + " matches";
}

/** The count while stepping: match `cursor` (0-based) of `n`. */
export function cursorText(cursor, n) {
  return fmtCount(cursor + 1) + " of " + fmtCount(n);
}

/** The next match after `cursor` in direction `dir` (+1, -1), wrapping around. */
export function stepCursor(cursor, dir, n) {
  return n ? (cursor + dir + n) % n : -1;
}

/**
 * The window that shows match [x, x + d] of a view [start, end] within `limits`: the
 * same zoom when the event is readable at it (at least 1/200 of the view), else 50x its
 * duration, centred on it.
 */
export function windowFor(x, d, start, end, limits) {
  const w = end - start;
  const want = w > 200 * Math.max(d, MIN_INTERVAL) ? Math.max(50 * d, 1) : w;
  const mid = x + d / 2;
  return zoomRange(mid - want / 2, mid + want / 2, mid, 1, limits, MIN_INTERVAL);
}
