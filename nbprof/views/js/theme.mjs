/*
 * nbprof timeline: the page's theme on the plots (JupyterLab's CSS variables through the
 * dashboard's, or the system's light/dark preference).
 */

/** Text, muted text, background, plot background, rule and label colours around `el`. */
export function themeOf(el) {
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

/** Theme `t` on every plot of Bokeh document `doc`; `main` names the timeline plot. */
export function applyTheme(doc, t, main) {
  for (const fig of doc.roots()) {
    if (fig.x_range === undefined) continue;
    fig.setv({ background_fill_color: t.plot, border_fill_color: t.bg,
      outline_line_color: fig.name === main ? null : t.rule });
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

/** Keep `doc`'s plots in the theme of `el` as JupyterLab or the system switches it. */
export function followTheme(doc, el, main) {
  let last = "";
  const retheme = () => {
    const t = themeOf(el);
    const key = JSON.stringify(t);
    if (key === last) return;
    last = key;
    applyTheme(doc, t, main);
  };
  retheme();
  let observer = null;
  if (typeof MutationObserver === "function") {
    // JupyterLab switches themes by changing attributes of <body> (data-jp-theme-light).
    observer = new MutationObserver(retheme);
    observer.observe(document.body, { attributes: true });
  }
  if (globalThis.matchMedia) {
    const mq = globalThis.matchMedia("(prefers-color-scheme: dark)");
    if (mq.addEventListener) mq.addEventListener("change", retheme);
  }
  return observer;
}
