/*
 * nbprof timeline: what to draw for a window. Pure functions from the model (document.mjs
 * open) to the columns of every source the browser fills, named as the timeline document
 * says (tdoc.sources).
 */
import { fitLabel } from "./format.mjs";
import { aggregate, binCount, binner, bounds, clipGaps, exact, noBins } from "./lod.mjs";
import { binValue, empty, eventValue, filler, gapValue } from "./fields.mjs";

/** Columns a glyph's caller computes itself (its geometry and colour). */
const OWN = ["left", "right", "bottom", "top", "color"];
/** A bar gets a label once it is this many pixels wide; labels drawn at most. */
export const LABEL_MIN_PX = 48;
export const LABELS_MAX = 400;
/**
 * An event narrower than this on screen is not drawn as its own bar but summed into
 * one-pixel bins with the other narrow events of its lane, each bin coloured by the class
 * that took most of its time and as tall as the share of it that was busy. Drawn one by
 * one, a thousand 0.3 px kernels would each paint at least an antialiased pixel, the
 * last drawn on top, whatever their share of the time.
 */
export const EXACT_MIN_PX = 2;
/** An event alone in its few pixels is drawn as itself, at least this wide (px). */
export const HAIRLINE_PX = 1;

function detailKinds(tdoc) {
  return Object.keys(tdoc.sources.detail);
}

/**
 * What to draw for the window [x0, x1] of a plot area `width` px wide, on the rows of
 * `layout` (fold.mjs): the exact events per hover kind when at most `cap` may be in view
 * (those narrower than EXACT_MIN_PX summed into one-pixel aggregate bars, unless alone
 * in their few pixels: then drawn HAIRLINE_PX wide at least), else
 * aggregate bars, each as tall as its bin was busy; search marks (`mark` flags
 * signatures); the hoverable pieces of idle gaps; bar and gap labels. Returns {mode,
 * detail: {kind: columns}, agg, marks, gapHover, barLabels, gapLabels}.
 */
