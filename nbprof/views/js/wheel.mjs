/*
 * nbprof timeline: what the mouse wheel does over the plot. Pure.
 *
 * In a notebook the wheel scrolls the page: a timeline that took every wheel turn would
 * trap the reader above it (a tall 8-rank view fills the screen). So the wheel zooms the
 * timeline only once the reader has clicked into the plot ("armed", until they click
 * elsewhere on the page or press Escape), or while Ctrl or ⌘ is held; otherwise the page
 * scrolls. Bokeh's wheel zoom does the zooming (its modifiers say when it may); ⌘, which
 * Bokeh's modifiers cannot name, is zoomed here.
 */

/** The wheel zoom tool's modifiers: none once armed, else Ctrl held. */
export function wheelModifiers(armed) {
  return armed ? {} : { ctrl: true };
}

/**
 * Who handles a wheel event over the plot: "bokeh" (its wheel zoom, armed or with Ctrl),
 * "own" (⌘ alone: zoomed here, as Bokeh would) or "page" (the page scrolls).
 */
export function wheelAction(e, armed) {
  if (armed || e.ctrlKey) return "bokeh";
  if (e.metaKey) return "own";
  return "page";
}

/** Pixels per line and per page of a wheel event's deltaMode (DOM_DELTA_*). */
const DELTA_PX = [1, 40, 800];

/**
 * The factor a wheel turn scales the view's width by (< 1 zooms in), as Bokeh's wheel
 * zoom does at its default speed (1/600 per pixel), never below 0.1 or above 10.
 */
export function wheelFactor(e) {
  const px = (e.deltaY || 0) * (DELTA_PX[e.deltaMode || 0] || 1);
  return Math.min(10, Math.max(0.1, Math.exp(px / 600)));
}

/** What the timeline's bar says the wheel does. */
export function wheelHint(armed) {
  return armed
    ? "wheel zooms the timeline (click outside it or Esc: the wheel scrolls the page)"
    : "wheel scrolls the page; click the plot, or hold Ctrl/⌘, to zoom with it";
}
