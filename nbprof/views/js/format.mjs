/*
 * nbprof front end: how times and labels read. Pure functions: no DOM, no Bokeh.
 */

/** A duration or time in µs, in the unit a person reads best (axis ticks, details). */
export function fmtTime(us) {
  const a = Math.abs(us);
  const trim = (v) => v.toPrecision(4).replace(/\.?0+$/, "");
  if (a >= 1e6) return trim(us / 1e6) + " s";
  if (a >= 1e3) return trim(us / 1e3) + " ms";
  if (a > 0 && a < 1) return trim(us * 1e3) + " ns";
  return trim(us) + " µs";
}

/**
 * Text that fits a bar `px` wide at about `charPx` per character, or "" when not even
 * a few characters fit (a label is never wider than its bar).
 */
export function fitLabel(text, px, charPx) {
  const n = Math.floor((px - 6) / (charPx || 6.5));
  if (n < 4) return "";
  const s = String(text);
  return s.length <= n ? s : s.slice(0, n - 1) + "…";
}

/** A count as the page writes it: 12,345. */
export function fmtCount(n) {
  return n.toLocaleString("en-US");
}
