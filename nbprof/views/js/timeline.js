/*
 * nbprof timeline: wires the level of detail (lod.js) to the Bokeh document that
 * nbprof/views/timeline.py built, and adds what Bokeh has no tool for: a search box that
 * highlights events by name, keyboard zoom and pan (W/S, A/D as in Perfetto and
 * chrome://tracing; 0 resets), click to pin an event's details below the plot with its
 * launch <-> kernel link drawn, labels inside bars wide enough for them, the theme of the
 * page (JupyterLab's CSS variables, or the system's light/dark preference) on the plots,
 * and the plot areas of the timeline, the sample chart and the overview aligned.
 *
 * Every string that came from the trace is put into the page as text (textContent, or a
 * Bokeh data source whose tooltip fields Bokeh escapes), never as markup.
 */
(function (root, factory) {
  const lod = typeof module === "object" && module.exports ? require("./lod.js") : null;
  const api = factory(() => lod || root.nbprof.lod);
  if (typeof module === "object" && module.exports) {
    module.exports = api;
  } else {
    root.nbprof = root.nbprof || {};
    root.nbprof.timeline = api;
  }
})(typeof globalThis !== "undefined" ? globalThis : this, function (getLod) {
  "use strict";

  const KINDS = ["kernel", "gpu", "runtime", "cpu"];
  const DETAIL_COLUMNS = ["left", "right", "bottom", "top", "color", "i", "name", "short",
    "kind", "dur", "grid", "block", "occ", "op", "extra", "lane"];
  const AGG_COLUMNS = ["left", "right", "bottom", "top", "color", "busy", "events", "kind",
    "lane"];
  /** Keyboard: zoom factor per W/S press and pan fraction per A/D press. */
  const ZOOM_STEP = 0.6;
  const PAN_STEP = 0.2;
  /** A bar gets a label once it is this many pixels wide. */
  const LABEL_MIN_PX = 48;
  const LABELS_MAX = 400;

  function empty(cols) {
    const o = {};
    for (const c of cols) o[c] = [];
    return o;
  }

  /** Every Bokeh view on the page that belongs to `doc` (Bokeh 3.0-3.9 index shapes). */
  function viewsOf(doc) {
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

  function plotView(doc, model) {
    return viewsOf(doc).find((v) => v.model === model && v.frame) || null;
  }

  /** Text, muted text, background, plot background and rule colours of the page around
   * `el`, read from the dashboard's CSS variables (which follow JupyterLab's theme). */
  function themeOf(el) {
    const cs = getComputedStyle(el);
    const v = (name, fallback) => (cs.getPropertyValue(name) || "").trim() || fallback;
    return {
      fg: v("--nbp-fg", "#1f2328"),
      muted: v("--nbp-muted", "#57606a"),
      bg: v("--nbp-bg", "#ffffff"),
      plot: v("--nbp-plot-bg", v("--nbp-bg", "#ffffff")),
      rule: v("--nbp-border", "#d0d7de"),
      label: v("--nbp-label-bg", "#ffffff"),
    };
  }

  function applyTheme(doc, t) {
    for (const fig of doc.roots()) {
      if (fig.x_range === undefined) continue;
      fig.setv({ background_fill_color: t.plot, border_fill_color: t.bg,
        outline_line_color: fig.name === "nbprof-timeline" ? null : t.rule });
      const sides = [...fig.left, ...fig.right, ...fig.above, ...fig.below, ...fig.center];
      for (const m of sides) {
        if (m.type && m.type.endsWith("Axis")) {
          m.setv({
            major_label_text_color: t.fg, axis_label_text_color: t.muted,
            axis_line_color: t.rule, major_tick_line_color: t.rule, minor_tick_line_color: t.rule,
          });
        } else if (m.type === "Grid") {
          m.setv({ grid_line_color: m.dimension === 0 ? t.rule : null });
        } else if (m.type === "Legend") {
          m.setv({ label_text_color: t.fg, background_fill_color: t.bg, border_line_color: t.rule,
            inactive_fill_color: t.bg });
        } else if (m.type === "LabelSet" && m.name === "nbprof-gap-labelset") {
          m.setv({ text_color: t.fg, background_fill_color: t.label });
        }
      }
      if (fig.title) fig.title.setv({ text_color: t.fg });
    }
  }

  /**
   * Bring the plot areas of the timeline, the sample chart and the overview to the same
   * left and right edges: each plot's y axis is as wide as its labels, so without this the
   * sample chart's area starts where the lane names end on the timeline, ~30 px apart.
   */
  function alignFrames(views) {
    const plots = views.filter((v) => v.frame && v.canvas_view);
    if (plots.length < 2) return false;
    let left = 0;
    let right = 0;
    for (const v of plots) {
      const b = v.frame.bbox;
      const w = v.canvas_view.bbox ? v.canvas_view.bbox.width : v.el.getBoundingClientRect().width;
      if (!(b.width > 0)) return false;
      left = Math.max(left, b.left);
      right = Math.max(right, w - b.right);
    }
    let changed = false;
    for (const v of plots) {
      const b = v.frame.bbox;
      const w = v.canvas_view.bbox ? v.canvas_view.bbox.width : v.el.getBoundingClientRect().width;
      if (Math.abs(b.left - left) > 0.5 || Math.abs(w - b.right - right) > 0.5) {
        v.model.setv({ min_border_left: Math.ceil(left), min_border_right: Math.ceil(right) });
        changed = true;
      }
    }
    return changed;
  }

  /** The details pane of one event: a list of (label, text) rows, all plain text. */
  function detailRows(ev) {
    const L = getLod();
    const rows = [["class", ev.kind], ["duration", L.fmtTime(ev.dur)],
      ["start", L.fmtTime(ev.start) + " after the first event"], ["lane", ev.lane]];
    if (ev.tip === "kernel") {
      rows.push(["grid × block", ev.grid + " × " + ev.block], ["occupancy", ev.occ]);
    }
    if (ev.tip === "kernel" || ev.tip === "gpu") rows.push(["launched by (CPU op)", ev.op]);
    if (ev.tip === "gpu") {
      rows.push(["size", ev.extra]);
      if (ev.bytes > 0 && ev.dur > 0) {
        rows.push(["rate", (ev.bytes / ev.dur / 1e3).toFixed(2) + " GB/s (size ÷ duration)"]);
      }
    }
    if (ev.tip === "runtime") rows.push(["category", ev.extra]);
    if (ev.partner) {
      const p = ev.partner;
      if (ev.tip === "runtime") {
        rows.push(["launched", p.short + " on " + p.lane + ", started " +
          L.fmtTime(p.start - ev.start) + " after this call began"]);
      } else {
        rows.push(["launch call", p.short + " on " + p.lane + ", " +
          L.fmtTime(ev.start - p.start) + " before this started"]);
      }
    }
    return rows;
  }

  /** Idle gaps from their delta-encoded start and length ticks (timeline.py _encode_gaps). */
  function decodeGaps(g, tick) {
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

  /**
   * What to draw for the window [x0, x1] of a plot area `width` px wide: the columns of
   * every drawn source (exact events per hover kind, or aggregate bars; search marks;
   * hoverable gap pieces; bar and gap labels). `model` holds the decoded store (x, d, sig),
   * the signature table S and the decoded gaps G; `mark` flags signatures (search).
   */
  function draw(model, meta, x0, x1, width, mark) {
    const L = getLod();
    const { x, d, sig, S, G } = model;
    const off = meta.offsets;
    const nl = off.length - 1;
    const half = meta.bar / 2;
    const out = { mode: "", detail: {}, agg: empty(AGG_COLUMNS), marks: null, gapHover: null,
      barLabels: empty(["x", "y", "text"]), gapLabels: null };
    for (const k of KINDS) out.detail[k] = empty(DETAIL_COLUMNS);

    const b = L.bounds(x, off, meta.maxdur, x0, x1);
    const pxPerUs = width / Math.max(x1 - x0, 1e-9);
    const M = empty(["left", "right", "bottom", "top"]);
    let drawnL;
    let drawnR;
    let drawnLane;
    if (b.total <= meta.cap) {
      out.mode = "exact";
      const ex = L.exact(x, d, b, x0);
      const cols = {};
      for (const k of KINDS) cols[k] = empty(DETAIL_COLUMNS);
      const lab = empty(["x", "y", "text"]);
      for (let j = 0; j < ex.idx.length; j++) {
        const i = ex.idx[j];
        const l = ex.lanes[j];
        const s = sig[i];
        const k = S.cls[s];
        const c = cols[meta.tips[k]];
        const e = x[i] + d[i];
        c.left.push(x[i]); c.right.push(e); c.bottom.push(l - half); c.top.push(l + half);
        c.color.push(meta.colors[k]); c.i.push(i); c.name.push(S.name[s]);
        c.short.push(S.short[s]); c.kind.push(meta.labels[k]); c.dur.push(d[i]);
        c.grid.push(S.grid[s]); c.block.push(S.block[s]); c.occ.push(S.occ[s]);
        c.op.push(S.op[s]); c.extra.push(S.extra[s]); c.lane.push(meta.lanes[l]);
        if (mark && mark[s]) {
          M.left.push(x[i]); M.right.push(e); M.bottom.push(l - half); M.top.push(l + half);
        }
        const vis = (Math.min(e, x1) - Math.max(x[i], x0)) * pxPerUs;
        if (vis >= LABEL_MIN_PX && lab.x.length < LABELS_MAX) {
          const t = L.fitLabel(S.short[s], vis);
          if (t) { lab.x.push(Math.max(x[i], x0)); lab.y.push(l); lab.text.push(t); }
        }
      }
      out.detail = cols;
      out.barLabels = lab;
      drawnL = ex.idx.map((i) => x[i]);
      drawnR = ex.idx.map((i) => x[i] + d[i]);
      drawnLane = ex.lanes;
    } else {
      out.mode = "aggregate";
      const nb = L.binCount(nl, meta.agg_cap, meta.max_bins);
      const a = L.aggregate(x, d, sig, S.cls, meta.colors.length, b, x0, x1, nb, mark);
      const c = empty(AGG_COLUMNS);
      for (let j = 0; j < a.lane.length; j++) {
        const l = a.lane[j];
        c.left.push(a.left[j]); c.right.push(a.right[j]); c.bottom.push(l - half);
        c.top.push(l - half + meta.bar * Math.max(a.busy[j], 0.08));
        c.color.push(meta.colors[a.cls[j]]); c.busy.push(a.busy[j] * 100);
        c.events.push(a.events[j]); c.kind.push(meta.labels[a.cls[j]]);
        c.lane.push(meta.lanes[l]);
        if (a.marked[j]) {
          M.left.push(a.left[j]); M.right.push(a.right[j]); M.bottom.push(l - half);
          M.top.push(l + half);
        }
      }
      out.agg = c;
      drawnL = a.left;
      drawnR = a.right;
      drawnLane = a.lane;
    }
    out.marks = M;
    const pieces = L.clipGaps(G.left, G.right, G.li, drawnL, drawnR, drawnLane);
    const gh = empty(["left", "right", "bottom", "top", "dur", "cause_label", "cpu_work",
      "lane"]);
    for (const p of pieces) {
      const l = G.li[p.gap];
      gh.left.push(p.left); gh.right.push(p.right); gh.bottom.push(l - 0.5);
      gh.top.push(l + 0.5); gh.dur.push(G.dur[p.gap]);
      gh.cause_label.push(meta.gap_labels[G.cause[p.gap]]);
      gh.cpu_work.push(meta.cpu_work[G.cpu[p.gap]] || "unknown");
      gh.lane.push(meta.lanes[l]);
    }
    out.gapHover = gh;
    // A label on each gap piece wide enough on screen to hold one.
    const gl = empty(["x", "y", "text"]);
    for (const p of pieces) {
      if (gl.x.length >= LABELS_MAX) break;
      const px = (Math.min(p.right, x1) - Math.max(p.left, x0)) * pxPerUs;
      if (px < 2 * LABEL_MIN_PX) continue;
      const t = L.fitLabel(meta.gap_labels[G.cause[p.gap]], px);
      if (!t) continue;
      gl.x.push((Math.max(p.left, x0) + Math.min(p.right, x1)) / 2);
      gl.y.push(G.li[p.gap]);
      gl.text.push(t);
    }
    out.gapLabels = gl;
    return out;
  }

  /** A timeline on the page: `container` is its .nbp-timeline element. */
  function attach(container, doc, meta) {
    const L = getLod();
    const get = (n) => doc.get_model_by_name(n);
    const fig = get("nbprof-timeline");
    const xr = fig.x_range;
    const store = get("nbprof-store").data;
    const S = get("nbprof-sigs").data;
    const G = decodeGaps(get("nbprof-gap-data").data, meta.tick);
    const off = meta.offsets;
    const nl = off.length - 1;
    const { x, d } = L.decode(store.dx, store.dd, off, meta.tick);
    const link = L.decodeLinks(store.dl, off);
    const sig = store.sig;
    const half = meta.bar / 2;
    const model = { x, d, sig, S, G };
    const detail = {};
    for (const k of KINDS) detail[k] = get("nbprof-detail-" + k);
    const agg = get("nbprof-aggregate");
    const gapHover = get("nbprof-gap-hover");
    const marks = get("nbprof-marks");
    const pinned = get("nbprof-pinned");
    const linkSrc = get("nbprof-link");
    const barLabels = get("nbprof-bar-labels");
    const gapLabels = get("nbprof-gap-labels");
    // Idle-gap shading, per cause (static: it does not depend on the zoom).
    meta.gap_causes.forEach((cause, c) => {
      const src = get("nbprof-gaps-" + cause);
      if (!src) return;
      const o = empty(["left", "right", "bottom", "top"]);
      for (let g = 0; g < G.left.length; g++) {
        if (G.cause[g] !== c) continue;
        o.left.push(G.left[g]); o.right.push(G.right[g]); o.bottom.push(G.li[g] - 0.5);
        o.top.push(G.li[g] + 0.5);
      }
      src.data = o;
    });
    const full = [xr.bounds ? xr.bounds[0] : xr.start, xr.bounds ? xr.bounds[1] : xr.end];
    const state = { mark: null, matches: [], cursor: -1, pinned: -1, mouseX: null, mode: "" };

    function eventInfo(i) {
      const s = sig[i];
      const k = S.cls[s];
      const lane = L.laneOf(off, i);
      return { i, start: x[i], dur: d[i], end: x[i] + d[i], lane: meta.lanes[lane], li: lane,
        name: S.name[s], short: S.short[s], kind: meta.labels[k], tip: meta.tips[k],
        grid: S.grid[s], block: S.block[s], occ: S.occ[s], op: S.op[s], extra: S.extra[s],
        bytes: S.bytes ? S.bytes[s] : NaN, cls: k };
    }

    function frameWidth() {
      const v = plotView(doc, fig);
      return v && v.frame.bbox.width > 0 ? v.frame.bbox.width : 800;
    }

    function update() {
      const out = draw(model, meta, xr.start, xr.end, frameWidth(), state.mark);
      for (const k of KINDS) detail[k].data = out.detail[k];
      agg.data = out.agg;
      marks.data = out.marks;
      gapHover.data = out.gapHover;
      barLabels.data = out.barLabels;
      gapLabels.data = out.gapLabels;
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

    // -- overview strip: the whole run, once ------------------------------------------
    // Drawn after the main plot's first paint: on a million events it is a second pass
    // over all of them that the first view need not wait for.
    const ovSrc = get("nbprof-overview-bars");
    const drawOverview = () => {
      if (!ovSrc) return;
      const b = L.bounds(x, off, meta.maxdur, full[0], full[1]);
      const a = L.aggregate(x, d, sig, S.cls, meta.colors.length, b, full[0], full[1],
        meta.overview_bins, null);
      const c = empty(["left", "right", "bottom", "top", "color"]);
      for (let j = 0; j < a.lane.length; j++) {
        const l = a.lane[j];
        c.left.push(a.left[j]); c.right.push(a.right[j]); c.bottom.push(l - half);
        c.top.push(l - half + meta.bar * Math.max(a.busy[j], 0.08));
        c.color.push(meta.colors[a.cls[j]]);
      }
      ovSrc.data = c;
    };
    if (typeof requestAnimationFrame === "function") {
      requestAnimationFrame(() => setTimeout(drawOverview, 0));
    } else {
      drawOverview();
    }

    // -- details pane (click to pin) ---------------------------------------------------
    const pane = container.querySelector(".nbp-details");
    function renderPane(ev) {
      if (!pane) return;
      pane.textContent = "";
      if (!ev) {
        pane.hidden = true;
        return;
      }
      pane.hidden = false;
      const head = document.createElement("div");
      head.className = "nbp-details-head";
      const title = document.createElement("b");
      title.textContent = ev.short;
      head.append(title);
      const close = document.createElement("button");
      close.type = "button";
      close.textContent = "unpin (Esc)";
      close.addEventListener("click", () => pin(-1));
      const zoom = document.createElement("button");
      zoom.type = "button";
      zoom.textContent = ev.partner ? "zoom to launch + kernel" : "zoom to event";
      zoom.addEventListener("click", () => zoomTo(ev));
      head.append(zoom, close);
      pane.append(head);
      if (ev.name !== ev.short) {
        const det = document.createElement("details");
        const sum = document.createElement("summary");
        sum.textContent = "full name";
        const code = document.createElement("code");
        code.textContent = ev.name;
        det.append(sum, code);
        pane.append(det);
      }
      const dl = document.createElement("dl");
      for (const [k, v] of detailRows(ev)) {
        const dt = document.createElement("dt");
        dt.textContent = k;
        const dd = document.createElement("dd");
        dd.textContent = v;
        dl.append(dt, dd);
      }
      pane.append(dl);
    }

    function zoomTo(ev) {
      let s = ev.start;
      let e = ev.end;
      if (ev.partner) {
        s = Math.min(s, ev.partner.start);
        e = Math.max(e, ev.partner.end);
      }
      const w = Math.max(e - s, 1e-3);
      const r = L.zoomRange(s - w, e + w, (s + e) / 2, 1, full, 1e-3);
      setRange(r[0], r[1]);
    }

    function pin(i) {
      state.pinned = i;
      if (i < 0) {
        pinned.data = empty(["left", "right", "bottom", "top"]);
        linkSrc.data = empty(["x0", "y0", "x1", "y1"]);
        renderPane(null);
        container.removeAttribute("data-nbp-pinned");
        return;
      }
      const ev = eventInfo(i);
      const P = empty(["left", "right", "bottom", "top"]);
      const add = (e) => {
        P.left.push(e.start); P.right.push(e.end); P.bottom.push(e.li - 0.5);
        P.top.push(e.li + 0.5);
      };
      add(ev);
      const LK = empty(["x0", "y0", "x1", "y1"]);
      if (link[i] >= 0) {
        ev.partner = eventInfo(link[i]);
        add(ev.partner);
        const launch = ev.tip === "runtime" ? ev : ev.partner;
        const gpu = ev.tip === "runtime" ? ev.partner : ev;
        LK.x0.push(launch.start); LK.y0.push(launch.li); LK.x1.push(gpu.start);
        LK.y1.push(gpu.li);
      }
      pinned.data = P;
      linkSrc.data = LK;
      renderPane(ev);
      container.setAttribute("data-nbp-pinned", String(i));
    }

    /** The event under data coordinate `t` on lane `l`: the shortest one containing it,
     * else the nearest within `tol` µs. */
    function hit(t, l, tol) {
      if (l < 0 || l >= nl) return -1;
      const a = L.lower(x, off[l], off[l + 1], t - meta.maxdur[l] - tol);
      const b = L.lower(x, a, off[l + 1], t + tol + 1e-9);
      let best = -1;
      let bestD = Infinity;
      for (let i = a; i < b; i++) {
        const dist = t < x[i] ? x[i] - t : t > x[i] + d[i] ? t - x[i] - d[i] : 0;
        const score = dist > 0 ? dist + 1e12 : d[i];
        if (dist <= tol && score < bestD) {
          bestD = score;
          best = i;
        }
      }
      return best;
    }

    function toData(ev) {
      const v = plotView(doc, fig);
      if (!v) return null;
      const r = v.canvas_view.el.getBoundingClientRect();
      const sx = ev.clientX - r.left;
      const sy = ev.clientY - r.top;
      const f = v.frame.bbox;
      if (sx < f.left || sx > f.right || sy < f.top || sy > f.bottom) return null;
      return { t: v.frame.x_scale.invert(sx), lane: Math.round(v.frame.y_scale.invert(sy)),
        usPerPx: (xr.end - xr.start) / f.width };
    }

    const plotEl = container.querySelector(".nbp-root-main") || container;
    let down = null;
    plotEl.addEventListener("pointerdown", (e) => {
      down = { x: e.clientX, y: e.clientY };
    });
    plotEl.addEventListener("pointerup", (e) => {
      if (!down || Math.hypot(e.clientX - down.x, e.clientY - down.y) > 4) return;
      down = null;
      // Focus (for the keys) on a click only: JupyterLab scrolls to a cell that takes focus,
      // which would move the plot under a drag that has just begun.
      if (container.focus) container.focus({ preventScroll: true });
      const p = toData(e);
      if (!p) return;
      const i = hit(p.t, p.lane, 3 * p.usPerPx);
      pin(i);
    });
    plotEl.addEventListener("pointermove", (e) => {
      const p = toData(e);
      state.mouseX = p ? p.t : null;
    });
    plotEl.addEventListener("pointerleave", () => { state.mouseX = null; });

    // -- search ------------------------------------------------------------------------
    const input = container.querySelector(".nbp-search input");
    const count = container.querySelector(".nbp-search-count");
    function search(q, exactName) {
      if (exactName) {
        state.mark = new Uint8Array(S.name.length);
        for (let s = 0; s < S.name.length; s++) if (S.name[s] === q) state.mark[s] = 1;
      } else {
        state.mark = q ? L.matchSigs(S.name, q) : null;
      }
      state.matches = state.mark ? L.markedEvents(sig, state.mark) : [];
      // Next match in time order, whatever its lane.
      state.matches.sort((a, b) => x[a] - x[b]);
      state.cursor = -1;
      if (count) {
        const n = state.matches.length;
        count.textContent = !q ? "" : n === 0 ? "no match" : n === 1 ? "1 match"
          : n.toLocaleString("en-US") + " matches";
      }
      container.setAttribute("data-nbp-matches", String(state.matches.length));
      schedule();
    }
    function step(dir) {
      const n = state.matches.length;
      if (!n) return;
      state.cursor = (state.cursor + dir + n) % n;
      const i = state.matches[state.cursor];
      const w = xr.end - xr.start;
      // Keep the zoom when the event is readable at it (>= 1/200 of the view), else zoom to
      // 50x its duration.
      const want = w > 200 * Math.max(d[i], 1e-3) ? Math.max(50 * d[i], 1) : w;
      const mid = x[i] + d[i] / 2;
      const r = L.zoomRange(mid - want / 2, mid + want / 2, mid, 1, full, 1e-3);
      setRange(r[0], r[1]);
      pin(i);
      if (count) {
        count.textContent = (state.cursor + 1).toLocaleString("en-US") + " of " +
          n.toLocaleString("en-US");
      }
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
      if (e.ctrlKey || e.metaKey || e.altKey) return;
      // Keys typed into a form field (the search box, the details pane's buttons) are not
      // timeline shortcuts; keys on the plot (Bokeh focuses its canvas on click) are.
      const t = e.composedPath ? e.composedPath()[0] : e.target;
      if (t && t.tagName && /^(INPUT|TEXTAREA|SELECT|BUTTON)$/.test(t.tagName)) return;
      const k = e.key.toLowerCase();
      const anchor = state.mouseX !== null ? state.mouseX : (xr.start + xr.end) / 2;
      let r = null;
      if (k === "w") r = L.zoomRange(xr.start, xr.end, anchor, ZOOM_STEP, full, 1e-3);
      else if (k === "s") r = L.zoomRange(xr.start, xr.end, anchor, 1 / ZOOM_STEP, full, 1e-3);
      else if (k === "a") r = L.panRange(xr.start, xr.end, -PAN_STEP, full);
      else if (k === "d") r = L.panRange(xr.start, xr.end, PAN_STEP, full);
      else if (k === "0") r = full.slice();
      else if (k === "escape") pin(-1);
      else if (k === "/" && input) input.focus();
      else return;
      // Handled here: JupyterLab's command-mode shortcuts (A inserts a cell) must not run.
      e.preventDefault();
      e.stopPropagation();
      if (r) setRange(r[0], r[1]);
    });

    // -- theme and alignment -----------------------------------------------------------
    const themed = container.closest(".nbprof") || container;
    let lastTheme = "";
    function retheme() {
      const t = themeOf(themed);
      const key = JSON.stringify(t);
      if (key === lastTheme) return;
      lastTheme = key;
      applyTheme(doc, t);
    }
    retheme();
    if (typeof MutationObserver === "function") {
      // JupyterLab switches themes by changing attributes of <body> (data-jp-theme-light).
      const mo = new MutationObserver(() => retheme());
      mo.observe(document.body, { attributes: true });
      container._nbpObserver = mo;
    }
    if (globalThis.matchMedia) {
      const mq = globalThis.matchMedia("(prefers-color-scheme: dark)");
      if (mq.addEventListener) mq.addEventListener("change", retheme);
    }
    let tries = 0;
    function align() {
      const views = viewsOf(doc).filter((v) => v.frame && v.model.x_range !== undefined);
      const ready = views.length > 0 && views.every((v) => v.frame.bbox.width > 0);
      if (ready) {
        if (alignFrames(views)) requestAnimationFrame(align);
        else schedule(); // labels depend on the frame's final width
        return;
      }
      if (++tries < 300) requestAnimationFrame(align);
    }
    requestAnimationFrame(align);

    update();
    const api = {
      doc, update, pin, search, step, setRange, state, full, eventInfo,
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

  return { attach, draw, detailRows, decodeGaps, viewsOf, alignFrames, themeOf };
});
