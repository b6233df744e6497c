/*
 * nbprof timeline: clicking an event pins it, with its launch <-> kernel link. Pure.
 */
import { empty, eventValue } from "./fields.mjs";
import { laneOf, lower } from "./lod.mjs";
import { around } from "./range.mjs";

/**
 * The event under time `t` on row `r` of `layout` (any of its lanes, when it is a folded
 * rank): the shortest one containing t, else the nearest within `tol` µs, else -1.
 */
export function hit(m, layout, t, r, tol) {
  const row = layout.rows[r];
  if (!row) return -1;
  const { x, d } = m;
  const off = m.tdoc.offsets;
  let best = -1;
  let bestScore = Infinity;
  for (const l of row.lanes) {
    const a = lower(x, off[l], off[l + 1], t - m.tdoc.maxdur[l] - tol);
    const b = lower(x, a, off[l + 1], t + tol + 1e-9);
    for (let i = a; i < b; i++) {
      const dist = t < x[i] ? x[i] - t : t > x[i] + d[i] ? t - x[i] - d[i] : 0;
      const score = dist > 0 ? dist + 1e12 : d[i];
      if (dist <= tol && score < bestScore) {
        bestScore = score;
        best = i;
      }
    }
  }
  return best;
}

/**
 * What a person reads an event by: every value of its signature and the derived ones
 * (fields.mjs), its lane index `li` and the row it is drawn on.
 */
export function eventInfo(m, layout, i) {
  const l = laneOf(m.tdoc.offsets, i);
  const names = ["i", "start", "end", "dur", "kind", "tip", "lane", ...Object.keys(m.S)];
  const info = { li: l, row: layout.laneRow[l] };
  for (const n of names) info[n] = eventValue(n, m.S)(m, i, l);
  return info;
}

/** The partner of event i (a kernel's launch call, a launch's kernel), or -1. */
export function partnerOf(m, i) {
  return i >= 0 && m.link[i] >= 0 ? m.link[i] : -1;
}

/**
 * The outlines of pinned event i and its partner, and the line from the launch call's
 * start to its GPU event's start: columns of tdoc.sources.pinned and .link.
 */
export function pinShapes(m, layout, i) {
  const src = m.tdoc.sources;
  const pinned = empty(src.pinned.columns);
  const link = empty(src.link.columns);
  if (i < 0) return { pinned, link };
  const rowOf = (e) => layout.laneRow[laneOf(m.tdoc.offsets, e)];
  const outline = (e) => {
    const y = rowOf(e);
    pinned.left.push(m.x[e]); pinned.right.push(m.x[e] + m.d[e]);
    pinned.bottom.push(y - 0.5); pinned.top.push(y + 0.5);
  };
  outline(i);
  const p = partnerOf(m, i);
  if (p >= 0) {
    outline(p);
    const launchFirst = eventValue("tip", m.S)(m, i) === "runtime";
    const [launch, gpu] = launchFirst ? [i, p] : [p, i];
    link.x0.push(m.x[launch]); link.y0.push(rowOf(launch));
    link.x1.push(m.x[gpu]); link.y1.push(rowOf(gpu));
  }
  return { pinned, link };
}

/** The window showing event i, and its partner when it has one. */
export function windowOf(m, i, limits) {
  let s = m.x[i];
  let e = m.x[i] + m.d[i];
  const p = partnerOf(m, i);
  if (p >= 0) {
    s = Math.min(s, m.x[p]);
    e = Math.max(e, m.x[p] + m.d[p]);
  }
  return around(s, e, limits);
}
