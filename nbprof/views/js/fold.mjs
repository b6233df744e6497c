/*
 * nbprof timeline: rows, and ranks folded into one row or not. Pure functions.
 *
 * nbprof/views/timeline/rows.py lays out the first rows with the same rules (the figure's
 * height and axes before any script runs); tests/test_views_js.py checks both agree.
 */

/**
 * The rows of a timeline whose lanes are grouped by rank, and where each lane is drawn.
 *
 * `groups` ([{first, last, folded, open, closed}]: lanes [first, last) of one rank, the
 * lanes its folded row shows, and its row label when expanded and when collapsed) cover
 * the lanes in order; `laneLabels` label the lanes' own rows; `collapsed[g]` folds group
 * g into one row holding the events of its `folded` lanes (its GPU streams: what a rank
 * is read by at a glance); its other lanes are not drawn. An expanded group starts with
 * a header row (its label; a time axis along its top edge, which is also the line
 * between ranks); runs of more than `every` rows without an axis get an unlabelled
 * ruler row with one, so that a tall timeline shows a time axis wherever it is scrolled
 * to. Without groups every lane is its own row.
 *
 * Returns rows [{label, kind: "lane"|"header"|"rank"|"ruler", group, lanes}], the row
 * (y) of each lane (-1: not drawn), which lanes share a folded row, the y of each time
 * axis, and the y of the lines between ranks where no axis is.
 */
export function rowLayout(groups, laneLabels, collapsed, every) {
  const nl = laneLabels.length;
  const laneRow = new Float64Array(nl);
  const merged = new Uint8Array(nl);
  const rows = [];
  const axes = [];
  const separators = [];
  if (!groups || !groups.length) {
    for (let l = 0; l < nl; l++) {
      laneRow[l] = l;
      rows.push({ label: laneLabels[l], kind: "lane", group: -1, lanes: [l] });
    }
    return { rows, laneRow, merged, axes, separators };
  }
  const gap = Math.max(1, every || 1);
  let since = 0; // rows since the last time axis (the plot's own top axis to begin with)
  const axisRow = (label, kind, group) => {
    axes.push(rows.length - 0.5);
    rows.push({ label, kind, group, lanes: [] });
    since = 0;
  };
  groups.forEach((g, gi) => {
    const boundary = rows.length - 0.5;
    if (collapsed && collapsed[gi]) {
      if (since >= gap) axisRow("", "ruler", -1);
      else if (gi > 0) separators.push(boundary);
      const lanes = g.folded ? g.folded.slice() : [];
      if (!g.folded) for (let l = g.first; l < g.last; l++) lanes.push(l);
      for (let l = g.first; l < g.last; l++) laneRow[l] = -1;
      for (const l of lanes) {
        laneRow[l] = rows.length;
        merged[l] = 1;
      }
      rows.push({ label: g.closed, kind: "rank", group: gi, lanes });
      since += 1;
      return;
    }
    axisRow(g.open, "header", gi);
    for (let l = g.first; l < g.last; l++) {
      if (since >= gap) axisRow("", "ruler", -1);
      laneRow[l] = rows.length;
      rows.push({ label: laneLabels[l], kind: "lane", group: gi, lanes: [l] });
      since += 1;
    }
  });
  return { rows, laneRow, merged, axes, separators };
}

/** The timeline's height in px for `rows` rows (timeline/rows.py plot_height). */
export function plotHeight(rows, tdoc) {
  const h = tdoc.plot.pad_px + tdoc.plot.lane_px * rows;
  return Math.floor(Math.min(Math.max(h, tdoc.plot.min_px), tdoc.plot.max_px));
}

/** The rows of a timeline document with the rank groups `collapsed` folded. */
export function layoutOf(tdoc, collapsed) {
  return rowLayout(tdoc.groups, tdoc.lane_axis, collapsed || tdoc.collapsed, tdoc.axis_every);
}

/**
 * Which ranks are folded after folding (`fold` true), unfolding (false) or flipping
 * (undefined) group `g`, or every group when g < 0.
 */
export function toggleFold(collapsed, g, fold) {
  const out = collapsed.slice();
  const which = g < 0 ? out.map((_, k) => k) : [g];
  for (const k of which) {
    if (k < 0 || k >= out.length) continue;
    out[k] = fold === undefined ? !out[k] : Boolean(fold);
  }
  return out;
}

/** The y axis of a layout: a tick at each labelled row, and the [row, label] pairs. */
export function yTicks(layout) {
  const ticks = [];
  const labels = [];
  layout.rows.forEach((r, y) => {
    if (r.label) {
      ticks.push(y);
      labels.push([y, r.label]);
    }
  });
  return { ticks, labels };
}

/** The folded groups, as the container's data-nbp-collapsed says them: "0,3". */
export function collapsedAttr(collapsed) {
  return collapsed.map((c, k) => (c ? k : -1)).filter((k) => k >= 0).join(",");
}

/** The rank group of row `r` when it is a rank's header or folded row, else -1. */
export function groupOfRow(layout, r) {
  const row = layout.rows[r];
  return row && (row.kind === "header" || row.kind === "rank") ? row.group : -1;
}