export function draw(m, x0, x1, width, mark, layout) {
  const { tdoc, x, d, sig, S, G } = m;
  const off = tdoc.offsets;
  const half = tdoc.bar / 2;
  const Y = layout.laneRow;
  const out = { mode: "", detail: {}, agg: empty(tdoc.sources.aggregate.columns),
    marks: empty(tdoc.sources.marks.columns),
    gapHover: empty(tdoc.sources.gap_hover.columns),
    barLabels: empty(tdoc.sources.bar_labels.columns),
    gapLabels: empty(tdoc.sources.gap_labels.columns) };
  for (const k of detailKinds(tdoc)) out.detail[k] = empty(tdoc.sources.detail[k].columns);
  const M = out.marks;
  const mark4 = (l, r, y) => {
    M.left.push(l); M.right.push(r); M.bottom.push(y - half); M.top.push(y + half);
  };

  const b = bounds(x, off, tdoc.maxdur, x0, x1);
  const pxPerUs = width / Math.max(x1 - x0, 1e-9);
  const drawn = { left: [], right: [], lane: [] };
  const nClasses = tdoc.colors.length;
  const bars = (a, c) => {
    const fill = filler(tdoc.sources.aggregate.columns, OWN, binValue);
    for (let j = 0; j < a.lane.length; j++) {
      const l = a.lane[j];
      const y = Y[l];
      if (y < 0) continue;
      c.left.push(a.left[j]); c.right.push(a.right[j]); c.bottom.push(y - half);
      c.top.push(y - half + tdoc.bar * a.busy[j]);
      c.color.push(tdoc.colors[a.cls[j]]);
      fill(c, m, a, j);
      if (a.marked[j]) mark4(a.left[j], a.right[j], y);
      drawn.left.push(a.left[j]); drawn.right.push(a.right[j]); drawn.lane.push(l);
    }
  };
  if (b.total <= tdoc.cap) {
    out.mode = "exact";
    const ex = exact(x, d, b, x0);
    const fill = {};
    for (const k of detailKinds(tdoc)) {
      fill[k] = filler(tdoc.sources.detail[k].columns, OWN, (c) => eventValue(c, S));
    }
    const lab = out.barLabels;
    const narrow = binner(nClasses, x0, x1, Math.max(1, Math.round(width)));
    const bins = noBins();
    const near = EXACT_MIN_PX / pxPerUs;
    const hair = HAIRLINE_PX / pxPerUs;
    let lane = -1;
    for (let j = 0; j < ex.idx.length; j++) {
      const i = ex.idx[j];
      const l = ex.lanes[j];
      const y = Y[l];
      if (y < 0) continue; // a folded rank's lane that its row does not show
      const s = sig[i];
      const k = S.cls[s];
      const e = x[i] + d[i];
      const vis = (Math.min(e, x1) - Math.max(x[i], x0)) * pxPerUs;
      // ex lists each lane's events by start: its neighbours on screen are j - 1, j + 1.
      const alone = vis < EXACT_MIN_PX
        && !(j > 0 && ex.lanes[j - 1] === l && x[ex.idx[j - 1]] + d[ex.idx[j - 1]] > x[i] - near)
        && !(j + 1 < ex.idx.length && ex.lanes[j + 1] === l && x[ex.idx[j + 1]] < e + near);
      if (vis < EXACT_MIN_PX && !alone) {
        if (l !== lane) {
          narrow.emit(lane, bins);
          lane = l;
        }
        narrow.add(x[i], e, k, 0);
        if (mark && mark[s]) mark4(x[i], e, y);
        continue;
      }
      const kind = tdoc.tips[k];
      const c = out.detail[kind];
      const r = alone ? Math.max(e, x[i] + hair) : e;
      c.left.push(x[i]); c.right.push(r); c.bottom.push(y - half); c.top.push(y + half);
      c.color.push(tdoc.colors[k]);
      fill[kind](c, m, i, l);
      if (mark && mark[s]) mark4(x[i], e, y);
      drawn.left.push(x[i]); drawn.right.push(r); drawn.lane.push(l);
      // No labels on a folded row: its streams' bars overlap, and so would their labels.
      if (vis >= LABEL_MIN_PX && lab.x.length < LABELS_MAX && !layout.merged[l]) {
        const t = fitLabel(S.short[s], vis);
        if (t) { lab.x.push(Math.max(x[i], x0)); lab.y.push(y); lab.text.push(t); }
      }
    }
    narrow.emit(lane, bins);
    bars(bins, out.agg);
  } else {
    out.mode = "aggregate";
    // Bins no narrower than a pixel: a narrower one would only blend into its neighbours.
    const nb = Math.min(binCount(off.length - 1, tdoc.agg_cap, tdoc.max_bins),
      Math.max(1, Math.round(width)));
    bars(aggregate(x, d, sig, S.cls, nClasses, b, x0, x1, nb, mark), out.agg);
  }
  // A folded rank's row holds all its streams: one stream's idle gap is not the rank's.
  const pieces = clipGaps(G.left, G.right, G.li, drawn.left, drawn.right, drawn.lane)
    .filter((p) => !layout.merged[G.li[p.gap]] && Y[G.li[p.gap]] >= 0);
  const gh = out.gapHover;
  const fillGap = filler(tdoc.sources.gap_hover.columns, OWN, gapValue);
  for (const p of pieces) {
    const y = Y[G.li[p.gap]];
    gh.left.push(p.left); gh.right.push(p.right); gh.bottom.push(y - 0.5);
    gh.top.push(y + 0.5);
    fillGap(gh, m, p.gap);
  }
  // A label on each gap piece wide enough on screen to hold one.
  const gl = out.gapLabels;
  for (const p of pieces) {
    if (gl.x.length >= LABELS_MAX) break;
    const px = (Math.min(p.right, x1) - Math.max(p.left, x0)) * pxPerUs;
    if (px < 2 * LABEL_MIN_PX) continue;
    const t = fitLabel(tdoc.gap_labels[G.cause[p.gap]], px);
    if (!t) continue;
    gl.x.push((Math.max(p.left, x0) + Math.min(p.right, x1)) / 2);
    gl.y.push(Y[G.li[p.gap]]);
    gl.text.push(t);
  }
  return out;
}

/** The idle-gap shading per cause: it depends on the rows, not on the zoom. */
export function gapShading(m, layout) {
  const { tdoc, G } = m;
  const Y = layout.laneRow;
  const out = {};
  tdoc.gap_causes.forEach((cause, c) => {
    const o = empty(tdoc.sources.gap_shading[cause].columns);
    for (let g = 0; g < G.left.length; g++) {
      const l = G.li[g];
      if (G.cause[g] !== c || layout.merged[l] || Y[l] < 0) continue;
      o.left.push(G.left[g]); o.right.push(G.right[g]); o.bottom.push(Y[l] - 0.5);
      o.top.push(Y[l] + 0.5);
    }
    out[cause] = o;
  });
  return out;
}

/** The overview strip: the whole run [full[0], full[1]] aggregated, one row per lane. */
export function overview(m, full) {
  const { tdoc, x, d, sig, S } = m;
  const half = tdoc.bar / 2;
  const b = bounds(x, tdoc.offsets, tdoc.maxdur, full[0], full[1]);
  const a = aggregate(x, d, sig, S.cls, tdoc.colors.length, b, full[0], full[1],
    tdoc.overview_bins, null);
  const c = empty(tdoc.sources.overview.columns);
  for (let j = 0; j < a.lane.length; j++) {
    const l = a.lane[j];
    c.left.push(a.left[j]); c.right.push(a.right[j]); c.bottom.push(l - half);
    c.top.push(l - half + tdoc.bar * a.busy[j]);
    c.color.push(tdoc.colors[a.cls[j]]);
  }
  return c;
}
