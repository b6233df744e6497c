// Runs timeline.js's draw() on a timeline exported by tests/js_draw.py (JSON on stdin) and
// prints what the browser would put in each drawn source (JSON on stdout).
"use strict";
const path = require("node:path");
const js = path.join(__dirname, "..", "..", "nbprof", "views", "js");
const lod = require(path.join(js, "lod.js"));
const timeline = require(path.join(js, "timeline.js"));

let input = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => { input += chunk; });
process.stdin.on("end", () => {
  const q = JSON.parse(input);
  const m = q.meta;
  const { x, d } = lod.decode(q.store.dx, q.store.dd, m.offsets, m.tick);
  const G = timeline.decodeGaps(q.gaps, m.tick);
  const model = { x, d, sig: q.store.sig, S: q.sigs, G };
  const mark = q.query ? lod.matchSigs(q.sigs.name, q.query) : null;
  const out = timeline.draw(model, m, q.x0, q.x1, q.width, mark);
  out.link = Array.from(lod.decodeLinks(q.store.dl, m.offsets));
  out.x = Array.from(x);
  out.d = Array.from(d);
  out.gaps = { left: Array.from(G.left), right: Array.from(G.right), li: Array.from(G.li),
    cause: Array.from(G.cause) };
  process.stdout.write(JSON.stringify(out));
});
