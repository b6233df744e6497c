// Bokeh CustomJSTickFormatter body: labels a tick of one stacked timeline (µs in its own
// coordinates) as the time since that run's origin (its first step or first GPU event),
// so both timelines read on one scale; formatted as the timeline's own axes are (lod.js
// fmtTime). `shift` is the origin in the timeline's own coordinates.
"use strict";
const lod = globalThis.nbprof && globalThis.nbprof.lod;
const t = tick - shift;
return lod ? lod.fmtTime(t) : String(t);
