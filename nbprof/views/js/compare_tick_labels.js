// Bokeh CustomJSTickFormatter body: labels a tick of one stacked timeline (µs in its own
// coordinates) as the time since that run's origin (its first step or first GPU event),
// so both timelines read on one scale. `shift` is the origin in the timeline's coordinates.
const t = tick - shift;
const a = Math.abs(t);
// Four significant digits without trailing zeros ("1.5 ms", not "1.500 ms"); a number
// with no decimal point keeps its zeros ("1000 s").
const trim = (s) => (s.includes(".") ? s.replace(/\.?0+$/, "") : s);
if (a >= 1e6) {
  return trim((t / 1e6).toPrecision(4)) + " s";
}
if (a >= 1e3) {
  return trim((t / 1e3).toPrecision(4)) + " ms";
}
return trim(t.toPrecision(4)) + " µs";
