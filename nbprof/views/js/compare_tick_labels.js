// Bokeh CustomJSTickFormatter body: labels a tick of one stacked timeline (µs in its own
// coordinates) as the time since that run's origin (its first step or first GPU event),
// so both timelines read on one scale; formatted as the timeline's own axes are (format.mjs
// fmtTime). `shift` is the origin in the timeline's own coordinates.
"use strict";
const format = globalThis.nbprof && globalThis.nbprof.format;
const t = tick - shift;
return format ? format.fmtTime(t) : String(t);
