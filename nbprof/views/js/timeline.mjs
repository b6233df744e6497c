/*
 * nbprof timeline: wires the pure modules to a Bokeh document built by
 * nbprof/views/timeline/ and to the page: it fills the sources the timeline document
 * names (draw.mjs) at first paint and on every change of the x range, and adds what Bokeh
 * has no tool for: search (search.mjs), the keys (keys.mjs), the wheel left to the page
 * until the plot is clicked into (wheel.mjs), click to pin an event's
 * details with its launch <-> kernel link (pin.mjs, pane.mjs), ranks folded into one row
 * (fold.mjs), the page's theme (theme.mjs), and the plot areas of the timeline, the
 * sample chart and the overview aligned (bokeh.mjs).
 */
import { alignFrames, plotView, toFrame, viewsOf } from "./bokeh.mjs";
import { open } from "./document.mjs";
import { draw, gapShading, overview } from "./draw.mjs";
import { paneRows } from "./fields.mjs";
import { collapsedAttr, groupOfRow, layoutOf, plotHeight, toggleFold, yTicks }
  from "./fold.mjs";
import { isFormField, keyAction } from "./keys.mjs";
import { renderPane } from "./pane.mjs";
import { eventInfo, hit, partnerOf, pinShapes, windowOf } from "./pin.mjs";
import { MIN_INTERVAL, zoomRange } from "./range.mjs";
import { countText, cursorText, exactSigs, matchSigs, matchesInTime, stepCursor, windowFor }
  from "./search.mjs";
import { followTheme } from "./theme.mjs";
import { wheelAction, wheelFactor, wheelHint, wheelModifiers } from "./wheel.mjs";

/**
 * Draw the timeline in `container` (its .nbp-timeline element) from Bokeh document
 * `bokehDoc` and timeline document `tdoc`; returns the timeline's API, also left on
 * container._nbprof once it is drawn (data-nbp-ready).
 */
