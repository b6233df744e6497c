/*
 * nbprof timeline: level of detail. Pure functions over typed arrays: no DOM, no Bokeh.
 *
 * The timeline document (nbprof/views/timeline/document.py) holds, per lane, events
 * sorted by start, as delta-encoded start ticks and duration ticks, a signature id per
 * event (name, class, grid, ...), and the link of each kernel to the runtime call that
 * launched it. Everything drawn is decided here, at first paint and at every zoom: the
 * exact events of the visible window when at most `cap` of them are there, else a
 * per-lane aggregate (busy fraction per time bin, coloured by the class that took most of
 * its time).
 */

/** Marks "no link" in the delta-encoded link array (see decodeLinks). */
export const NO_LINK = -2147483648;

/** Start and duration in µs since t0 of every event, from the delta ticks. */
export function decode(dx, dd, offsets, tick) {
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
export function decodeLinks(dl, offsets) {
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
export function lower(x, a, b, v) {
  while (a < b) {
    const m = (a + b) >>> 1;
    if (x[m] < v) a = m + 1;
    else b = m;
  }
  return a;
}

/** Lane of event i: the last lane whose offset is <= i. */
export function laneOf(offsets, i) {
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
export function bounds(x, offsets, maxdur, x0, x1) {
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
export function exact(x, d, b, x0) {
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
export function binCount(nLanes, aggCap, maxBins) {
  return Math.max(1, Math.min(maxBins, Math.floor(aggCap / Math.max(nLanes, 1))));
}

/**
 * Time per class in `bins` equal bins of [x0, x1], for the events of one lane at a time:
 * add(start, end, class, marked) each event, then emit(lane, out) pushes every bin that
 * holds something to `out` (as aggregate() returns it) and empties the bins.
 */
export function binner(nClasses, x0, x1, bins) {
  const w = (x1 - x0) / bins;
  const busy = new Float64Array(bins * nClasses);
  const cnt = new Int32Array(bins);
  const hit = new Uint8Array(bins);
  let used = false;
  return {
    add(s, e, k, marked) {
      if (e < x0 || s > x1) return;
      used = true;
      const b0 = Math.max(0, Math.min(bins - 1, Math.floor((s - x0) / w)));
      const b1 = Math.max(0, Math.min(bins - 1, Math.floor((e - x0) / w)));
      cnt[b0] += 1;
      if (marked) hit[b0] = 1;
      for (let q = b0; q <= b1; q++) {
        const ov = Math.min(e, x0 + (q + 1) * w) - Math.max(s, x0 + q * w);
        if (ov > 0) busy[q * nClasses + k] += ov;
      }
    },
    emit(l, out) {
      if (!used) return;
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
      busy.fill(0);
      cnt.fill(0);
      hit.fill(0);
      used = false;
    },
  };
}

/** Aggregate bars as aggregate() returns them, none yet. */
export function noBins() {
  return { lane: [], bin: [], left: [], right: [], busy: [], events: [], cls: [], marked: [] };
}

/**
 * Per lane and bin of [x0, x1]: busy fraction (union-free sum of overlaps, clamped at 1),
 * count of events starting in the bin, the class that took most of the bin's time (what
 * the bin is coloured by), and whether an event of `mark` (a per-signature 0/1 array,
 * e.g. search matches) starts in it.
 */
export function aggregate(x, d, sig, sigCls, nClasses, b, x0, x1, bins, mark) {
  const out = noBins();
  const acc = binner(nClasses, x0, x1, bins);
  for (let l = 0; l < b.lo.length; l++) {
    for (let i = b.lo[l]; i < b.hi[l]; i++) {
      acc.add(x[i], x[i] + d[i], sigCls[sig[i]], mark ? mark[sig[i]] : 0);
    }
    acc.emit(l, out);
  }
  return out;
}

/** Per lane, the union of [left, right] intervals, sorted (for clipGaps). */
export function unionByLane(left, right, lane) {
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
export function clipGaps(gapLeft, gapRight, gapLane, left, right, lane) {
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

/** Idle gaps from their delta-encoded start and length ticks (timeline/gaps.py). */
export function decodeGaps(g, tick) {
  const n = g.dx.length;
  const left = new Float64Array(n);
  const right = new Float64Array(n);
  const dur = new Float64Array(n);
  let acc = 0;
  for (let i = 0; i < n; i++) {
    acc += g.dx[i];
    left[i] = acc * tick;
    dur[i] = g.dd[i] * tick;
    right[i] = left[i] + dur[i];
  }
  return { left, right, dur, li: g.li, cause: g.cause, cpu: g.cpu };
}
