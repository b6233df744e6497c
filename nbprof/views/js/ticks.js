// Body of the timeline's CustomJSTickFormatter (Bokeh passes `tick`): time axis labels in
// s / ms / µs, formatted by the same function as the details pane (format.mjs fmtTime).
const format = globalThis.nbprof && globalThis.nbprof.format;
return format ? format.fmtTime(tick) : String(tick);
