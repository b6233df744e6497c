/*
 * nbprof dashboard: embeds each dashboard's Bokeh document once BokehJS is on the page,
 * attaches its timeline (timeline.mjs), and makes the panel's tables sortable.
 *
 * BokehJS is loaded once per notebook page (the load bundle nbprof publishes with its
 * first dashboard, see nbprof/views/dashboard.py), so a dashboard may run before
 * it, after it, or on a page where it was cleared. A dashboard that finds no BokehJS waits
 * in globalThis.__nbprof_pending, which the load bundle drains when it runs; after a few
 * seconds it also says, in the output, how to make it draw.
 *
 * Each dashboard carries its documents packed in <script type="application/vnd.nbprof.pack">
 * (wire.mjs: the Bokeh document, and the timeline document as `meta`); this embeds every
 * one not yet embedded, so the same script serves a notebook output, an nbconvert export
 * and the standalone report.
 */
import { sortable } from "./tables.mjs";
import { attach } from "./timeline.mjs";
import { unpack } from "./wire.mjs";

const PAYLOAD = 'script[type="application/vnd.nbprof.pack"]';
/** How long a dashboard waits for BokehJS before it says how to load it. */
const WAIT_MS = 4000;
export const NEEDS_BOKEH =
  "The timeline needs BokehJS, which nbprof loads once per notebook, with the first " +
  "dashboard of a kernel session. That output is not on this page (cleared, deleted, or " +
  "this output was copied without it). Run %reload_ext nbprof in any cell, and this " +
  "timeline draws; or restart the kernel and run the notebook again.";

/** Rows with data-nbp-kernel zoom the timeline of the same dashboard to that kernel. */
function kernelLinks(dash, timeline) {
  for (const row of dash.querySelectorAll("[data-nbp-kernel]")) {
    if (row._nbpLinked) continue;
    row._nbpLinked = true;
    row.tabIndex = 0;
    const go = () => {
      const api = timeline && timeline._nbprof;
      if (!api) return;
      api.zoomToName(row.getAttribute("data-nbp-kernel"));
      timeline.scrollIntoView({ block: "nearest", behavior: "smooth" });
    };
    row.addEventListener("click", go);
    row.addEventListener("keydown", (e) => {
      if (e.key === "Enter") {
        e.preventDefault();
        e.stopPropagation();
        go();
      }
    });
  }
}

/** Root divs get ids unique on this page (the same output can be shown twice). */
function uniqueRoots(container, item) {
  const roots = item.roots || {};
  const suffix = "-" + Math.random().toString(36).slice(2, 10);
  for (const [model, elementId] of Object.entries(roots)) {
    const el = container.querySelector('[data-root-id="' + model + '"]');
    if (!el) continue;
    el.id = elementId + suffix;
    roots[model] = el.id;
  }
  return item;
}

function say(container, text) {
  let el = container.querySelector(".nbp-needs-bokeh");
  if (!el) {
    el = document.createElement("div");
    el.className = "nbp-needs-bokeh";
    container.prepend(el);
  }
  el.textContent = text;
}

async function embedOne(payloadEl) {
  const dash = payloadEl.closest(".nbprof");
  const container = dash ? dash.querySelector(".nbp-timeline") : null;
  if (!container) return;
  const payload = await unpack(payloadEl.textContent);
  const B = globalThis.Bokeh;
  const item = uniqueRoots(container, payload.render_items[0]);
  await B.embed.embed_items(payload.docs_json, [item]);
  // The document just made: the latest one holding this item's first root (the same
  // output shown twice has two documents with the same model ids).
  const first = (item.root_ids || Object.keys(item.roots || {}))[0];
  const docs = B.documents || [];
  let theDoc = null;
  for (let k = docs.length - 1; k >= 0 && theDoc === null; k--) {
    if (docs[k].get_model_by_id(first)) theDoc = docs[k];
  }
  if (theDoc === null) throw new Error("Bokeh did not register the timeline's document");
  const note = container.querySelector(".nbp-needs-bokeh");
  if (note) note.remove();
  await attach(container, theDoc, payload.meta);
  kernelLinks(dash, container);
}

/** Embed every dashboard of `document` not embedded yet (now, or once BokehJS is there). */
export function embedAll(document) {
  if (!document || !document.querySelectorAll) return;
  for (const t of document.querySelectorAll(".nbprof table.nbp-sortable")) sortable(t);
  const todo = [...document.querySelectorAll(PAYLOAD)].filter((el) => !el._nbpSeen);
  for (const el of todo) {
    el._nbpSeen = true;
    const run = () => embedOne(el).catch((e) => {
      const dash = el.closest(".nbprof");
      const c = dash && dash.querySelector(".nbp-timeline");
      if (c) say(c, "The timeline could not be drawn: " + e);
      throw e;
    });
    if (globalThis.Bokeh && globalThis.Bokeh.embed) {
      run();
      continue;
    }
    const pending = (globalThis.__nbprof_pending = globalThis.__nbprof_pending || []);
    pending.push(run);
    const started = Date.now();
    const poll = setInterval(() => {
      // BokehJS loaded by something else than nbprof's bundle (output_notebook()).
      if (globalThis.Bokeh && globalThis.Bokeh.embed) {
        clearInterval(poll);
        drain();
      } else if (Date.now() - started > WAIT_MS) {
        clearInterval(poll);
        const dash = el.closest(".nbprof");
        const c = dash && dash.querySelector(".nbp-timeline");
        if (c && !c.hasAttribute("data-nbp-ready")) say(c, NEEDS_BOKEH);
      }
    }, 100);
  }
}

/** Run every dashboard that waited for BokehJS (called by the load bundle too). */
export function drain() {
  const pending = globalThis.__nbprof_pending || [];
  globalThis.__nbprof_pending = [];
  for (const run of pending) run();
}
