/*
 * nbprof timeline: the details pane below the plot. Every string from the trace goes in
 * as text (textContent), never as markup.
 */

function button(text, onClick) {
  const b = document.createElement("button");
  b.type = "button";
  b.textContent = text;
  b.addEventListener("click", onClick);
  return b;
}

/**
 * Show event `ev` ({short, name}) with its [label, text] `rows` in `pane`, with buttons
 * to zoom to it (`zoomLabel`, `onZoom`) and to unpin it (`onUnpin`); hide it for null.
 */
export function renderPane(pane, ev, rows, zoomLabel, onZoom, onUnpin) {
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
  head.append(title, button(zoomLabel, onZoom), button("unpin (Esc)", onUnpin));
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
  for (const [k, v] of rows) {
    const dt = document.createElement("dt");
    dt.textContent = k;
    const dd = document.createElement("dd");
    dd.textContent = v;
    dl.append(dt, dd);
  }
  pane.append(dl);
}
