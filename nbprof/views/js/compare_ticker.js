// Bokeh CustomJSTicker body, for both its major and its minor ticks: ticks at round times
// of the shared scale (µs since the run's first step or first GPU event), returned in the
// timeline's own coordinates. `shift` is that origin in the timeline's own coordinates.
// The minor call's cb_data carries the major ticks; it gets five ticks per major step.
"use strict";
const lo = cb_data.start - shift;
const hi = cb_data.end - shift;
const span = hi - lo;
if (!(span > 0) || !Number.isFinite(span)) {
  return [];
}
const target = span / 8; // about eight labelled ticks across the plot
const mag = Math.pow(10, Math.floor(Math.log10(target)));
const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= target);
const every = cb_data.major_ticks !== undefined ? step / 5 : step;
const ticks = [];
for (let k = Math.ceil(lo / every); k * every <= hi && ticks.length < 1000; k++) {
  ticks.push(k * every + shift);
}
return ticks;
