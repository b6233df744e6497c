/*
 * nbprof timeline: moving the visible window (keys, search, zoom to an event). Pure.
 */

/** The smallest window a timeline zooms to, in µs (the x range's min_interval). */
export const MIN_INTERVAL = 1e-3;

/** [s, e] moved inside `limits` ([lo, hi]) without changing its width where it fits. */
export function clampRange(s, e, limits) {
  if (!limits) return [s, e];
  const w = e - s;
  if (s < limits[0]) {
    s = limits[0];
    e = s + w;
  }
  if (e > limits[1]) {
    e = limits[1];
    s = Math.max(limits[0], e - w);
  }
  return [s, e];
}

/**
 * The x range after a zoom by `factor` (< 1 zooms in) about `anchor`, kept within `limits`
 * and no narrower than `minInterval`.
 */
export function zoomRange(start, end, anchor, factor, limits, minInterval) {
  const span = end - start;
  let w = Math.max(span * factor, minInterval || 0);
  if (limits) w = Math.min(w, limits[1] - limits[0]);
  const f = span > 0 ? (anchor - start) / span : 0.5;
  const s = anchor - f * w;
  return clampRange(s, s + w, limits);
}

/** The x range moved by `frac` of its width (negative: to the left), within `limits`. */
export function panRange(start, end, frac, limits) {
  const dx = (end - start) * frac;
  return clampRange(start + dx, end + dx, limits);
}

/** A window around [s, e] three times as wide, centred on it, within `limits`. */
export function around(s, e, limits) {
  const w = Math.max(e - s, MIN_INTERVAL);
  return zoomRange(s - w, e + w, (s + e) / 2, 1, limits, MIN_INTERVAL);
}
