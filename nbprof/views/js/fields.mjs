/*
 * nbprof timeline: the values of what is drawn, by the names the timeline document gives
 * them (nbprof/views/timeline/fields.py declares each source's columns and the details
 * pane's rows; nothing here lists them again). Pure functions.
 *
 * The values of an event are the columns of its signature (S) and those derived below;
 * an aggregate bar's and an idle gap's are those of BIN and GAP.
 */
import { fmtTime } from "./format.mjs";
import { laneOf } from "./lod.mjs";

/** How a row's "{value:format}" reads in the details pane (fields.py BOKEH_FORMATS are
 * the tooltips' forms of the same formats). */
export const FORMATS = {
  us: fmtTime,
  us1: fmtTime,
  pct: (v) => v.toFixed(1) + " %",
  gbps: (v) => v.toFixed(2) + " GB/s",
};

function partnerOf(m, i) {
  const p = m.link[i];
  return p >= 0 ? p : -1;
}

function tipOf(m, i) {
  return m.tdoc.tips[m.S.cls[m.sig[i]]];
}

/** Event values that are not signature columns: (model, event, its lane) -> value. */
const EVENT = {
  i: (m, i) => i,
  start: (m, i) => m.x[i],
  end: (m, i) => m.x[i] + m.d[i],
  dur: (m, i) => m.d[i],
  kind: (m, i) => m.tdoc.labels[m.S.cls[m.sig[i]]],
  tip: tipOf,
  lane: (m, i, l) => m.tdoc.lanes[l],
  // A copy's or memset's size over its duration, GB/s; none without both.
  rate: (m, i) => {
    const b = m.S.bytes ? m.S.bytes[m.sig[i]] : NaN;
    return b > 0 && m.d[i] > 0 ? b / m.d[i] / 1e3 : undefined;
  },
  partner: (m, i) => {
    const p = partnerOf(m, i);
    return p >= 0 ? m.S.short[m.sig[p]] : undefined;
  },
  partner_lane: (m, i) => {
    const p = partnerOf(m, i);
    return p >= 0 ? m.tdoc.lanes[laneOf(m.tdoc.offsets, p)] : undefined;
  },
  // From the launch call's start to its GPU event's start, whichever of the two `i` is.
  launch_to_start: (m, i) => {
    const p = partnerOf(m, i);
    if (p < 0) return undefined;
    return tipOf(m, i) === "runtime" ? m.x[p] - m.x[i] : m.x[i] - m.x[p];
  },
};

/** Aggregate bar values: (model, aggregate, bar) -> value (lod.mjs aggregate). */
const BIN = {
  busy: (m, a, j) => a.busy[j] * 100,
  events: (m, a, j) => a.events[j],
  kind: (m, a, j) => m.tdoc.labels[a.cls[j]],
  lane: (m, a, j) => m.tdoc.lanes[a.lane[j]],
};

/** Idle gap values: (model, gap) -> value. */
const GAP = {
  dur: (m, g) => m.G.dur[g],
  cause_label: (m, g) => m.tdoc.gap_labels[m.G.cause[g]],
  cpu_work: (m, g) => m.tdoc.cpu_work[m.G.cpu[g]] || "unknown",
  lane: (m, g) => m.tdoc.lanes[m.G.li[g]],
};

function unknown(what, name) {
  return new Error("the timeline document names " + what + " value '" + name +
    "', which this page's nbprof scripts do not know");
}

/** The getter of event value `name`: (model, i, lane) -> value. */
export function eventValue(name, S) {
  if (Object.prototype.hasOwnProperty.call(EVENT, name)) return EVENT[name];
  if (S && Object.prototype.hasOwnProperty.call(S, name)) return (m, i) => m.S[name][m.sig[i]];
  throw unknown("an event", name);
}

function table(values, what) {
  return (name) => {
    if (Object.prototype.hasOwnProperty.call(values, name)) return values[name];
    throw unknown(what, name);
  };
}

export const binValue = table(BIN, "an aggregate bar");
export const gapValue = table(GAP, "an idle gap");

/** Columns `names`, each empty. */
export function empty(names) {
  const o = {};
  for (const c of names) o[c] = [];
  return o;
}

/**
 * A filler of a source's columns other than `own` (those its caller computes, such as
 * the geometry): fill(out, ...args) pushes each column's value for args.
 */
export function filler(columns, own, getterOf) {
  const pairs = columns.filter((c) => !own.includes(c)).map((c) => [c, getterOf(c)]);
  return (out, a, b, c) => {
    for (const [col, get] of pairs) out[col].push(get(a, b, c));
  };
}

function missing(v) {
  return v === undefined || v === null || v === "" || (typeof v === "number" && isNaN(v));
}

/**
 * A row's text with its "{value}" and "{value:format}" filled by `valueOf(name)`, or
 * null when a value it names is missing (the row is left out).
 */
export function fillText(text, valueOf) {
  let gone = false;
  const out = text.replace(/\{(\w+)(?::(\w+))?\}/g, (_, name, fmt) => {
    const v = valueOf(name);
    if (missing(v)) {
      gone = true;
      return "";
    }
    if (fmt === undefined) return String(v);
    if (!FORMATS[fmt]) throw new Error("unknown format " + fmt);
    return FORMATS[fmt](v);
  });
  return gone ? null : out;
}

/** The details pane of event i: [label, text] rows (the document's, for its kind). */
export function paneRows(m, i) {
  const l = laneOf(m.tdoc.offsets, i);
  const rows = m.tdoc.pane[tipOf(m, i)] || [];
  const valueOf = (name) => eventValue(name, m.S)(m, i, l);
  const out = [];
  for (const [label, text] of rows) {
    const t = fillText(text, valueOf);
    if (t !== null) out.push([label, t]);
  }
  return out;
}
