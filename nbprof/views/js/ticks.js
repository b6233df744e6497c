// Body of the timeline's CustomJSTickFormatter (Bokeh passes `tick`): time axis labels in
// s / ms / µs, formatted by the same function as the details pane (lod.js fmtTime).
const lod = globalThis.nbprof && globalThis.nbprof.lod;
return lod ? lod.fmtTime(tick) : String(tick);
