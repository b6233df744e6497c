/*
 * nbprof front end: what it needs of BokehJS's views (the models are the document's).
 */

/** Every Bokeh view on the page that belongs to `doc` (Bokeh 3.0-3.9 index shapes). */
export function viewsOf(doc) {
  const B = globalThis.Bokeh;
  if (!B || !B.index) return [];
  const all = typeof B.index.all_views === "function" ? [...B.index.all_views()]
    : Object.values(B.index);
  const out = [];
  const walk = (v) => {
    if (!v || out.includes(v)) return;
    out.push(v);
    if (v.child_views) for (const c of v.child_views) walk(c);
  };
  for (const v of all) if (v.model && v.model.document === doc) walk(v);
  return out;
}

/** The view of plot `model` of `doc`, once it has a frame. */
export function plotView(doc, model) {
  return viewsOf(doc).find((v) => v.model === model && v.frame) || null;
}

/** Pointer event `ev` in the data coordinates of a plot view's frame, or null outside. */
export function toFrame(view, ev) {
  const r = view.canvas_view.el.getBoundingClientRect();
  const sx = ev.clientX - r.left;
  const sy = ev.clientY - r.top;
  const f = view.frame.bbox;
  return { sx, sy, inside: sx >= f.left && sx <= f.right && sy >= f.top && sy <= f.bottom,
    left: sx < f.left && sx >= 0 && sy >= f.top && sy <= f.bottom,
    t: view.frame.x_scale.invert(sx), row: Math.round(view.frame.y_scale.invert(sy)),
    width: f.width };
}

/**
 * Bring the plot areas of the timeline, the sample chart and the overview to the same
 * left and right edges: each plot's y axis is as wide as its labels, so without this the
 * sample chart's area starts where the lane names end on the timeline, ~30 px apart.
 * Returns whether a border changed (lay out again, then call again until it settles).
 */
export function alignFrames(views) {
  const plots = views.filter((v) => v.frame && v.canvas_view);
  if (plots.length < 2) return false;
  const widthOf = (v) => (v.canvas_view.bbox ? v.canvas_view.bbox.width
    : v.el.getBoundingClientRect().width);
  let left = 0;
  let right = 0;
  for (const v of plots) {
    const b = v.frame.bbox;
    if (!(b.width > 0)) return false;
    left = Math.max(left, b.left);
    right = Math.max(right, widthOf(v) - b.right);
  }
  let changed = false;
  for (const v of plots) {
    const b = v.frame.bbox;
    if (Math.abs(b.left - left) > 0.5 || Math.abs(widthOf(v) - b.right - right) > 0.5) {
      v.model.setv({ min_border_left: Math.ceil(left), min_border_right: Math.ceil(right) });
      changed = true;
    }
  }
  return changed;
}