export async function attach(container, bokehDoc, tdoc) {
  const m = await open(tdoc);
  const get = (name) => bokehDoc.get_model_by_name(name);
  const fig = get(tdoc.models.figure);
  const xr = fig.x_range;
  const full = [xr.bounds ? xr.bounds[0] : xr.start, xr.bounds ? xr.bounds[1] : xr.end];
  const groups = tdoc.groups;
  const state = { mark: null, matches: [], cursor: -1, pinned: -1, mouseX: null, mode: "",
    armed: false, collapsed: groups.map((g, k) => Boolean(tdoc.collapsed[k])), layout: null };
  state.layout = layoutOf(tdoc, state.collapsed);

  function fill(source, data) {
    const s = get(source.name);
    if (s) s.data = data;
  }

  function paintGaps() {
    const shading = gapShading(m, state.layout);
    for (const cause of tdoc.gap_causes) fill(tdoc.sources.gap_shading[cause], shading[cause]);
  }

  function frameWidth() {
    const v = plotView(bokehDoc, fig);
    return v && v.frame.bbox.width > 0 ? v.frame.bbox.width : 800;
  }

  function update() {
    const out = draw(m, xr.start, xr.end, frameWidth(), state.mark, state.layout);
    for (const k of Object.keys(tdoc.sources.detail)) fill(tdoc.sources.detail[k], out.detail[k]);
    fill(tdoc.sources.aggregate, out.agg);
    fill(tdoc.sources.marks, out.marks);
    fill(tdoc.sources.gap_hover, out.gapHover);
    fill(tdoc.sources.bar_labels, out.barLabels);
    fill(tdoc.sources.gap_labels, out.gapLabels);
    state.mode = out.mode;
    container.setAttribute("data-nbp-mode", state.mode);
  }

  let pending = false;
  function schedule() {
    if (pending) return;
    pending = true;
    const run = () => { pending = false; update(); };
    if (typeof requestAnimationFrame === "function") requestAnimationFrame(run);
    else run();
  }
  xr.connect(xr.properties.start.change, schedule);
  xr.connect(xr.properties.end.change, schedule);

  function setRange(s, e) {
    xr.setv({ start: s, end: e });
  }

  // The overview strip, after the main plot's first paint: on a million events it is a
  // second pass over all of them that the first view need not wait for.
  const drawOverview = () => fill(tdoc.sources.overview, overview(m, full));
  if (typeof requestAnimationFrame === "function") {
    requestAnimationFrame(() => setTimeout(drawOverview, 0));
  } else {
    drawOverview();
  }

  // -- details pane (click to pin) ---------------------------------------------------
  const pane = container.querySelector(".nbp-details");
  function pin(i) {
    state.pinned = i;
    const shapes = pinShapes(m, state.layout, i);
    fill(tdoc.sources.pinned, shapes.pinned);
    fill(tdoc.sources.link, shapes.link);
    if (i < 0) {
      renderPane(pane, null);
      container.removeAttribute("data-nbp-pinned");
      return;
    }
    const zoom = partnerOf(m, i) >= 0 ? "zoom to launch + kernel" : "zoom to event";
    renderPane(pane, eventInfo(m, state.layout, i), paneRows(m, i), zoom,
      () => { const r = windowOf(m, i, full); setRange(r[0], r[1]); }, () => pin(-1));
    container.setAttribute("data-nbp-pinned", String(i));
  }

  // -- ranks: rows grouped by rank, each folded to one row or not ----------------------
  const yAxis = fig.left.find((a) => a.type && a.type.endsWith("Axis"));
  const axes = tdoc.models.rank_axes.map(get).filter(Boolean);
  const sepSrc = get(tdoc.sources.separators.name);

  /** Put the rows of the current layout on the plot: y range, labels, height, the time
   * axes along the rank headers, the lines between ranks; then redraw. */
  function applyLayout() {
    const lay = (state.layout = layoutOf(tdoc, state.collapsed));
    const n = lay.rows.length;
    fig.y_range.setv({ start: n - 0.5, end: -0.5 });
    if (yAxis) {
      const { ticks, labels } = yTicks(lay);
      yAxis.ticker.setv({ ticks });
      const old = yAxis.major_label_overrides;
      const o = old instanceof Map ? new Map(labels) : Object.fromEntries(labels);
      yAxis.setv({ major_label_overrides: o });
    }
    axes.forEach((a, k) => {
      const at = lay.axes[k];
      a.setv(at === undefined ? { visible: false } : { visible: true, fixed_location: at });
    });
    if (sepSrc) sepSrc.data = { y: lay.separators.slice() };
    const h = plotHeight(n, tdoc);
    if (fig.height !== h) fig.setv({ height: h });
    container.setAttribute("data-nbp-collapsed", collapsedAttr(state.collapsed));
    paintGaps();
    update();
    if (state.pinned >= 0) pin(state.pinned);
  }

  /** Fold (true), unfold (false) or flip (undefined) rank group `g`; all when g < 0. */
  function foldRank(g, fold) {
    if (!groups.length) return;
    state.collapsed = toggleFold(state.collapsed, g, fold);
    applyLayout();
  }

  function pointer(ev) {
    const v = plotView(bokehDoc, fig);
    return v ? toFrame(v, ev) : null;
  }

  const plotEl = container.querySelector(".nbp-root-main") || container;

  // -- the wheel: the page's, until the plot is clicked into (or with Ctrl/⌘ held) -----
  const wheelTool = get(tdoc.models.wheel);
  const bar = container.querySelector(".nbp-tl-bar");
  if (bar) {
    // Both texts in one grid cell, one of them hidden (nbprof.css): the bar keeps its size
    // as a click arms the wheel, so nothing moves between the click's press and release.
    const hint = document.createElement("span");
    hint.className = "nbp-wheel";
    for (const on of [false, true]) {
      const t = document.createElement("span");
      t.className = on ? "nbp-wheel-zoom" : "nbp-wheel-page";
      t.textContent = wheelHint(on);
      hint.append(t);
    }
    bar.append(hint);
  }
  function arm(on) {
    state.armed = on;
    if (wheelTool) wheelTool.setv({ modifiers: wheelModifiers(on) });
    container.setAttribute("data-nbp-wheel", on ? "zoom" : "page");
  }
  arm(false);
  const outside = (e) => {
    if (!container.isConnected) {
      document.removeEventListener("pointerdown", outside, true);
      return;
    }
    const path = e.composedPath ? e.composedPath() : [e.target];
    if (state.armed && !path.includes(container)) arm(false);
  };
  document.addEventListener("pointerdown", outside, true);
  plotEl.addEventListener("wheel", (e) => {
    if (wheelAction(e, state.armed) !== "own") return;
    const p = pointer(e);
    if (!p || !p.inside) return;
    e.preventDefault();
    e.stopPropagation();
    const r = zoomRange(xr.start, xr.end, p.t, wheelFactor(e), full, MIN_INTERVAL);
    setRange(r[0], r[1]);
  }, { capture: true, passive: false });

  let down = null;
  plotEl.addEventListener("pointerdown", (e) => {
    down = { x: e.clientX, y: e.clientY };
    if (!state.armed) arm(true);
  });
  plotEl.addEventListener("pointerup", (e) => {
    if (!down || Math.hypot(e.clientX - down.x, e.clientY - down.y) > 4) return;
    down = null;
    const p = pointer(e);
    if (!p) return;
    const g = groups.length && p.left ? groupOfRow(state.layout, p.row) : -1;
    if (g >= 0) {
      foldRank(g);
      return;
    }
    // Focus (for the keys) on a click only: JupyterLab scrolls to a cell that takes focus,
    // which would move the plot under a drag that has just begun.
    if (container.focus) container.focus({ preventScroll: true });
    if (!p.inside) return;
    pin(hit(m, state.layout, p.t, p.row, 3 * (xr.end - xr.start) / p.width));
  });
  plotEl.addEventListener("pointermove", (e) => {
    const p = pointer(e);
    state.mouseX = p && p.inside ? p.t : null;
    if (groups.length) {
      const over = p && p.left && groupOfRow(state.layout, p.row) >= 0;
      plotEl.style.cursor = over ? "pointer" : "";
    }
  });
  plotEl.addEventListener("pointerleave", () => { state.mouseX = null; });
  for (const b of container.querySelectorAll("[data-nbp-ranks]")) {
    b.addEventListener("click", () => foldRank(-1, b.getAttribute("data-nbp-ranks") === "fold"));
  }

  // -- search ------------------------------------------------------------------------
  const input = container.querySelector(".nbp-search input");
  const count = container.querySelector(".nbp-search-count");
  function search(q, exactName) {
    state.mark = exactName ? exactSigs(m.S.name, q) : q ? matchSigs(m.S.name, q) : null;
    state.matches = state.mark ? matchesInTime(m.x, m.sig, state.mark) : [];
    state.cursor = -1;
    if (count) count.textContent = countText(q, state.matches.length);
    container.setAttribute("data-nbp-matches", String(state.matches.length));
    schedule();
  }
  function step(dir) {
    const n = state.matches.length;
    if (!n) return;
    state.cursor = stepCursor(state.cursor, dir, n);
    const i = state.matches[state.cursor];
    const r = windowFor(m.x[i], m.d[i], xr.start, xr.end, full);
    setRange(r[0], r[1]);
    pin(i);
    if (count) count.textContent = cursorText(state.cursor, n);
  }
  if (input) {
    let timer = null;
    input.addEventListener("input", () => {
      clearTimeout(timer);
      timer = setTimeout(() => search(input.value, false), 120);
    });
    input.addEventListener("keydown", (e) => {
      e.stopPropagation(); // typing here is text, not notebook or timeline shortcuts
      if (e.key === "Enter") {
        clearTimeout(timer);
        if (!state.mark) search(input.value, false);
        step(e.shiftKey ? -1 : 1);
        e.preventDefault();
      } else if (e.key === "Escape") {
        input.value = "";
        search("", false);
        container.focus({ preventScroll: true });
      }
    });
  }

  // -- keyboard zoom / pan -------------------------------------------------------------
  container.addEventListener("keydown", (e) => {
    // Keys typed into a form field (the search box, the details pane's buttons) are not
    // timeline shortcuts; keys on the plot (Bokeh focuses its canvas on click) are.
    const t = e.composedPath ? e.composedPath()[0] : e.target;
    if (t && isFormField(t.tagName)) return;
    const act = keyAction(e, xr.start, xr.end, state.mouseX, full);
    if (!act || (act.search && !input)) return;
    // Handled here: JupyterLab's command-mode shortcuts (A inserts a cell) must not run.
    e.preventDefault();
    e.stopPropagation();
    if (act.range) setRange(act.range[0], act.range[1]);
    else if (act.unpin) {
      pin(-1);
      arm(false);
    }
    else if (act.search) input.focus();
  });

  // -- theme and alignment -----------------------------------------------------------
  container._nbpObserver = followTheme(bokehDoc, container.closest(".nbprof") || container,
    tdoc.models.figure);
  let tries = 0;
  function align() {
    const views = viewsOf(bokehDoc).filter((v) => v.frame && v.model.x_range !== undefined);
    const ready = views.length > 0 && views.every((v) => v.frame.bbox.width > 0);
    if (ready) {
      if (alignFrames(views)) requestAnimationFrame(align);
      else schedule(); // labels depend on the frame's final width
      return;
    }
    if (++tries < 300) requestAnimationFrame(align);
  }
  requestAnimationFrame(align);

  paintGaps();
  if (groups.length) applyLayout();
  else update();
  const api = {
    doc: bokehDoc, tdoc, model: m, update, pin, search, step, setRange, state, full, foldRank,
    arm,
    eventInfo: (i) => eventInfo(m, state.layout, i),
    layout: () => state.layout,
    matches: () => state.matches.slice(),
    zoomToName(name) {
      if (input) input.value = name;
      search(name, true);
      step(1);
    },
  };
  container._nbprof = api;
  container.setAttribute("data-nbp-ready", "1");
  return api;
}
