/*
 * nbprof timeline: level of detail. Pure functions over typed arrays: no DOM, no Bokeh.
 *
 * The Python side (nbprof/views/timeline.py) only prepares the data: per lane, events
 * sorted by start, as delta-encoded start ticks and duration ticks (uint32), a signature
 * id per event (name, class, grid, ...), and the link of each kernel to the runtime call
 * that launched it. Everything drawn is decided here, at first paint and at every zoom:
 * the exact events of the visible window when at most `cap` of them are there, else a
 * per-lane aggregate (busy fraction per time bin, coloured by the dominant class).
 *
 * Loaded as a classic script (it defines globalThis.nbprof.lod) and, under Node, as a
 * CommonJS module (tests/js/lod.test.js).
 */
(function (root, factory) {
  const api = factory();
  if (typeof module === "object" && module.exports) {
    module.exports = api;
  } else {
    root.nbprof = root.nbprof || {};
    root.nbprof.lod = api;
  }
})(typeof globalThis !== "undefined" ? globalThis : this, function () {
  "use strict";

  /** Marks "no link" in the delta-encoded link array (see decodeLinks). */
  const NO_LINK = -2147483648;

  /** Start and duration in µs since t0 of every event, from the delta ticks. */
  function decode(dx, dd, offsets, tick) {
    const n = dx.length;
    const x = new Float64Array(n);
    const d = new Float64Array(n);
    for (let l = 0; l + 1 < offsets.length; l++) {
      let acc = 0;
      for (let i = offsets[l]; i < offsets[l + 1]; i++) {
        acc += dx[i];
        x[i] = acc * tick;
        d[i] = dd[i] * tick;
      }
    }
    return { x, d };
  }

  /**
   * Per event, the index of its partner (a kernel's launching call, a launch's kernel), or
   * -1. Encoded per lane as the difference to the previous linked event's partner, so a
   * training loop's links are small repeated numbers that compress well.
   */
  function decodeLinks(dl, offsets) {
    const out = new Int32Array(dl.length).fill(-1);
    for (let l = 0; l + 1 < offsets.length; l++) {
      let prev = 0;
      for (let i = offsets[l]; i < offsets[l + 1]; i++) {
        if (dl[i] === NO_LINK) continue;
        prev += dl[i];
        out[i] = prev;
      }
    }
    return out;
  }

  /** First index in [a, b) whose x is >= v (x sorted within the lane). */
  function lower(x, a, b, v) {
    while (a < b) {
      const m = (a + b) >>> 1;
      if (x[m] < v) a = m + 1;
      else b = m;
    }
    return a;
  }

  /** Lane of event i: the last lane whose offset is <= i. */
  function laneOf(offsets, i) {
    let a = 0;
    let b = offsets.length - 1;
    while (b - a > 1) {
      const m = (a + b) >>> 1;
      if (offsets[m] <= i) a = m;
      else b = m;
    }
    return a;
  }

  /**
   * Per lane, the index range of the events that may overlap [x0, x1]: starting at or
   * after x0 - (the lane's longest duration) and not after x1. `total` counts them, an
   * upper bound of the visible events that decides exact vs aggregate.
   */
  function bounds(x, offsets, maxdur, x0, x1) {
    const nl = offsets.length - 1;
    const lo = new Int32Array(nl);
    const hi = new Int32Array(nl);
    let total = 0;
    for (let l = 0; l < nl; l++) {
      lo[l] = lower(x, offsets[l], offsets[l + 1], x0 - maxdur[l]);
      hi[l] = lower(x, lo[l], offsets[l + 1], x1 + 1e-9);
      total += hi[l] - lo[l];
    }
    return { lo, hi, total };
  }

  /** Indices (and lanes) of the events overlapping [x0, x1]. */
  function exact(x, d, b, x0) {
    const idx = [];
    const lanes = [];
    for (let l = 0; l < b.lo.length; l++) {
      for (let i = b.lo[l]; i < b.hi[l]; i++) {
        if (x[i] + d[i] < x0) continue;
        idx.push(i);
        lanes.push(l);
      }
    }
    return { idx, lanes };
  }

  /** Bins per lane: at most maxBins, and lanes x bins at most aggCap. */
  function binCount(nLanes, aggCap, maxBins) {
    return Math.max(1, Math.min(maxBins, Math.floor(aggCap / Math.max(nLanes, 1))));
  }

  /**
   * Per lane and bin of [x0, x1]: busy fraction (union-free sum of overlaps, clamped at 1),
   * count of events starting in the bin, the dominant class by time, and whether an event
   * of `mark` (a per-signature 0/1 array, e.g. search matches) starts in it.
   */
  function aggregate(x, d, sig, sigCls, nClasses, b, x0, x1, bins, mark) {
    const w = (x1 - x0) / bins;
    const busy = new Float64Array(bins * nClasses);
    const cnt = new Int32Array(bins);
    const hit = new Uint8Array(bins);
    const out = { lane: [], bin: [], left: [], right: [], busy: [], events: [], cls: [],
      marked: [] };
    for (let l = 0; l < b.lo.length; l++) {
      if (b.hi[l] === b.lo[l]) continue;
      busy.fill(0);
      cnt.fill(0);
      hit.fill(0);
      for (let i = b.lo[l]; i < b.hi[l]; i++) {
        const s = x[i];
        const e = s + d[i];
        if (e < x0) continue;
        const k = sigCls[sig[i]];
        const b0 = Math.max(0, Math.min(bins - 1, Math.floor((s - x0) / w)));
        const b1 = Math.max(0, Math.min(bins - 1, Math.floor((e - x0) / w)));
        cnt[b0] += 1;
        if (mark && mark[sig[i]]) hit[b0] = 1;
        for (let q = b0; q <= b1; q++) {
          const ov = Math.min(e, x0 + (q + 1) * w) - Math.max(s, x0 + q * w);
          if (ov > 0) busy[q * nClasses + k] += ov;
        }
      }
      for (let q = 0; q < bins; q++) {
        let t = 0;
        let best = 0;
        let bk = 0;
        for (let k = 0; k < nClasses; k++) {
          const v = busy[q * nClasses + k];
          t += v;
          if (v > best) {
            best = v;
            bk = k;
          }
        }
        if (t <= 0 && cnt[q] === 0) continue;
        out.lane.push(l);
        out.bin.push(q);
        out.left.push(x0 + q * w);
        out.right.push(x0 + (q + 1) * w);
        out.busy.push(Math.min(1, t / w));
        out.events.push(cnt[q]);
        out.cls.push(bk);
        out.marked.push(hit[q]);
      }
    }
    return out;
  }

  /** Per lane, the union of [left, right] intervals, sorted (for clipGaps). */
  function unionByLane(left, right, lane) {
    const per = new Map();
    for (let i = 0; i < left.length; i++) {
      let a = per.get(lane[i]);
      if (!a) {
        a = [];
        per.set(lane[i], a);
      }
      a.push([left[i], right[i]]);
    }
    const union = new Map();
    for (const [l, a] of per) {
      a.sort((p, q) => p[0] - q[0]);
      const u = [];
      for (const [s, e] of a) {
        const t = u[u.length - 1];
        if (t && s <= t[1]) t[1] = Math.max(t[1], e);
        else u.push([s, e]);
      }
      union.set(l, u);
    }
    return union;
  }

  /**
   * The pieces of each idle gap where nothing is drawn on its lane, so that a gap's
   * tooltip and an event's never show together: [{gap, left, right}].
   */
  function clipGaps(gapLeft, gapRight, gapLane, left, right, lane) {
    const union = unionByLane(left, right, lane);
    const out = [];
    for (let g = 0; g < gapLeft.length; g++) {
      const u = union.get(gapLane[g]) || [];
      let s = gapLeft[g];
      const e = gapRight[g];
      let a = 0;
      let b = u.length;
      while (a < b) {
        const m = (a + b) >>> 1;
        if (u[m][1] <= s) a = m + 1;
        else b = m;
      }
      for (let k = a; k < u.length && u[k][0] < e; k++) {
        if (u[k][0] > s) out.push({ gap: g, left: s, right: u[k][0] });
        s = Math.max(s, u[k][1]);
      }
      if (e > s) out.push({ gap: g, left: s, right: e });
    }
    return out;
  }

  /**
   * Signatures whose name contains `query` (case-insensitive), as a 0/1 array; a query in
   * slashes (/gemm|conv/i) is a regular expression. An empty or invalid query marks none.
   */
  function matchSigs(names, query) {
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

  /** Events whose signature is marked, in (lane, start) order. */
  function markedEvents(sig, mark) {
    const out = [];
    for (let i = 0; i < sig.length; i++) if (mark[sig[i]]) out.push(i);
    return out;
  }

  /**
   * The x range after a keyboard zoom (factor < 1 zooms in) about `anchor`, kept within
   * `limits` and no narrower than `minInterval`.
   */
  function zoomRange(start, end, anchor, factor, limits, minInterval) {
    const span = end - start;
    let w = Math.max(span * factor, minInterval || 0);
    if (limits) w = Math.min(w, limits[1] - limits[0]);
    const f = span > 0 ? (anchor - start) / span : 0.5;
    let s = anchor - f * w;
    return clampRange(s, s + w, limits);
  }

  /** The x range moved by `frac` of its width (negative: to the left), within `limits`. */
  function panRange(start, end, frac, limits) {
    const dx = (end - start) * frac;
    return clampRange(start + dx, end + dx, limits);
  }

  function clampRange(s, e, limits) {
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

  /** A duration or time in µs, in the unit a person reads best (axis ticks, details). */
  function fmtTime(us) {
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
  function fitLabel(text, px, charPx) {
    const n = Math.floor((px - 6) / (charPx || 6.5));
    if (n < 4) return "";
    const s = String(text);
    return s.length <= n ? s : s.slice(0, n - 1) + "…";
  }

  return {
    NO_LINK,
    decode,
    decodeLinks,
    lower,
    laneOf,
    bounds,
    exact,
    binCount,
    aggregate,
    unionByLane,
    clipGaps,
    matchSigs,
    markedEvents,
    zoomRange,
    panRange,
    fmtTime,
    fitLabel,
  };
});
