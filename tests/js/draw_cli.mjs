// Runs the browser's drawing code (nbprof/views/js) on a timeline document exported by
// tests/js_draw.py (JSON on stdin, the document packed as the page carries it) and prints
// what the browser would put in each drawn source (JSON on stdout). With "strict", reading a field the document does not hold
// throws (tests/test_views_timeline_doc.py).
import { open } from "../../nbprof/views/js/document.mjs";
import { draw, gapShading, overview } from "../../nbprof/views/js/draw.mjs";
import { paneRows } from "../../nbprof/views/js/fields.mjs";
import { layoutOf } from "../../nbprof/views/js/fold.mjs";
import { matchSigs } from "../../nbprof/views/js/search.mjs";
import { unpack } from "../../nbprof/views/js/wire.mjs";

/** `obj` where reading a missing key of any plain object or array inside it throws. */
function strict(obj, path = "tdoc") {
  if (obj === null || typeof obj !== "object" || ArrayBuffer.isView(obj)) return obj;
  return new Proxy(obj, {
    get(target, key, receiver) {
      if (typeof key === "symbol" || key in target) {
        return strict(Reflect.get(target, key, receiver), path + "." + String(key));
      }
      throw new Error("the browser read " + path + "." + key + ", which the document lacks");
    },
  });
}

let input = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => { input += chunk; });
process.stdin.on("end", async () => {
  const q = JSON.parse(input);
  const unpacked = await unpack(q.pack);
  const tdoc = q.strict ? strict(unpacked) : unpacked;
  const m = await open(tdoc);
  const layout = layoutOf(tdoc, q.collapsed || null);
  const mark = q.query ? matchSigs(m.S.name, q.query) : null;
  const out = draw(m, q.x0, q.x1, q.width, mark, layout);
  out.shading = gapShading(m, layout);
  out.overview = overview(m, [q.x0, q.x1]);
  if (q.pane) out.pane = Array.from(m.x, (_, i) => paneRows(m, i));
  out.link = Array.from(m.link);
  out.x = Array.from(m.x);
  out.d = Array.from(m.d);
  out.gaps = { left: Array.from(m.G.left), right: Array.from(m.G.right),
    li: Array.from(m.G.li), cause: Array.from(m.G.cause) };
  process.stdout.write(JSON.stringify(out));
});
