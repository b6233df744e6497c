/*
 * nbprof comparison: links the x ranges of the two stacked timelines of a comparison, so
 * zooming or panning one moves the other to the same window of the shared time scale.
 *
 * Each timeline is its own Bokeh document (embed.mjs draws it into its .nbp-timeline), so
 * the ranges cannot share a model: once both timelines are attached, a change of one range
 * is copied to the other. Each timeline keeps its own coordinates (µs since its first
 * event); its section's data-nbp-shift is its origin (first step or first GPU event) in
 * them, so a time t of the shared scale is t + shift in each. A range already where it
 * should be is left alone, so the two directions never bounce. Their plot areas are also
 * brought to the same left and right edges (the lane names differ in width between the
 * runs), so the same instant sits at the same x on screen in both.
 */
import { alignFrames, viewsOf } from "./bokeh.mjs";

/** How long to wait for both timelines to be attached (BokehJS may load late). */
const WAIT_MS = 120000;

/** A handler moving `dst` to `src`'s window, `shift` µs later in `dst`'s coordinates. */
export function follow(src, dst, shift) {
  return () => {
    const start = src.start + shift;
    const end = src.end + shift;
    const tol = 1e-9 * Math.max(1, Math.abs(end - start));
    if (Math.abs(dst.start - start) > tol || Math.abs(dst.end - end) > tol) {
      dst.setv({ start, end });
    }
  };
}

/** Link Bokeh ranges `a` and `b` both ways; a time x of `a` is x + shift of `b`. */
export function link(a, b, shift) {
  const ab = follow(a, b, shift);
  const ba = follow(b, a, -shift);
  for (const p of ["start", "end"]) {
    a.connect(a.properties[p].change, ab);
    b.connect(b.properties[p].change, ba);
  }
  return { ab, ba };
}

function rangeOf(container) {
  const api = container && container._nbprof;
  const fig = api && api.doc.get_model_by_name(api.tdoc.models.figure);
  return fig ? fig.x_range : null;
}

/** Align the plot areas of both timelines' plots, as each timeline aligns its own. */
export function alignBoth(cmp, containers) {
  if (typeof requestAnimationFrame !== "function") return;
  let frames = 0;
  const step = () => {
    const views = containers.flatMap((c) => viewsOf(c._nbprof.doc))
      .filter((v) => v.frame && v.model.x_range !== undefined);
    const ready = views.length > 0 && views.every((v) => v.frame.bbox.width > 0);
    // alignFrames only widens borders to the widest, so it settles and never fights the
    // timelines' own alignment; a few frames let Bokeh lay out after each change.
    if (ready && !alignFrames(views)) {
      cmp.setAttribute("data-nbp-aligned", "1");
      return;
    }
    if (++frames < 600) requestAnimationFrame(step);
  };
  requestAnimationFrame(step);
}

function linkOne(cmp) {
  const sections = ["before", "after"].map((w) =>
    cmp.querySelector(".nbp-cmp-timeline.nbp-cmp-" + w));
  if (sections.some((s) => !s)) return;
  const [tb, ta] = sections.map((s) => s.querySelector(".nbp-timeline"));
  const shift = Number(sections[1].dataset.nbpShift) - Number(sections[0].dataset.nbpShift);
  const started = Date.now();
  const poll = setInterval(() => {
    const rb = rangeOf(tb);
    const ra = rangeOf(ta);
    if (rb && ra) {
      clearInterval(poll);
      link(rb, ra, shift);
      cmp.setAttribute("data-nbp-linked", "1");
      alignBoth(cmp, [tb, ta]);
    } else if (Date.now() - started > WAIT_MS) {
      clearInterval(poll);
    }
  }, 50);
}

/** Link every comparison on the page not linked yet. */
export function linkAll(document) {
  if (!document || !document.querySelectorAll) return;
  for (const cmp of document.querySelectorAll(".nbp-compare")) {
    if (cmp._nbpLinked) continue;
    cmp._nbpLinked = true;
    linkOne(cmp);
  }
}
